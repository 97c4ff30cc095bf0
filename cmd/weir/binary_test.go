package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weir-rl/weir/internal/weirbuild"
)

// Ports for the weir processes these tests start are drawn from below
// the kernel's ephemeral range (32768-60999 on Linux): a port the kernel
// handed out by listening on :0 is in that range, and between the test
// closing it and the process binding it, any outgoing connection on the
// machine may take it as its local port ("address already in use").
const (
	portLow, portHigh = 20000, 32000
)

// handedOut holds the ports this test process returned already, so that
// two picks never return the same port before either is bound.
var (
	handedMu  sync.Mutex
	handedOut = map[int]bool{}
)

// freePort returns a loopback port outside the ephemeral range that
// nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	return pickPort(t, 1, func(p int) bool { return bindable("tcp", p) })
}

// pickPort returns a random port p in [portLow, portHigh) that free
// accepts and such that none of p..p+width-1 was handed out before; it
// marks them handed out.
func pickPort(t *testing.T, width int, free func(p int) bool) int {
	t.Helper()
	handedMu.Lock()
	defer handedMu.Unlock()
	for range 1000 {
		p := portLow + rand.IntN(portHigh-portLow)
		taken := false
		for i := range width {
			taken = taken || handedOut[p+i]
		}
		if taken || !free(p) {
			continue
		}
		for i := range width {
			handedOut[p+i] = true
		}
		return p
	}
	t.Fatal("no free loopback port below the ephemeral range")
	return 0
}

// bindable reports whether network ("tcp" or "udp") port p on loopback
// can be bound right now.
func bindable(network string, p int) bool {
	addr := "127.0.0.1:" + strconv.Itoa(p)
	if network == "udp" {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return false
		}
		_ = pc.Close()
		return true
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	_ = ln.Close()
	return true
}

// binVersion is the version the binary tests stamp into weir.
const binVersion = "v0.0.0-bintest"

// TestBinaryServeAndSIGTERM builds weir, serves with the embedded limits,
// checks the first log line names them, takes from one bucket over HTTP
// and then over RESP, checks HELLO reports the build's version, and stops
// it with SIGTERM.
func TestBinaryServeAndSIGTERM(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "weir")
	if err := weirbuild.Build(bin, ".", "-X main.version="+binVersion); err != nil {
		t.Fatal(err)
	}

	httpAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	grpcAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	respAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	cmd := exec.Command(bin, "serve", "--http-addr", httpAddr, "--grpc-addr", grpcAddr, "--resp-addr", respAddr, "--node-name", "bin-test",
		"--gossip-addr", "127.0.0.1:0", "--peer-addr", "127.0.0.1:0")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WEIR_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 256)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // the test reads only the first lines
			}
		}
		close(lines)
		exited <- cmd.Wait() // after the pipe is drained, as Wait requires
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	})

	var first string
	select {
	case first = <-lines:
	case <-time.After(20 * time.Second):
		t.Fatal("no log line within 20s")
	}
	if !strings.Contains(first, `source="embedded default"`) {
		t.Fatalf("first log line %q does not name the embedded default limits", first)
	}

	client := &http.Client{Timeout: 2 * time.Second}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := client.Get("http://" + httpAddr + "/healthz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz did not answer 200 within 20s: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
	// Two takes of export/k (capacity 6, 2/s), one over HTTP, one over
	// RESP, on the node's real clock. sent is taken before the first is
	// sent: the node decides both after it.
	sent := time.Now()
	resp, err := client.Post("http://"+httpAddr+"/v1/take", "application/json",
		strings.NewReader(`{"checks":[{"limit":"export","key":"k","cost":1}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var byHTTP takeAnswer
	err = json.NewDecoder(resp.Body).Decode(&byHTTP)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("take on the binary = %d, %v", resp.StatusCode, err)
	}
	// The first take meets a full bucket, however the clock moved: its
	// answer is exact.
	if got, want := byHTTP, (takeAnswer{Allowed: true, Results: []takeResult{
		{Limit: "export", Allowed: true, Remaining: 5, Capacity: 6, ResetAfterMs: 500, Source: "owner"},
	}}); !reflect.DeepEqual(got, want) {
		t.Fatalf("HTTP take on the binary = %+v, want %+v", got, want)
	}
	client.CloseIdleConnections()

	// --resp-addr serves the Redis protocol.
	rc, err := net.DialTimeout("tcp", respAddr, 2*time.Second)
	if err != nil {
		t.Fatalf("RESP port: %v", err)
	}
	_ = rc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := rc.Write([]byte("*3\r\n$9\r\nWEIR.TAKE\r\n$6\r\nexport\r\n$1\r\nk\r\n")); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(rc)
	var got string
	for range 5 {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("RESP answer: %v (got %q)", err, got)
		}
		got += line
	}
	elapsed := time.Since(sent)
	if _, err := rc.Write([]byte("HELLO 2\r\n")); err != nil {
		t.Fatal(err)
	}
	var hello string
	for !strings.HasSuffix(hello, "$7\r\nmodules\r\n*0\r\n") {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("HELLO 2: %v (got %q)", err, hello)
		}
		hello += line
	}
	_ = rc.Close()
	if want := fmt.Sprintf("$7\r\nversion\r\n$%d\r\n%s\r\n", len(binVersion), binVersion); !strings.Contains(hello, want) {
		t.Errorf("HELLO 2 = %q, want the version %s", hello, binVersion)
	}
	second, ok := parseTakeReply(got)
	if !ok {
		t.Fatalf("WEIR.TAKE on the binary = %q, want an array of 4 integers", got)
	}
	if err := checkSecondTake(second, elapsed); err != nil {
		t.Fatalf("WEIR.TAKE on the binary = %q, %v after the HTTP take was sent: %v", got, elapsed, err)
	}
	if elapsed >= 500*time.Millisecond {
		t.Logf("the two takes were up to %v apart: the bucket may have refilled a whole token", elapsed)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("weir serve exited with code %d after SIGTERM, want 0", ee.ExitCode())
		}
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("weir serve did not exit within 15s of SIGTERM")
	}
	for _, addr := range []string{httpAddr, respAddr} {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = c.Close()
			t.Fatalf("port %s still open after exit", addr)
		}
	}
}

// takeAnswer is the part of a POST /v1/take answer the binary test checks.
type takeAnswer struct {
	Allowed      bool         `json:"allowed"`
	RetryAfterMs int64        `json:"retry_after_ms"`
	Results      []takeResult `json:"results"`
}

type takeResult struct {
	Limit        string `json:"limit"`
	Allowed      bool   `json:"allowed"`
	Remaining    int64  `json:"remaining"`
	Capacity     int64  `json:"capacity"`
	RetryAfterMs int64  `json:"retry_after_ms"`
	ResetAfterMs int64  `json:"reset_after_ms"`
	Source       string `json:"source"`
}

// takeReply is WEIR.TAKE's reply: [allowed, remaining, retry_after_ms,
// reset_after_ms].
type takeReply struct{ allowed, remaining, retryMs, resetMs int64 }

// parseTakeReply reads a RESP array of four integers.
func parseTakeReply(s string) (takeReply, bool) {
	lines := strings.Split(strings.TrimSuffix(s, "\r\n"), "\r\n")
	if len(lines) != 5 || lines[0] != "*4" {
		return takeReply{}, false
	}
	var v [4]int64
	for i, l := range lines[1:] {
		n, err := strconv.ParseInt(strings.TrimPrefix(l, ":"), 10, 64)
		if err != nil || !strings.HasPrefix(l, ":") {
			return takeReply{}, false
		}
		v[i] = n
	}
	return takeReply{v[0], v[1], v[2], v[3]}, true
}

// checkSecondTake checks WEIR.TAKE export k, the second take of a fresh
// bucket (capacity 6, 2 tokens/s) after one of cost 1, decided on a real
// clock at most elapsed after the first. The answer cannot be exact: the
// bucket refills between the two decisions, so the reset is 1000 ms less
// that time (997-999 ms on a fast machine, less on a loaded one). What
// holds whatever the gap:
//   - the first take left 5 tokens and the refill stops at 6, so the
//     second leaves between 4 and 5: allowed, retry 0, remaining 4 until
//     a whole token came back, and a reset in [500, 1000] ms (1 to 2
//     tokens at 2/s, rounded up), 500 exactly when remaining is 5;
//   - the node refilled for at most elapsed, so the reset is at least
//     1000 ms - elapsed: both takes spent the same bucket (a second
//     bucket would answer remaining 5, reset 500, within 500 ms). This
//     assumes the wall clock the node decides on is not stepped forward
//     during the test.
func checkSecondTake(r takeReply, elapsed time.Duration) error {
	switch {
	case r.allowed != 1 || r.retryMs != 0:
		return fmt.Errorf("allowed %d, retry %d ms; want 1 and 0 (at least 4 tokens are left)", r.allowed, r.retryMs)
	case r.resetMs < 500 || r.resetMs > 1000:
		return fmt.Errorf("reset %d ms, want 500 to 1000 (1 to 2 tokens missing at 2/s)", r.resetMs)
	case r.remaining != 4 && r.remaining != 5,
		r.remaining == 5 && r.resetMs != 500,
		r.remaining == 4 && r.resetMs == 500:
		return fmt.Errorf("remaining %d with reset %d ms; want 4 with (500, 1000] or 5 with 500", r.remaining, r.resetMs)
	}
	if floor := 1000 - elapsed.Milliseconds() - 1; r.resetMs < floor {
		return fmt.Errorf("reset %d ms, want at least %d: the bucket refilled for longer than the %v between the takes", r.resetMs, floor, elapsed)
	}
	return nil
}

// TestCheckSecondTake: the bounds the binary test holds WEIR.TAKE to accept
// what a real clock can give and refuse the rest.
func TestCheckSecondTake(t *testing.T) {
	const ms = time.Millisecond
	for _, tc := range []struct {
		r       takeReply
		elapsed time.Duration
		ok      bool
	}{
		{takeReply{1, 4, 0, 1000}, 2 * ms, true}, // no refill at all
		{takeReply{1, 4, 0, 998}, 2 * ms, true},  // 2 ms of refill
		{takeReply{1, 4, 0, 997}, 2 * ms, true},  // rounding: 2.x ms
		{takeReply{1, 4, 0, 700}, 350 * ms, true},
		{takeReply{1, 4, 0, 501}, 600 * ms, true},
		{takeReply{1, 5, 0, 500}, 600 * ms, true},  // a whole token came back
		{takeReply{1, 4, 0, 0}, 2 * ms, false},     // no reset
		{takeReply{1, 4, 0, 1001}, 2 * ms, false},  // over the time to refill 2 tokens
		{takeReply{1, 4, 0, 990}, 2 * ms, false},   // refilled longer than the takes were apart
		{takeReply{1, 5, 0, 500}, 100 * ms, false}, // the HTTP take was not spent here
		{takeReply{1, 3, 0, 1000}, 2 * ms, false},  // spent twice
		{takeReply{1, 5, 0, 700}, 600 * ms, false}, // remaining and reset disagree
		{takeReply{1, 4, 0, 500}, 600 * ms, false},
		{takeReply{0, 4, 0, 1000}, 2 * ms, false},
		{takeReply{1, 4, 500, 1000}, 2 * ms, false},
	} {
		if err := checkSecondTake(tc.r, tc.elapsed); (err == nil) != tc.ok {
			t.Errorf("checkSecondTake(%+v, %v) = %v, want ok %v", tc.r, tc.elapsed, err, tc.ok)
		}
	}
	if _, ok := parseTakeReply("*4\r\n:1\r\n:4\r\n:0\r\n:999\r\n"); !ok {
		t.Error("parseTakeReply refused a well-formed reply")
	}
	for _, bad := range []string{"*3\r\n:1\r\n:4\r\n:0\r\n", "*4\r\n:1\r\n:4\r\n:0\r\n$3\r\n", "-ERR x\r\n"} {
		if _, ok := parseTakeReply(bad); ok {
			t.Errorf("parseTakeReply(%q) accepted it", bad)
		}
	}
}
