package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// ceilingDebugEnv names the address a ceiling serves Go's profiler on: the
// variable `weir serve` reads for --debug-addr, so that one setting, such
// as WEIR_DEBUG_ADDR=127.0.0.1:0 for a whole suite run, lets every server
// of the run, Weir's nodes and their ceilings alike, be profiled the same
// way (bench/results/repl-lazy/profile.sh). Unset: no profiler.
const ceilingDebugEnv = "WEIR_DEBUG_ADDR"

// startCeilingDebug serves net/http/pprof on addr, a loopback address, on
// a mux of its own (the ceiling's handler stays the empty one), and prints
// "loadgen ceiling: debug listener (net/http/pprof) addr=ADDR" to out, the
// line a node logs. It returns the func that closes it.
func startCeilingDebug(addr string, out io.Writer) (func(), error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%s=%q: %w", ceilingDebugEnv, addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("%s=%q: the profiler listens on loopback only", ceilingDebugEnv, addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ceilingDebugEnv, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(out, "loadgen ceiling: debug listener:", err)
		}
	}()
	fmt.Fprintf(out, "loadgen ceiling: debug listener (net/http/pprof) addr=%s\n", ln.Addr())
	return func() { _ = srv.Close() }, nil
}
