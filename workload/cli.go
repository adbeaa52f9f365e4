package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"cpulab/internal/record"
)

// usageError means the command line was wrong: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// badFlag reports an invalid flag value, naming the flag.
func badFlag(name, format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf("invalid -%s: %s", name, fmt.Sprintf(format, args...))}
}

// newFlagSet returns a flag set whose errors and usage go to stderr.
func newFlagSet(name, description string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: cpulab %s [flags]\n\n%s\n\nflags:\n", name, description)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args; a parse error (already printed with the usage by
// the flag package) or a stray argument becomes a usageError.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &usageError{}
	}
	if fs.NArg() > 0 {
		return &usageError{msg: fmt.Sprintf("unexpected argument %q (flags only)", fs.Arg(0))}
	}
	return nil
}

func positiveDuration(name string, d time.Duration) error {
	if d <= 0 {
		return badFlag(name, "must be a positive duration, got %v", d)
	}
	return nil
}

func atLeast(name string, v, min int) error {
	if v < min {
		return badFlag(name, "must be at least %d, got %d", min, v)
	}
	return nil
}

// firstError returns the first non-nil error: validations read as a list.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func buildInfo() record.Build { return record.Build{Version: programVersion, Variant: variant} }

// listFlag is a repeatable flag that also splits comma-separated values.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for _, part := range strings.Split(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			*l = append(*l, part)
		}
	}
	return nil
}

func (l *listFlag) Get() any { return append([]string{}, *l...) }

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
