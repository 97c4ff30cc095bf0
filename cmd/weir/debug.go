package main

import (
	"fmt"
	"log/slog"

	"github.com/weir-rl/weir/internal/pprofserve"
)

// The debug listener (--debug-addr) serves Go's profiler for diagnosing a
// running node (package pprofserve). It is off by default and listens
// only on loopback.

// checkDebugAddr returns an error unless addr's host is a loopback
// address or "localhost".
func checkDebugAddr(addr string) error {
	if err := pprofserve.CheckAddr(addr); err != nil {
		return fmt.Errorf("--debug-addr %q: %w", addr, err)
	}
	return nil
}

// startDebug serves the profiler on addr, which the caller has checked
// with checkDebugAddr, logs the address it listens on and returns it with
// the func that closes it.
func startDebug(addr string, log *slog.Logger) (string, func(), error) {
	a, stop, err := pprofserve.Start(addr, func(err error) { log.Warn("debug listener stopped", "err", err) })
	if err != nil {
		return "", nil, fmt.Errorf("--debug-addr: %w", err)
	}
	log.Info("debug listener (net/http/pprof)", "addr", a)
	return a, stop, nil
}
