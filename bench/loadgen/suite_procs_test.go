package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// testFakeWeirEnv, set in a child's environment, makes the test binary a
// stand-in for `weir serve` (fakeWeirMain): "1" binds the node's ports as
// weir does and serves until stopped; "fail" exits at once for another
// reason than a port.
const testFakeWeirEnv = "LOADGEN_TEST_FAKE_WEIR"

// fakeWeirMain binds every address flag of a `weir serve` command line on
// TCP and accepts until ctx ends. A port it cannot bind ends it with
// weir's own words for that ("start failed" and the bind error).
func fakeWeirMain(ctx context.Context, mode string, args []string) int {
	if mode == "fail" {
		fmt.Fprintln(os.Stderr, `level=ERROR msg="start failed" err="node: limits file: no such file"`)
		return 1
	}
	var lns []net.Listener
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "--http-addr", "--grpc-addr", "--gossip-addr", "--peer-addr", "--resp-addr":
			ln, err := net.Listen("tcp", args[i+1])
			if err != nil {
				fmt.Fprintf(os.Stderr, "level=ERROR msg=\"start failed\" err=%q\n", err.Error())
				return 1
			}
			lns = append(lns, ln)
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					_ = c.Close()
				}
			}()
		}
	}
	<-ctx.Done()
	for _, ln := range lns {
		_ = ln.Close()
	}
	return 0
}

// fakeWeir returns the test binary, made to act as `weir serve` in its
// children (mode: see testFakeWeirEnv).
func fakeWeir(t *testing.T, mode string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(testFakeWeirEnv, mode)
	return self
}

// takenAddr returns a loopback address whose port is taken the way the
// suite's ports get taken: the local end of an open outgoing connection
// (bound, not listening, so a node cannot bind it and nothing accepts on
// it).
func takenAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c.LocalAddr().String()
}

// takenFirst is a port picker that hands out taken first and free ports
// after, counting its picks in *picks.
func takenFirst(taken string, picks *int) func() (string, error) {
	return func() (string, error) {
		*picks++
		if *picks == 1 {
			return taken, nil
		}
		return freeAddr()
	}
}

// A port picked free and taken before the node binds it (here: handed
// out as the first pick) starts the node again on fresh ports instead of
// failing the suite.
func TestStartWeirRetriesAPortTaken(t *testing.T) {
	bin := fakeWeir(t, "1")
	taken := takenAddr(t)
	picks := 0
	pick := takenFirst(taken, &picks)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := startWeir(ctx, weirNodeConfig{bin: bin, limits: "x.yaml", dir: t.TempDir(), name: "t", resp: true, pick: pick})
	if err != nil {
		t.Fatalf("startWeir with its first port taken: %v", err)
	}
	defer n.stop(5 * time.Second)
	if picks != 10 {
		t.Errorf("picked %d addresses, want 10: two starts of 5 ports each", picks)
	}
	for _, a := range []string{n.httpAddr, n.grpcAddr, n.respAddr} {
		if a == taken {
			t.Errorf("the node kept the taken address %s", a)
		}
		c, err := net.Dial("tcp", a)
		if err != nil {
			t.Fatalf("the restarted node does not listen on %s: %v", a, err)
		}
		_ = c.Close()
	}
}

// A node that fails for any other reason is not started again: the error
// is the node's own, after one start.
func TestStartWeirOtherFailureIsNotRetried(t *testing.T) {
	bin := fakeWeir(t, "fail")
	picks := 0
	pick := func() (string, error) { picks++; return freeAddr() }
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := startWeir(ctx, weirNodeConfig{bin: bin, limits: "x.yaml", dir: t.TempDir(), name: "t", pick: pick})
	if err == nil || errors.Is(err, errPortTaken) || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("startWeir of a node that cannot start: %v, want its own error", err)
	}
	if picks != 5 {
		t.Errorf("picked %d addresses, want 5: one start", picks)
	}
}

// Ports taken on every attempt end in errPortTaken after startAttempts.
func TestStartWeirGivesUpOnPortsAlwaysTaken(t *testing.T) {
	bin := fakeWeir(t, "1")
	taken := takenAddr(t)
	picks := 0
	pick := func() (string, error) { picks++; return taken, nil }
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := startWeir(ctx, weirNodeConfig{bin: bin, limits: "x.yaml", dir: t.TempDir(), name: "t", pick: pick})
	if !errors.Is(err, errPortTaken) {
		t.Fatalf("startWeir with every port taken: %v, want errPortTaken", err)
	}
	if picks != 5*startAttempts {
		t.Errorf("picked %d addresses, want %d: %d starts", picks, 5*startAttempts, startAttempts)
	}
}

// A ceiling whose port was taken before it bound it is started again on
// another, and one whose every port is taken ends in errPortTaken after
// startAttempts, as a node does.
func TestStartCeilingRetriesAPortTaken(t *testing.T) {
	self := testSelf(t)
	taken := takenAddr(t)
	picks := 0
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := startCeilingOn(ctx, self, t.TempDir(), ceilingHTTPKind, takenFirst(taken, &picks))
	if err != nil {
		t.Fatalf("startCeiling with its first port taken: %v", err)
	}
	defer c.stop(5 * time.Second)
	if picks != 2 || c.addr == taken {
		t.Errorf("picked %d addresses, serving on %s (taken: %s); want 2 picks and a fresh port", picks, c.addr, taken)
	}
	conn, err := net.Dial("tcp", c.addr)
	if err != nil {
		t.Fatalf("the restarted ceiling does not listen on %s: %v", c.addr, err)
	}
	_ = conn.Close()

	picks = 0
	_, err = startCeilingOn(ctx, self, t.TempDir(), ceilingGRPCKind, func() (string, error) { picks++; return taken, nil })
	if !errors.Is(err, errPortTaken) || picks != startAttempts {
		t.Fatalf("startCeiling with every port taken: %v after %d picks, want errPortTaken after %d", err, picks, startAttempts)
	}
}
