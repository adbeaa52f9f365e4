// Command cpulab is the workload of every throttlelab experiment: it burns
// CPU, serves and loads HTTP, and reports cgroup CPU counters, all as JSON
// lines on stdout (docs/RECORDS.md).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// variant names the build (go124mod / go125mod); set at link time with
// -ldflags "-X main.variant=go124mod".
var variant = "dev"

const programVersion = "0.1.0"

// command is one subcommand; run returns errors and never exits.
type command struct {
	name     string
	synopsis string
	run      func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = []command{
	{"info", "print Go and cgroup CPU settings", runInfo},
	{"burst", "every interval, T threads each burn W of CPU at once", runBurst},
	{"spin", "keep T threads busy and report the cgroup's CPU use", runSpin},
	{"serve", "HTTP service: /work burns CPU and allocates, /ping, /stats", runServe},
	{"load", "open-loop (or closed-loop) HTTP load against serve", runLoad},
}

func main() {
	// SIGINT/SIGTERM cancel the context; each subcommand then finishes
	// cleanly and still writes its summary.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// dispatch runs the subcommand named by args[0] and returns the exit code:
// 0 success, 1 failure, 2 bad usage.
func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printUsage(stderr)
		return 2
	}
	name := args[0]
	if name == "-h" || name == "-help" || name == "--help" || name == "help" {
		printUsage(stderr) // stdout carries only records
		return 0
	}
	for _, c := range commands {
		if c.name != name {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		var usage *usageError
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.As(err, &usage):
			if usage.msg != "" { // flag parse errors were already printed
				fmt.Fprintf(stderr, "cpulab %s: %s\nRun 'cpulab %s -h' for usage.\n", name, usage.msg, name)
			}
			return 2
		default:
			fmt.Fprintf(stderr, "cpulab %s: %v\n", name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "cpulab: unknown subcommand %q\n\n", name)
	printUsage(stderr)
	return 2
}

func printUsage(w io.Writer) {
	fmt.Fprintf(w, "usage: cpulab <subcommand> [flags]\n\nsubcommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-6s %s\n", c.name, c.synopsis)
	}
	fmt.Fprintf(w, "\nRun 'cpulab <subcommand> -h' for its flags. Output: JSON lines on stdout.\n")
}
