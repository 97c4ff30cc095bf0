// Package pprofserve serves Go's profiler, net/http/pprof, for diagnosing
// a running process: CPU and heap profiles, goroutines, execution traces.
// `weir serve --debug-addr` opens it on a node, and the load generator's
// ceilings on WEIR_DEBUG_ADDR, so that a node and its ceiling are profiled
// alike. It listens on loopback only, since a profile shows what is in
// memory (keys, tenants, tokens); reach it on a remote host through an SSH
// tunnel or `kubectl port-forward`.
package pprofserve

import (
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// CheckAddr returns an error unless addr is a host and port whose host is
// a loopback address or "localhost". Callers prefix it with where addr
// came from.
func CheckAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return errors.New("the profiler listens on loopback only (like 127.0.0.1:6060), since a profile shows what is in memory")
}

// Start serves the profiler under /debug/pprof/ on addr, which the caller
// has checked with CheckAddr, on a mux of its own (never
// http.DefaultServeMux), and returns the address it listens on and the
// func that closes it. onErr, when not nil, gets the error that stopped
// serving other than the close.
func Start(addr string, onErr func(error)) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, err
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
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && onErr != nil {
			onErr(err)
		}
	}()
	return ln.Addr().String(), func() { _ = srv.Close() }, nil
}
