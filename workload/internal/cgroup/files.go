package cgroup

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// readInt reads a file holding one integer (cpu.shares, cpu.weight, ...).
func readInt(dir, name string) (int64, error) {
	text, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(text)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return v, nil
}

// readFlatKeyed reads a "key value" per line file such as cpu.stat.
func readFlatKeyed(dir, name string) (map[string]int64, error) {
	text, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, line := range strings.Split(string(text), "\n") {
		fields := strings.Fields(line)
		if len(fields) != 2 {
			continue
		}
		v, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: key %s: %w", name, fields[0], err)
		}
		out[fields[0]] = v
	}
	return out, nil
}

// firstExisting returns the first candidate directory that exists.
func firstExisting(candidates ...string) (string, bool) {
	for _, c := range candidates {
		if info, err := os.Stat(c); err == nil && info.IsDir() {
			return c, true
		}
	}
	return "", false
}

func ptr(v int64) *int64 { return &v }

// lookup returns a pointer to m[key], or nil when the key is absent.
func lookup(m map[string]int64, key string) *int64 {
	if v, ok := m[key]; ok {
		return ptr(v)
	}
	return nil
}

// scaled returns v/div, or nil when v is nil.
func scaled(v *int64, div int64) *int64 {
	if v == nil {
		return nil
	}
	return ptr(*v / div)
}
