package main

import (
	"errors"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestBinaryTwoNodesStoppedAtOnce sends SIGTERM to both processes of a
// two-node cluster at once, as `docker compose down` does: each exits 0
// and logs nothing at ERROR, even when its leave broadcast found the other
// leaving too and nobody took it. Whether the broadcasts cross is a race,
// so the cluster is started again until one leave went unacknowledged.
func TestBinaryTwoNodesStoppedAtOnce(t *testing.T) {
	bin := buildWeir(t)
	const attempts = 3
	for i := range attempts {
		unacked := stopTwoProcs(t, bin)
		if t.Failed() {
			return
		}
		if unacked > 0 {
			t.Logf("attempt %d: %d leave(s) unacknowledged, both exited 0", i+1, unacked)
			return
		}
	}
	t.Fatalf("no leave went unacknowledged in %d attempts: the scenario did not happen", attempts)
}

// stopTwoProcs starts two clustered nodes, stops both with one SIGTERM
// each, fails t unless both exit 0 without an ERROR line, and returns how
// many logged an unacknowledged leave.
func stopTwoProcs(t *testing.T, bin string) int {
	t.Helper()
	var procs []*proc
	var bases []string
	seed := ""
	for i := range 2 {
		httpAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
		gossip := "127.0.0.1:" + strconv.Itoa(freePortPair(t))
		args := []string{
			"serve", "--timing", "local", "--http-addr", httpAddr,
			"--grpc-addr", "127.0.0.1:" + strconv.Itoa(freePort(t)), "--gossip-addr", gossip,
		}
		if i == 0 {
			seed = gossip
		} else {
			args = append(args, "--join", seed)
		}
		procs = append(procs, startWeir(t, bin, args...))
		bases = append(bases, "http://"+httpAddr)
	}
	c := &http.Client{Timeout: 2 * time.Second}
	defer c.CloseIdleConnections()
	for _, b := range bases {
		waitFor(t, 30*time.Second, b+" sees 2 alive members", func() bool { return len(aliveMembers(c, b)) == 2 })
	}
	for _, p := range procs {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	unacked := 0
	for i, p := range procs {
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			t.Fatalf("node %d still running 30s after SIGTERM", i)
		}
		var ee *exec.ExitError
		if errors.As(p.waitErr, &ee) {
			t.Errorf("node %d exited with code %d after SIGTERM, want 0", i, ee.ExitCode())
		} else if p.waitErr != nil {
			t.Errorf("node %d: %v", i, p.waitErr)
		}
		for _, l := range p.logLines() {
			if strings.Contains(l, "level=ERROR") {
				t.Errorf("node %d logged an error: %s", i, l)
			}
			if strings.Contains(l, "leave not acknowledged") {
				unacked++
			}
		}
	}
	return unacked
}
