package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"google.golang.org/grpc"

	"github.com/weir-rl/weir/internal/ceiling"
	"github.com/weir-rl/weir/internal/gcfloor"
	"github.com/weir-rl/weir/internal/pprofserve"
)

// A ceiling is a server that does no work: an HTTP handler that reads the
// body and writes a constant answer (package ceiling), or a
// weir.v1.Limiter whose Take allows at once. It measures what the client,
// the protocol stack, the kernel's loopback and the scheduler cost before
// any decision is made: a target's ceiling. Like every target, it is
// served from its own process (`loadgen ceiling`, which the suite starts
// by re-executing the load generator), so "÷ ceiling" compares two
// servers in two processes, not a server in the load generator's process
// with one outside it.

// Ceiling kinds, the values of `loadgen ceiling -kind`.
const (
	ceilingHTTPKind = "http"
	ceilingGRPCKind = "grpc"
)

// ceilingDebugEnv names the address a ceiling serves Go's profiler on
// (package pprofserve): the variable `weir serve` reads for --debug-addr,
// so that one setting, such as WEIR_DEBUG_ADDR=127.0.0.1:0 for a whole
// suite run, lets every server of the run, Weir's nodes and their ceilings
// alike, be profiled the same way (bench/results/repl-lazy/profile.sh).
// Unset: no profiler.
const ceilingDebugEnv = "WEIR_DEBUG_ADDR"

// ceilingCmd is `loadgen ceiling -kind http|grpc -addr ADDR`: it serves
// one ceiling on ADDR until ctx ends (SIGTERM or SIGINT), then stops and
// returns 0. It prints one line, "loadgen ceiling: KIND listening on
// ADDR", once it accepts connections; before it, with WEIR_DEBUG_ADDR
// set, the profiler's line.
func ceilingCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadgen ceiling", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kind := fs.String("kind", "", "http (empty net/http handler) or grpc (empty weir.v1.Limiter/Take)")
	addr := fs.String("addr", "127.0.0.1:0", "address to listen on")
	if err := fs.Parse(args); err != nil {
		return exitFlag(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "loadgen ceiling: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if *kind != ceilingHTTPKind && *kind != ceilingGRPCKind {
		fmt.Fprintf(stderr, "loadgen ceiling: -kind %q: want http or grpc\n", *kind)
		return 2
	}
	floor, err := ceilingHeapFloor(os.Getenv)
	if err != nil {
		fmt.Fprintln(stderr, "loadgen ceiling:", err)
		return 2
	}
	if floor > 0 {
		defer gcfloor.Start(uint64(floor)<<20, 100).Stop()
	}
	if a := os.Getenv(ceilingDebugEnv); a != "" {
		if err := pprofserve.CheckAddr(a); err != nil {
			fmt.Fprintf(stderr, "loadgen ceiling: %s=%q: %v\n", ceilingDebugEnv, a, err)
			return 2
		}
		at, stop, err := pprofserve.Start(a, func(err error) { fmt.Fprintln(stderr, "loadgen ceiling: debug listener:", err) })
		if err != nil {
			fmt.Fprintf(stderr, "loadgen ceiling: %s: %v\n", ceilingDebugEnv, err)
			return 1
		}
		defer stop()
		// The line a node logs, which profile.sh looks for.
		fmt.Fprintf(stdout, "loadgen ceiling: debug listener (net/http/pprof) addr=%s\n", at)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(stderr, "loadgen ceiling:", err)
		return 1
	}
	fmt.Fprintf(stdout, "loadgen ceiling: %s listening on %s\n", *kind, ln.Addr())
	if err := serveCeiling(ctx, *kind, ln); err != nil {
		fmt.Fprintln(stderr, "loadgen ceiling:", err)
		return 1
	}
	return 0
}

// ceilingHeapFloor is the heap floor (MiB) a ceiling keeps: the one
// `weir serve` keeps, from the same environment variable with the same
// default, so that a server and its ceiling collect garbage alike; 0 when
// GOGC is set, as for weir serve.
func ceilingHeapFloor(getenv func(string) string) (int, error) {
	if gcfloor.GOGCSet(getenv) {
		return 0, nil
	}
	v := getenv("WEIR_HEAP_FLOOR_MIB")
	if v == "" {
		return gcfloor.DefaultFloorMiB, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("WEIR_HEAP_FLOOR_MIB=%q: want a whole number of MiB, 0 for off", v)
	}
	return n, nil
}

// serveCeiling serves the ceiling of kind on ln until ctx ends, then
// stops the server and returns what stopped it (nil after ctx).
func serveCeiling(ctx context.Context, kind string, ln net.Listener) error {
	var (
		serve func() error
		stop  func()
	)
	if kind == ceilingHTTPKind {
		srv := ceiling.NewHTTPServer()
		serve = func() error { return srv.Serve(ln) }
		stop = func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}
	} else {
		srv := ceiling.NewGRPCServer()
		serve = func() error { return srv.Serve(ln) }
		stop = srv.Stop
	}
	done := make(chan error, 1)
	go func() { done <- serve() }()
	select {
	case err := <-done:
		return err // the server failed on its own
	case <-ctx.Done():
	}
	stop()
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// ceilingProc is a ceiling the suite started: the child process and the
// loopback address it serves on.
type ceilingProc struct {
	*proc
	addr string
	kind string // ceilingHTTPKind or ceilingGRPCKind
}

// startCeiling starts `self ceiling -kind kind` on a free loopback port
// as a child process of the load generator, the way startWeir starts a
// node (output in a log under dir, SIGKILL if the load generator dies),
// and waits until it accepts connections. self is the loadgen binary,
// normally os.Executable(). A ceiling that loses its port before binding
// it is started again on another, as startWeir does a node.
func startCeiling(ctx context.Context, self, dir, kind string) (*ceilingProc, error) {
	return startCeilingOn(ctx, self, dir, kind, freeAddr)
}

// startCeilingOn is startCeiling with the port picker pick (tests hand
// out a taken port).
func startCeilingOn(ctx context.Context, self, dir, kind string, pick func() (string, error)) (*ceilingProc, error) {
	return retryPortTaken(func() (*ceilingProc, error) {
		addr, err := pick()
		if err != nil {
			return nil, err
		}
		p, err := startProc(dir, "ceiling-"+kind, self, nil, "ceiling", "-kind", kind, "-addr", addr)
		if err != nil {
			return nil, err
		}
		if err := waitListening(ctx, p, 10*time.Second, addr); err != nil {
			return nil, err
		}
		return &ceilingProc{proc: p, addr: addr, kind: kind}, nil
	})
}

// selfPath is the load generator's own binary, which the suite re-executes
// as `loadgen ceiling`.
func selfPath() (string, error) {
	p, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("loadgen: cannot find its own binary to start the ceilings: %w", err)
	}
	return p, nil
}
