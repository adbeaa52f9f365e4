package cgroup

import (
	"fmt"
	"strings"
)

// membership is one line of /proc/<pid>/cgroup:
// "hierarchy-ID:controller-list:cgroup-path".
type membership struct {
	controllers []string // empty for the v2 line "0::/path"
	mountName   string   // the controller list as written, e.g. "cpu,cpuacct"
	path        string
}

func parseProcCgroup(text string) ([]membership, error) {
	var out []membership
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		// The path may itself contain ':', so split into at most 3 fields.
		fields := strings.SplitN(line, ":", 3)
		if len(fields) != 3 {
			return nil, fmt.Errorf("line %d: want id:controllers:path, got %q", n+1, line)
		}
		m := membership{mountName: fields[1], path: fields[2]}
		if fields[1] != "" {
			m.controllers = strings.Split(fields[1], ",")
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no cgroup lines")
	}
	return out, nil
}

func findController(ms []membership, name string) (membership, bool) {
	for _, m := range ms {
		for _, c := range m.controllers {
			if c == name {
				return m, true
			}
		}
	}
	return membership{}, false
}

func findUnified(ms []membership) (membership, bool) {
	for _, m := range ms {
		if m.mountName == "" {
			return m, true
		}
	}
	return membership{}, false
}
