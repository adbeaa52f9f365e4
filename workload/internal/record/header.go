package record

import (
	"flag"
	"os"
	"runtime"
	"runtime/debug"
	"time"

	"cpulab/internal/cgroup"
)

// Header is the first record of every subcommand: what ran, built how, where.
type Header struct {
	Type           string         `json:"type"`
	Program        string         `json:"program"`
	Version        string         `json:"version"`
	Variant        string         `json:"variant"`
	GoVersion      string         `json:"go_version"`
	GOMAXPROCS     int            `json:"gomaxprocs"`
	NumCPU         int            `json:"num_cpu"`
	Env            EnvVars        `json:"env"`
	DefaultGODEBUG string         `json:"default_godebug"`
	Cgroup         cgroup.Record  `json:"cgroup"`
	Command        string         `json:"command"`
	Params         map[string]any `json:"params"`
	PID            int            `json:"pid"`
	Time           string         `json:"time"`
}

// EnvVars are the environment variables that change Go's scheduler
// defaults; "" when unset.
type EnvVars struct {
	GOMAXPROCS string `json:"GOMAXPROCS"`
	GODEBUG    string `json:"GODEBUG"`
}

// Build identifies the binary: program version and build variant.
type Build struct {
	Version string
	Variant string
}

// NewHeader describes this process running command with the flags of fs.
func NewHeader(build Build, command string, fs *flag.FlagSet) Header {
	return Header{
		Type:           "header",
		Program:        "cpulab",
		Version:        build.Version,
		Variant:        build.Variant,
		GoVersion:      runtime.Version(),
		GOMAXPROCS:     runtime.GOMAXPROCS(0),
		NumCPU:         runtime.NumCPU(),
		Env:            EnvVars{GOMAXPROCS: os.Getenv("GOMAXPROCS"), GODEBUG: os.Getenv("GODEBUG")},
		DefaultGODEBUG: DefaultGODEBUG(),
		Cgroup:         cgroup.Read(),
		Command:        command,
		Params:         Params(fs),
		PID:            os.Getpid(),
		Time:           time.Now().Format(time.RFC3339Nano),
	}
}

// DefaultGODEBUG returns the GODEBUG defaults the linker recorded from the
// go.mod "go" line: a module older than the toolchain keeps the old
// behaviour of every setting changed since (containermaxprocs=0 below 1.25).
func DefaultGODEBUG() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, s := range info.Settings {
		if s.Key == "DefaultGODEBUG" {
			return s.Value
		}
	}
	return ""
}

// Params returns every flag of fs by name with its value; durations are
// written in milliseconds so all records share one unit.
func Params(fs *flag.FlagSet) map[string]any {
	params := map[string]any{}
	if fs == nil {
		return params
	}
	fs.VisitAll(func(f *flag.Flag) {
		getter, ok := f.Value.(flag.Getter)
		if !ok {
			params[f.Name] = f.Value.String()
			return
		}
		v := getter.Get()
		if d, isDuration := v.(time.Duration); isDuration {
			v = float64(d) / float64(time.Millisecond)
		}
		params[f.Name] = v
	})
	return params
}
