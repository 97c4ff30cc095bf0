package main

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// TestDebugAddrLoopbackOnly: weir serve refuses a profiler address off
// loopback (pprofserve.CheckAddr) with a reason, before anything listens.
func TestDebugAddrLoopbackOnly(t *testing.T) {
	var out, errb bytes.Buffer
	if code := serve([]string{"--debug-addr", ":6060", "--cluster=false"}, &out, &errb); code != 2 ||
		!strings.Contains(errb.String(), "--debug-addr \":6060\": the profiler listens on loopback only") {
		t.Fatalf("weir serve --debug-addr :6060: exit %d, %q; want 2 and the reason", code, errb.String())
	}
}

// TestDebugListenerLogsItsAddress: the node logs where its profiler
// listens, which profile scripts read, and serves it there until closed.
func TestDebugListenerLogsItsAddress(t *testing.T) {
	var logs bytes.Buffer
	addr, stop, err := startDebug("127.0.0.1:0", slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "debug listener (net/http/pprof)") || !strings.Contains(logs.String(), "addr="+addr) {
		t.Errorf("the log does not name the listener at %s: %q", addr, logs.String())
	}
	resp, err := http.Get("http://" + addr + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /debug/pprof/: %s", resp.Status)
	}
	stop()
	if _, err := http.Get("http://" + addr + "/debug/pprof/"); err == nil {
		t.Error("still served after close")
	}
}
