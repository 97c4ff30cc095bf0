package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-rl/weir/internal/gcfloor"
)

// testParentEnv, set to a directory in a child's environment, makes the
// test binary a stand-in for the suite: it starts one HTTP ceiling,
// prints its address and pid, and waits to be killed (ceilingParentMain).
const testParentEnv = "LOADGEN_TEST_CEILING_PARENT"

// signalContext is main's context: it ends on SIGINT or SIGTERM.
func signalContext() context.Context {
	ctx, _ := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	return ctx
}

// ceilingParentMain starts a ceiling as the suite does and blocks.
func ceilingParentMain(ctx context.Context, dir string) int {
	// The ceiling it starts is the test binary acting as loadgen.
	_ = os.Unsetenv(testParentEnv)
	_ = os.Setenv(testMainEnv, "1")
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c, err := startCeiling(ctx, self, dir, ceilingHTTPKind)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("%s %d\n", c.addr, c.pid())
	select {}
}

// testSelf is the test binary, made to act as loadgen in its children.
func testSelf(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(testMainEnv, "1")
	return self
}

// waitRefused waits until nothing accepts connections on addr.
func waitRefused(t *testing.T, addr string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return
		}
		_ = c.Close()
		select {
		case <-deadline:
			t.Fatalf("%s still accepts connections 10 s on", addr)
		case <-tick.C:
		}
	}
}

// TestCeilingProcessAnswersAndStops starts each ceiling as its own
// process, takes through it with the client the suite uses, stops it with
// SIGTERM and checks that it exited cleanly and no longer listens.
func TestCeilingProcessAnswersAndStops(t *testing.T) {
	self := testSelf(t)
	for _, kind := range []string{ceilingHTTPKind, ceilingGRPCKind} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			c, err := startCeiling(ctx, self, t.TempDir(), kind)
			if err != nil {
				t.Fatal(err)
			}
			defer c.stop(time.Second)
			if c.pid() == os.Getpid() {
				t.Fatal("the ceiling runs in the test's own process")
			}
			var tg target
			if kind == ceilingHTTPKind {
				tg, err = newHTTPTarget([]string{c.addr}, 1, "bench", 1, 1)
			} else {
				tg, err = newGRPCTarget([]string{c.addr}, 1, "bench", 1, 1, false)
			}
			if err != nil {
				t.Fatal(err)
			}
			cl, err := tg.newCaller(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if ok, err := cl.take(ctx, 0); err != nil || !ok {
					t.Fatalf("take through the %s ceiling: allowed %v, %v", kind, ok, err)
				}
			}
			_ = cl.close()
			_ = tg.close()
			c.stop(5 * time.Second)
			if c.alive() || c.err != nil {
				t.Fatalf("after SIGTERM: alive %v, exit %v; log:\n%s", c.alive(), c.err, c.logTail())
			}
			waitRefused(t, c.addr)
		})
	}
}

// TestCeilingExitsWithItsParent kills a process that started a ceiling
// the way the suite does, and checks that the ceiling goes with it.
func TestCeilingExitsWithItsParent(t *testing.T) {
	self := testSelf(t)
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), testParentEnv+"="+t.TempDir())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the parent printed no address: %v", err)
	}
	var (
		addr string
		pid  int
	)
	if _, err := fmt.Sscanf(line, "%s %d", &addr, &pid); err != nil || pid == cmd.Process.Pid {
		t.Fatalf("parent's line %q: %v", line, err)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("the ceiling does not listen: %v", err)
	}
	_ = c.Close()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	waitRefused(t, addr)
}

// TestCeilingCommandRejectsBadFlags checks the usage errors of `loadgen
// ceiling`, which exit 2 without listening.
func TestCeilingCommandRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-kind", "udp"}, {}, {"-kind", "http", "extra"}, {"-nope"}} {
		var stderr strings.Builder
		if code := run(context.Background(), append([]string{"ceiling"}, args...), io.Discard, &stderr); code != 2 {
			t.Errorf("ceiling %v: exit %d, want 2 (%s)", args, code, stderr.String())
		}
	}
	var stderr strings.Builder
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	if code := run(context.Background(), []string{"ceiling", "-kind", "http", "-addr", ln.Addr().String()}, io.Discard, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "address already in use") {
		t.Errorf("ceiling on a taken port: exit %d, %q", code, stderr.String())
	}
}

// TestServeCeilingStopsOnCancel serves both kinds in the test process and
// checks that canceling the context stops them without an error.
func TestServeCeilingStopsOnCancel(t *testing.T) {
	for _, kind := range []string{ceilingHTTPKind, ceilingGRPCKind} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- serveCeiling(ctx, kind, ln) }()
		cancel()
		if err := <-done; err != nil && !errors.Is(err, net.ErrClosed) {
			t.Errorf("%s: %v", kind, err)
		}
	}
}

func TestCeilingHeapFloor(t *testing.T) {
	for _, c := range []struct {
		env     map[string]string
		want    int
		wantErr bool
	}{
		{map[string]string{}, gcfloor.DefaultFloorMiB, false},
		{map[string]string{"WEIR_HEAP_FLOOR_MIB": "16"}, 16, false},
		{map[string]string{"WEIR_HEAP_FLOOR_MIB": "0"}, 0, false},
		{map[string]string{"WEIR_HEAP_FLOOR_MIB": "16", "GOGC": "100"}, 0, false},
		{map[string]string{"WEIR_HEAP_FLOOR_MIB": "-1"}, 0, true},
		{map[string]string{"WEIR_HEAP_FLOOR_MIB": "lots"}, 0, true},
	} {
		got, err := ceilingHeapFloor(func(k string) string { return c.env[k] })
		if got != c.want || (err != nil) != c.wantErr {
			t.Errorf("env %v: %d, %v; want %d, error %v", c.env, got, err, c.want, c.wantErr)
		}
	}
}

// TestCeilingServesTheProfilerWhenAsked: with WEIR_DEBUG_ADDR set, a
// ceiling the suite starts serves net/http/pprof on its own port and logs
// the line profile scripts look for; the ceiling's own port stays the
// empty handler. A non-loopback address is refused before serving.
func TestCeilingServesTheProfilerWhenAsked(t *testing.T) {
	self := testSelf(t)
	t.Setenv(ceilingDebugEnv, "127.0.0.1:0")
	c, err := startCeiling(context.Background(), self, t.TempDir(), ceilingHTTPKind)
	if err != nil {
		t.Fatal(err)
	}
	defer c.stop(time.Second)
	log, err := os.ReadFile(c.log.Name())
	if err != nil {
		t.Fatal(err)
	}
	_, addr, ok := strings.Cut(string(log), "debug listener (net/http/pprof) addr=")
	if !ok {
		t.Fatalf("no debug listener line in the ceiling's log:\n%s", log)
	}
	addr, _, _ = strings.Cut(addr, "\n")
	for url, want := range map[string]int{
		"http://" + addr + "/debug/pprof/":   http.StatusOK,
		"http://" + c.addr + "/debug/pprof/": http.StatusOK, // the ceiling answers every path alike
	} {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		profiler := strings.Contains(string(body), "goroutine")
		if resp.StatusCode != want || profiler != (url == "http://"+addr+"/debug/pprof/") {
			t.Errorf("GET %s: %d, profiler index %v: %.80s", url, resp.StatusCode, profiler, body)
		}
	}

	t.Setenv(ceilingDebugEnv, "0.0.0.0:0")
	var stderr strings.Builder
	if code := run(context.Background(), []string{"ceiling", "-kind", "http"}, io.Discard, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), "loopback only") {
		t.Errorf("ceiling with %s=0.0.0.0:0: exit %d, %q", ceilingDebugEnv, code, stderr.String())
	}
}
