package pprofserve

import (
	"bytes"
	"io"
	"net/http"
	"testing"
)

// TestCheckAddrLoopbackOnly: the profiler is refused anywhere but
// loopback, with a reason, before anything listens.
func TestCheckAddrLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:6060", "[::1]:6060", "localhost:0", "127.0.0.2:6060"} {
		if err := CheckAddr(addr); err != nil {
			t.Errorf("%s refused: %v", addr, err)
		}
	}
	for _, addr := range []string{":6060", "0.0.0.0:6060", "10.0.0.1:6060", "[::]:6060", "example.com:6060", "6060", ""} {
		if err := CheckAddr(addr); err == nil {
			t.Errorf("%s accepted", addr)
		}
	}
}

// TestStartServesProfiles: the index, a CPU profile (gzip) and the heap
// are served on the address Start reports, and closing it stops them.
func TestStartServesProfiles(t *testing.T) {
	addr, stop, err := Start("127.0.0.1:0", func(err error) { t.Errorf("serving stopped: %v", err) })
	if err != nil {
		t.Fatal(err)
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
