package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// The debug listener (--debug-addr) serves Go's profiler, net/http/pprof,
// for diagnosing a running node: CPU and heap profiles, goroutines,
// execution traces. It is off by default and listens only on loopback,
// since a profile shows what is in memory (keys, tenants, tokens); reach
// it on a remote host through an SSH tunnel or `kubectl port-forward`.

// checkDebugAddr returns an error unless addr's host is a loopback
// address or "localhost".
func checkDebugAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--debug-addr %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--debug-addr %q: the profiler listens on loopback only (like 127.0.0.1:6060), since a profile shows what is in memory", addr)
}

// startDebug serves the profiler on addr, which the caller has checked
// with checkDebugAddr, and returns the address it listens on and the func
// that closes it.
func startDebug(addr string, log *slog.Logger) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("--debug-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	// No write timeout: a CPU profile or trace streams for as long as it
	// was asked to run.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("debug listener stopped", "err", err)
		}
	}()
	log.Info("debug listener (net/http/pprof)", "addr", ln.Addr().String())
	return ln.Addr().String(), func() { _ = srv.Close() }, nil
}
