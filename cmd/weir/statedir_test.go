package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// stateLimits: a bucket that refills one token an hour, so nothing the
// test's wall time refills matters.
const stateLimits = `version: 1
limits:
  - name: slow
    algorithm: token_bucket
    capacity: 3
    rate: 1/h
`

// TestBinaryStateDirKeepsDebits runs the real binary with --state-dir:
// a bucket spent in one life is still spent in the next (SIGTERM saves,
// start restores), and a corrupt state file is refused with an error line
// and the node starts with full buckets.
func TestBinaryStateDirKeepsDebits(t *testing.T) {
	bin := buildWeir(t)
	dir := t.TempDir()
	limits := filepath.Join(dir, "limits.yaml")
	if err := os.WriteFile(limits, []byte(stateLimits), 0o600); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(dir, "state")

	p, base := startStateNode(t, bin, limits, stateDir)
	if got := takes(t, base, 4); got != 3 {
		t.Fatalf("first life: %d of 4 admitted, want 3", got)
	}
	stopAndExpect(t, p, "state saved")

	p, base = startStateNode(t, bin, limits, stateDir)
	if !hasLine(p, "state restored") {
		t.Fatalf("second life: no 'state restored' line")
	}
	if got := takes(t, base, 2); got != 0 {
		t.Fatalf("after the restart: %d of 2 admitted, want 0", got)
	}
	stopAndExpect(t, p, "state saved")

	file := filepath.Join(stateDir, "weir.state")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 0xff
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	p, base = startStateNode(t, bin, limits, stateDir)
	if !hasLine(p, "level=ERROR", "state file refused", "checksum mismatch") {
		t.Fatalf("corrupt file: no error line naming the checksum")
	}
	if got := takes(t, base, 4); got != 3 {
		t.Fatalf("after a refused file: %d of 4 admitted, want 3 (a full bucket)", got)
	}
}

// startStateNode starts a cluster of one with the limits file and state
// dir and waits until it serves; it returns the process and its base URL.
func startStateNode(t *testing.T, bin, limits, stateDir string) (*proc, string) {
	t.Helper()
	httpAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	p := startWeir(t, bin, "serve", "--cluster=false", "--node-name", "solo", "--http-addr", httpAddr,
		"--grpc-addr", "127.0.0.1:"+strconv.Itoa(freePort(t)), "--limits", limits, "--state-dir", stateDir)
	base := "http://" + httpAddr
	c := &http.Client{Timeout: 2 * time.Second}
	defer c.CloseIdleConnections()
	waitFor(t, 20*time.Second, base+" /readyz 200", func() bool {
		resp, err := c.Get(base + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p, base
}

// takes sends n takes of slow/k and returns how many were admitted.
func takes(t *testing.T, base string, n int) int {
	t.Helper()
	c := &http.Client{Timeout: 2 * time.Second}
	defer c.CloseIdleConnections()
	admitted := 0
	for range n {
		resp, err := c.Post(base+"/v1/take", "application/json", strings.NewReader(`{"checks":[{"limit":"slow","key":"k","cost":1}]}`))
		if err != nil {
			t.Fatal(err)
		}
		var a takeAnswer
		err = json.NewDecoder(resp.Body).Decode(&a)
		_ = resp.Body.Close()
		if err != nil {
			t.Fatalf("take: status %d, %v", resp.StatusCode, err)
		}
		if a.Allowed {
			admitted++
		}
	}
	return admitted
}

// stopAndExpect sends SIGTERM to p and fails t unless it exits 0 having
// logged a line containing want.
func stopAndExpect(t *testing.T, p *proc, want string) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("still running 30s after SIGTERM")
	}
	if p.waitErr != nil {
		t.Fatalf("exit after SIGTERM: %v, want 0", p.waitErr)
	}
	if !hasLine(p, want) {
		t.Fatalf("no %q line in the log", want)
	}
}

// hasLine reports whether one line of p's log contains every part.
func hasLine(p *proc, parts ...string) bool {
	for _, l := range p.logLines() {
		ok := true
		for _, s := range parts {
			ok = ok && strings.Contains(l, s)
		}
		if ok {
			return true
		}
	}
	return false
}
