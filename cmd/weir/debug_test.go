package main

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// TestDebugAddrLoopbackOnly: the profiler is refused anywhere but
// loopback, with a reason, before anything listens.
func TestDebugAddrLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:6060", "[::1]:6060", "localhost:0", "127.0.0.2:6060"} {
		if err := checkDebugAddr(addr); err != nil {
			t.Errorf("%s refused: %v", addr, err)
		}
	}
	for _, addr := range []string{":6060", "0.0.0.0:6060", "10.0.0.1:6060", "[::]:6060", "example.com:6060", "6060", ""} {
		if err := checkDebugAddr(addr); err == nil {
			t.Errorf("%s accepted", addr)
		}
	}
	var out, errb bytes.Buffer
	if code := serve([]string{"--debug-addr", ":6060", "--cluster=false"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "loopback only") {
		t.Fatalf("weir serve --debug-addr :6060: exit %d, %q; want 2 and the reason", code, errb.String())
	}
}

// TestDebugListenerServesProfiles: the index, a CPU profile (gzip) and the
// heap are served on the address the listener reports, and closing it
// stops them.
func TestDebugListenerServesProfiles(t *testing.T) {
	var logs bytes.Buffer
	addr, stop, err := startDebug("127.0.0.1:0", slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), addr) {
		t.Errorf("the log does not name the address %s: %q", addr, logs.String())
	}
	get := func(path string) []byte {
		t.Helper()
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s %q", path, resp.Status, body)
		}
		return body
	}
	if b := get("/debug/pprof/"); !bytes.Contains(b, []byte("goroutine")) {
		t.Errorf("index lists no goroutine profile: %q", b)
	}
	for _, path := range []string{"/debug/pprof/profile?seconds=1", "/debug/pprof/heap"} {
		if b := get(path); len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
			t.Errorf("%s is not a gzipped profile: % x", path, b[:min(len(b), 8)])
		}
	}
	stop()
	if _, err := http.Get("http://" + addr + "/debug/pprof/"); err == nil {
		t.Error("still served after close")
	}
}
