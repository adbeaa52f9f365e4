// Package loadgen drives cpulab services over HTTP: open-loop Poisson
// arrivals conditioned on a fixed count in the warm-up and in the window
// (package pacer; latency from the scheduled send time, so a slow server
// cannot slow the generator down and hide its queue) or a closed loop of
// workers, balanced over several targets per connection the way
// kube-proxy does.
package loadgen

import (
	"fmt"
	"math"
	"net/url"
	"time"

	"cpulab/internal/pacer"
)

// Config describes one load run.
type Config struct {
	Targets  []string      // base URLs, http://host:port
	RPS      float64       // /work requests per second (open loop)
	Clump    int           // requests sent together per arrival (open loop)
	PingRPS  float64       // /ping requests per second; 0 for none
	Duration time.Duration // measured window
	Warmup   time.Duration // sent before the window, not recorded
	Seed     uint64
	Timeout  time.Duration // per request
	Closed   bool          // closed loop: Workers send back to back
	Workers  int
}

// FieldError says which setting is wrong, so the CLI can name the flag.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// Validate checks c; errors are *FieldError naming the setting.
func (c Config) Validate() error {
	if len(c.Targets) == 0 {
		return &FieldError{"target", "at least one target URL is required"}
	}
	for _, t := range c.Targets {
		if err := checkTarget(t); err != nil {
			return &FieldError{"target", err.Error()}
		}
	}
	if c.Closed {
		if c.Workers < 1 {
			return &FieldError{"workers", fmt.Sprintf("must be at least 1, got %d", c.Workers)}
		}
	} else {
		if !(c.RPS > 0) || math.IsInf(c.RPS, 0) {
			return &FieldError{"rps", fmt.Sprintf("must be a positive rate, got %v", c.RPS)}
		}
		if c.Clump < 1 {
			return &FieldError{"clump", fmt.Sprintf("must be at least 1, got %d", c.Clump)}
		}
	}
	if c.PingRPS < 0 || math.IsNaN(c.PingRPS) || math.IsInf(c.PingRPS, 0) {
		return &FieldError{"ping-rps", fmt.Sprintf("must be 0 (none) or a positive rate, got %v", c.PingRPS)}
	}
	if c.Duration <= 0 {
		return &FieldError{"duration", fmt.Sprintf("must be positive, got %v", c.Duration)}
	}
	if c.Warmup < 0 {
		return &FieldError{"warmup", fmt.Sprintf("must be 0 or positive, got %v", c.Warmup)}
	}
	if c.Timeout <= 0 {
		return &FieldError{"timeout", fmt.Sprintf("must be positive, got %v", c.Timeout)}
	}
	// The schedules themselves: an absurd rate x duration is refused here,
	// naming the flag, not when the stream starts.
	if !c.Closed {
		if _, err := pacer.New(c.RPS, c.Clump, c.Warmup, c.Duration, c.Seed, 0); err != nil {
			return &FieldError{"rps", err.Error()}
		}
	}
	if c.PingRPS > 0 {
		if _, err := pacer.New(c.PingRPS, 1, c.Warmup, c.Duration, c.Seed, 0); err != nil {
			return &FieldError{"ping-rps", err.Error()}
		}
	}
	return nil
}

// checkTarget accepts only plain http base URLs: the generator must contact
// nothing but the host:port it was given.
func checkTarget(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%q: %v", raw, err)
	}
	if u.Scheme != "http" || u.Host == "" || u.Port() == "" || (u.Path != "" && u.Path != "/") ||
		u.RawQuery != "" || u.User != nil {
		return fmt.Errorf("%q: want http://host:port", raw)
	}
	return nil
}

// hostPort returns the host:port of a checked target.
func hostPort(raw string) string {
	u, _ := url.Parse(raw)
	return u.Host
}
