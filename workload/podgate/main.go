// Command podgate runs inside the lab's pods (kind and kubernetes backends),
// next to cpulab, in an image that has no shell:
//
//	podgate run -gate FILE -- /cpulab burst ...   wait until FILE exists (blocked: no wake-ups), then exec the program
//	podgate open FILE [KEY=VALUE...]              create FILE (opens that container's gate)
//	podgate signal TERM|INT                       send a signal to the container's main process (PID 1)
//	podgate cat FILE...                           print the files as one JSON object {path: content|null}
//
// The gate lets every container of a pod exist, with its cgroups, before its
// workload starts: the backend reads every level back first, then starts each
// workload exactly when the experiment asks. After exec the workload IS the
// container's main process (same PID, same cgroup, same environment), so its
// logs, exit code and signals are the container's own.
//
// Values known only when a workload starts (another pod's address) are bound
// then: `open` writes its KEY=VALUE pairs into FILE, and `run` replaces every
// {{KEY}} in the program's arguments with its value (an unknown key is an error).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
)

type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr, syscall.Exec)
	stop()
	os.Exit(code)
}

// execFunc replaces the process (syscall.Exec); tests pass a recorder.
type execFunc func(argv0 string, argv []string, envv []string) error

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer, exec execFunc) int {
	err := run(ctx, args, stdout, exec)
	var usage *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "podgate: %s\nusage: podgate run -gate FILE -- PROGRAM [ARGS...] | open FILE [KEY=VALUE...] | signal TERM|INT | cat FILE...\n", usage.msg)
		return 2
	case errors.Is(err, errStopped):
		fmt.Fprintln(stderr, "podgate: stopped before the gate opened")
		return 0
	default:
		fmt.Fprintf(stderr, "podgate: %v\n", err)
		return 1
	}
}

func run(ctx context.Context, args []string, stdout io.Writer, exec execFunc) error {
	if len(args) == 0 {
		return &usageError{"no command"}
	}
	switch args[0] {
	case "run":
		return runGated(ctx, args[1:], exec)
	case "open":
		if len(args) < 2 {
			return &usageError{"open takes a FILE and KEY=VALUE pairs"}
		}
		return open(args[1], args[2:])
	case "signal":
		if len(args) != 2 {
			return &usageError{"signal takes one signal name"}
		}
		sig, ok := signals[args[1]]
		if !ok {
			return &usageError{fmt.Sprintf("unknown signal %q", args[1])}
		}
		return syscall.Kill(1, sig)
	case "cat":
		return cat(args[1:], stdout)
	}
	return &usageError{fmt.Sprintf("unknown command %q", args[0])}
}

// Only signals PID 1 handles: the kernel drops a SIGKILL sent to a PID namespace's
// init from inside it (the backend deletes the pod to kill from outside).
var signals = map[string]syscall.Signal{"TERM": syscall.SIGTERM, "INT": syscall.SIGINT}

var errStopped = errors.New("stopped")

// runGated parses `-gate FILE -- PROGRAM ARGS...`, waits for FILE and execs PROGRAM.
func runGated(ctx context.Context, args []string, exec execFunc) error {
	if len(args) < 4 || args[0] != "-gate" || args[2] != "--" {
		return &usageError{"run needs -gate FILE -- PROGRAM [ARGS...]"}
	}
	gate, argv := args[1], args[3:]
	if err := waitFor(ctx, gate); err != nil {
		return err
	}
	values, err := os.ReadFile(gate)
	if err != nil {
		return err
	}
	bound, err := bind(argv, string(values))
	if err != nil {
		return err
	}
	return exec(bound[0], bound, os.Environ())
}

var placeholder = regexp.MustCompile(`\{\{([^{}]+)\}\}`)

// bind replaces {{KEY}} in argv with the values of the KEY=VALUE lines.
func bind(argv []string, lines string) ([]string, error) {
	values := map[string]string{}
	for _, line := range strings.Split(lines, "\n") {
		if key, value, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			values[key] = value
		}
	}
	out := make([]string, len(argv))
	var missing []string
	for i, arg := range argv {
		out[i] = placeholder.ReplaceAllStringFunc(arg, func(m string) string {
			key := m[2 : len(m)-2]
			if v, ok := values[key]; ok {
				return v
			}
			missing = append(missing, key)
			return m
		})
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("no value for %v when the gate opened", missing)
	}
	return out, nil
}

// waitFor returns when path exists, or errStopped when ctx ends first.
//
// It blocks in the kernel until something is created in (or moved into) the
// gate's directory: an inotify watch, read through Go's poller (epoll), and no
// timer at all. A container waiting at its gate thus wakes no CPU: no wake-up
// that the CFS would count as a period of the container's cgroup, and no CPU
// time added to the idle neighbours of a measurement. Without inotify (the
// node's fs.inotify.max_user_instances spent) it fails with that reason
// instead of falling back to polling.
func waitFor(ctx context.Context, path string) error {
	dir := filepath.Dir(path)
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		return fmt.Errorf("cannot watch %s for the gate: inotify_init1: %w (raise fs.inotify.max_user_instances on the node)", dir, err)
	}
	// non-blocking, so os.File registers it with the poller: Read parks the goroutine, Close wakes it
	events := os.NewFile(uintptr(fd), "inotify "+dir)
	defer events.Close()
	if _, err := syscall.InotifyAddWatch(fd, dir, syscall.IN_CREATE|syscall.IN_MOVED_TO); err != nil {
		return fmt.Errorf("cannot watch %s for the gate: %w", dir, err)
	}
	// From here on every creation in dir wakes the read; a gate opened before the watch is seen by Stat.
	woke := make(chan error, 1)
	go func() {
		buf := make([]byte, 4096) // whole events only: each is SizeofInotifyEvent + a name of at most 256 bytes
		for {
			if _, err := os.Stat(path); err == nil {
				woke <- nil
				return
			}
			if _, err := events.Read(buf); err != nil {
				woke <- err
				return
			}
		}
	}()
	select {
	case err := <-woke:
		if err != nil {
			return fmt.Errorf("watching %s for the gate: %w", dir, err)
		}
		return nil
	case <-ctx.Done():
		return errStopped // the deferred Close ends the reading goroutine
	}
}

// open writes the KEY=VALUE pairs to a temporary file beside path and renames
// it into place: the waiting run sees the gate appear with its values complete.
func open(path string, pairs []string) error {
	for _, p := range pairs {
		if !strings.Contains(p, "=") {
			return &usageError{fmt.Sprintf("open: %q is not KEY=VALUE", p)}
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".gate-*")
	if err != nil {
		return err
	}
	if _, err := tmp.WriteString(strings.Join(append(pairs, ""), "\n")); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func cat(paths []string, stdout io.Writer) error {
	if len(paths) == 0 {
		return &usageError{"cat needs at least one FILE"}
	}
	out := make(map[string]*string, len(paths))
	var missing []string
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			out[p] = nil
			missing = append(missing, p)
			continue
		}
		s := string(data)
		out[p] = &s
	}
	enc := json.NewEncoder(stdout)
	if err := enc.Encode(out); err != nil {
		return err
	}
	if len(missing) > 0 {
		return fmt.Errorf("cannot read %v", missing)
	}
	return nil
}
