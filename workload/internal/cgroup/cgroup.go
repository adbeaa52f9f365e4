// Package cgroup reads the CPU settings and counters of the calling process's
// own cgroup, v1 or v2, into one normalised Record.
package cgroup

import (
	"errors"
	"os"
	"strings"
)

// Environment variables that point the reader at another tree (tests use
// fixture trees; containers may mount the hierarchy elsewhere).
const (
	EnvRoot       = "CPULAB_CGROUP_ROOT"
	EnvProcCgroup = "CPULAB_PROC_CGROUP"

	defaultRoot       = "/sys/fs/cgroup"
	defaultProcCgroup = "/proc/self/cgroup"
)

// Record is the normalised view of a cgroup's CPU settings and counters.
// Pointer fields are null in JSON when the value does not exist or could
// not be read; Error then says why (only for things that should exist).
type Record struct {
	Version  int    `json:"version"`
	Path     string `json:"path"`
	QuotaUS  *int64 `json:"quota_us"`
	PeriodUS *int64 `json:"period_us"`
	BurstUS  *int64 `json:"burst_us"`
	Weight   *int64 `json:"weight"`
	Shares   *int64 `json:"shares"`
	Counters
	Error string `json:"error,omitempty"`
}

// Read reads the calling process's cgroup, honouring CPULAB_CGROUP_ROOT and
// CPULAB_PROC_CGROUP.
func Read() Record {
	return ReadFrom(envOr(EnvRoot, defaultRoot), envOr(EnvProcCgroup, defaultProcCgroup))
}

// ReadFrom reads the cgroup named in procCgroupFile (a /proc/<pid>/cgroup
// file) under the hierarchy mounted at root. v1 is used when the file has a
// v1 line for the cpu controller; otherwise v2.
func ReadFrom(root, procCgroupFile string) Record {
	data, err := os.ReadFile(procCgroupFile)
	if err != nil {
		return Record{Version: 2, Error: "read " + procCgroupFile + ": " + err.Error()}
	}
	memberships, err := parseProcCgroup(string(data))
	if err != nil {
		return Record{Version: 2, Error: procCgroupFile + ": " + err.Error()}
	}
	if cpu, ok := findController(memberships, "cpu"); ok {
		acct, hasAcct := findController(memberships, "cpuacct")
		return readV1(root, cpu, acct, hasAcct)
	}
	unified, ok := findUnified(memberships)
	if !ok {
		return Record{Version: 2, Error: procCgroupFile + ": no cpu controller line and no cgroup v2 line"}
	}
	return readV2(root, unified.path)
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

// problems collects what could not be read, so one bad file does not hide
// the values that could be.
type problems []string

func (p *problems) add(err error) {
	if err != nil {
		*p = append(*p, err.Error())
	}
}

func (p problems) String() string { return strings.Join(p, "; ") }

// isMissing reports whether err means the file does not exist, which for
// optional files (cpu.max.burst on older kernels) is not a problem.
func isMissing(err error) bool { return errors.Is(err, os.ErrNotExist) }
