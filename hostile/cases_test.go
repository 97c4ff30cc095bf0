package hostile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/api/weirv1"
)

// authed returns a request with the canary's token.
func authed(t *testing.T, method, url string, body []byte) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+canaryToken)
	return req
}

// TestIdleConnections holds many idle TCP connections on the HTTP and gRPC
// ports at once; the node keeps answering, closes the HTTP ones after the
// header timeout, and gets its goroutines and files back.
func TestIdleConnections(t *testing.T) {
	attack(t, nil, func(t *testing.T, n *node, sc scale) {
		sc.idleConns = fileBudget(t, sc.idleConns)
		conns := make([]net.Conn, 0, sc.idleConns)
		defer func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}()
		for i := range sc.idleConns {
			addr := n.http
			if i%4 == 3 {
				addr = n.grpc
			}
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				t.Fatalf("connection %d: %v", i, err)
			}
			conns = append(conns, c)
		}
		t.Logf("%d idle connections open; node has %d files open", len(conns), n.openFDs())
		// Every HTTP connection is closed by the node once the header
		// timeout passes; reading one sees EOF.
		_ = conns[0].SetReadDeadline(time.Now().Add(readHeaderTimeout + 5*time.Second))
		if _, err := conns[0].Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Fatalf("an idle HTTP connection was not closed by the node: %v", err)
		}
	})
}

// fileBudget raises this process's open-file limit to its hard limit (Go
// does so at start on Linux; this also covers other starts) and returns
// want, or what the hard limit leaves room for, logged, when that is less.
func fileBudget(t *testing.T, want int) int {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			t.Logf("raise RLIMIT_NOFILE: %v", err)
		}
		_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	if room := int(lim.Cur) - 1000; room < want { //nolint:gosec // a file limit fits an int
		t.Logf("RLIMIT_NOFILE %d leaves room for %d idle connections, not %d", lim.Cur, room, want)
		return max(room, 100)
	}
	return want
}

// TestSlowloris opens connections that send headers, then bodies, one
// byte at a time; the node drops them at its read timeouts, decides
// nothing for them, and keeps answering.
func TestSlowloris(t *testing.T) {
	attack(t, nil, func(t *testing.T, n *node, sc scale) {
		before := sum(n.metrics(), `weir_decisions_total{limit="export"`)
		var wg sync.WaitGroup
		var closed, lingering atomic.Int64
		body := jsonTake("export", "slow")
		for i := range sc.slowConns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := net.DialTimeout("tcp", n.http, 5*time.Second)
				if err != nil {
					return
				}
				defer c.Close()
				head := "POST /v1/take HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + canaryToken + "\r\n"
				var drip string
				if i%2 == 0 { // slow headers: never finish them
					drip = "X-Slow: " + strings.Repeat("a", 64)
				} else { // slow body: headers done, body one byte at a time
					head += "Content-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
					drip = string(body)
				}
				if _, err := io.WriteString(c, head); err != nil {
					return
				}
				start := time.Now()
				for j := 0; j < len(drip)-1; j++ {
					if _, err := c.Write([]byte{drip[j]}); err != nil {
						break
					}
					time.Sleep(200 * time.Millisecond) // the attack's pace
					if time.Since(start) > readTimeout+3*time.Second {
						// A write succeeds after the node's FIN, and a
						// stalled goroutine may not have written since:
						// look at the socket before calling it open.
						if stillOpen(c) {
							lingering.Add(1)
							return
						}
						break
					}
				}
				// The node must have closed or answered by now: read to EOF.
				_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
				_, _ = io.Copy(io.Discard, c)
				closed.Add(1)
			}()
		}
		wg.Wait()
		if lingering.Load() > 0 {
			t.Errorf("%d slowloris connections were still open after the read timeout", lingering.Load())
		}
		after := sum(n.metrics(), `weir_decisions_total{limit="export"`)
		if after != before {
			t.Errorf("slowloris requests were decided: %v decisions on export, want %v", after, before)
		}
		t.Logf("%d slowloris connections dropped by the node", closed.Load())
	})
}

// stillOpen reports whether the peer has neither closed c nor reset it: a
// FIN or RST already received is read at once, so a short wait suffices.
func stillOpen(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	_, err := io.Copy(io.Discard, c)
	return errors.Is(err, os.ErrDeadlineExceeded)
}

// TestHugeHeader sends a 1 MiB header: 431, nothing decided.
func TestHugeHeader(t *testing.T) {
	attack(t, nil, func(t *testing.T, n *node, _ scale) {
		req := authed(t, http.MethodPost, "http://"+n.http+"/v1/take", jsonTake("export", "huge"))
		req.Header.Set("X-Huge", strings.Repeat("h", 1<<20))
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("1 MiB header: %v", err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("1 MiB header: %d, want 431", resp.StatusCode)
		}
		if got := sum(n.metrics(), `weir_decisions_total{limit="export"`); got != 0 {
			t.Fatalf("%v decisions after a refused request", got)
		}
	})
}

// TestBadKeys sends invalid UTF-8 over HTTP and gRPC (refused, nothing
// created) and NUL bytes (decided like any key, never echoed).
func TestBadKeys(t *testing.T) {
	attack(t, nil, func(t *testing.T, n *node, _ scale) {
		base := n.metrics()
		for _, raw := range []string{
			`{"checks":[{"limit":"export","key":"` + "\xff\xfe" + `","cost":1}]}`,
			`{"checks":[{"limit":"export","key":"\udc00","cost":1}]}`,
			`{"checks":[{"limit":"` + "\xc3" + `","key":"k","cost":1}]}`,
		} {
			resp, err := n.hc.Do(authed(t, http.MethodPost, "http://"+n.http+"/v1/take", []byte(raw)))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || bytes.Contains(b, []byte("\xff")) {
				t.Fatalf("invalid UTF-8 %q: %d %s, want 400 without the bytes", raw, resp.StatusCode, b)
			}
		}
		conn, err := grpc.NewClient(n.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+canaryToken)
		_, err = weirv1.NewLimiterClient(conn).Take(ctx, &weirv1.TakeRequest{Checks: []*weirv1.Check{{Limit: "export", Key: "\xff", Cost: 1}}})
		if code := status.Code(err); code != codes.InvalidArgument && code != codes.Internal {
			t.Fatalf("gRPC invalid UTF-8: %v, want a refusal", err)
		}
		after := n.metrics()
		if after["weir_buckets"] != base["weir_buckets"] || sum(after, `weir_decisions_total{limit="export"`) != 0 {
			t.Fatalf("invalid keys changed state: buckets %v -> %v", base["weir_buckets"], after["weir_buckets"])
		}
		// NUL is valid UTF-8: decided normally, and the answer does not echo it.
		resp, err := n.hc.Do(authed(t, http.MethodPost, "http://"+n.http+"/v1/take", jsonTake("export", "a\x00b")))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || bytes.Contains(b, []byte("a\\u0000b")) {
			t.Fatalf("NUL key: %d %s", resp.StatusCode, b)
		}
	})
}

// TestDistinctKeyBurst sends a burst of distinct keys, 100 per take,
// against a small --max-buckets: the bucket count never passes the cap,
// takes past it are 503 limiter_overloaded, and the canary's existing
// bucket keeps answering.
func TestDistinctKeyBurst(t *testing.T) {
	attack(t, nil, func(t *testing.T, n *node, sc scale) {
		const per = 100
		var next, overloaded, allowed atomic.Int64
		var wg sync.WaitGroup
		tr := &http.Transport{MaxIdleConnsPerHost: 16}
		defer tr.CloseIdleConnections()
		hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
		var firstErr atomic.Value
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				keys := make([]string, per)
				for {
					start := next.Add(per) - per
					if start >= int64(sc.keys) {
						return
					}
					for i := range keys {
						keys[i] = "burst:" + strconv.FormatInt(start+int64(i), 36)
					}
					resp, err := hc.Do(authed(t, http.MethodPost, "http://"+n.http+"/v1/take", jsonTake("export", keys...)))
					if err != nil {
						firstErr.CompareAndSwap(nil, err)
						return
					}
					b, _ := io.ReadAll(resp.Body)
					_ = resp.Body.Close()
					switch {
					case resp.StatusCode == http.StatusOK:
						allowed.Add(per)
					case resp.StatusCode == http.StatusServiceUnavailable && bytes.Contains(b, []byte("limiter_overloaded")):
						overloaded.Add(per)
					default:
						firstErr.CompareAndSwap(nil, fmt.Errorf("take: %d %s", resp.StatusCode, b))
						return
					}
				}
			}()
		}
		wg.Wait()
		if err, _ := firstErr.Load().(error); err != nil {
			t.Fatal(err)
		}
		m := n.metrics()
		t.Logf("%d distinct keys: %d admitted, %d refused as overloaded; %v buckets (cap %d)", sc.keys, allowed.Load(), overloaded.Load(), m["weir_buckets"], sc.maxBuckets)
		if m["weir_buckets"] > float64(sc.maxBuckets) {
			t.Fatalf("%v buckets, over the cap of %d", m["weir_buckets"], sc.maxBuckets)
		}
		if overloaded.Load() == 0 || allowed.Load() == 0 {
			t.Fatal("the burst did not reach the cap")
		}
	})
}

// TestOversizeGRPC sends a message over the receive limit and a take with
// a key over the key limit: both refused, nothing created.
func TestOversizeGRPC(t *testing.T) {
	attack(t, nil, func(t *testing.T, n *node, _ scale) {
		conn, err := grpc.NewClient(n.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		cl := weirv1.NewLimiterClient(conn)
		ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+canaryToken)
		before := n.metrics()["weir_buckets"]
		for _, size := range []int{1 << 20, 16 << 20} {
			_, err := cl.Take(ctx, &weirv1.TakeRequest{Checks: []*weirv1.Check{{Limit: "export", Key: strings.Repeat("k", size), Cost: 1}}})
			if status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("%d-byte message: %v, want ResourceExhausted", size, err)
			}
		}
		if _, err := cl.Take(ctx, &weirv1.TakeRequest{Checks: []*weirv1.Check{{Limit: "export", Key: strings.Repeat("k", 100<<10), Cost: 1}}}); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("100 KiB key: %v, want InvalidArgument", err)
		}
		if after := n.metrics()["weir_buckets"]; after != before {
			t.Fatalf("buckets %v -> %v after refused messages", before, after)
		}
	})
}

// TestStreamThatNeverReads sends requests on TakeStreams and never reads
// the answers. A stream decides one request at a time (at most one in
// flight per stream), and its unread answers wait in the client's buffers
// or stop the node's Send once HTTP/2 flow control says so; either way the
// node's memory stays bounded, others are answered, and cancelling the
// streams frees everything.
func TestStreamThatNeverReads(t *testing.T) {
	attack(t, nil, func(t *testing.T, n *node, sc scale) {
		conn, err := grpc.NewClient(n.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+canaryToken))
		defer cancel()
		cl := weirv1.NewLimiterClient(conn)
		req := &weirv1.TakeRequest{Checks: []*weirv1.Check{{Limit: "canary", Key: "stream", Cost: 1}}}
		var sent atomic.Int64
		var wg sync.WaitGroup
		for range 8 {
			st, err := cl.TakeStream(ctx)
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range sc.streamMsgs / 8 {
					if st.Send(req) != nil {
						return
					}
					sent.Add(1)
				}
			}()
		}
		// Wait until every request is sent or the senders stall.
		var last int64 = -1
		deadline := time.Now().Add(20 * time.Second)
		for s := sent.Load(); s != last && s < int64(sc.streamMsgs) && time.Now().Before(deadline); s = sent.Load() {
			last = s
			time.Sleep(300 * time.Millisecond) // polling: has the sender stalled?
		}
		decided := sum(n.metrics(), `weir_decisions_total{limit="canary"`)
		t.Logf("sent %d of %d requests on 8 streams that never read; node decided %v canary takes in all", sent.Load(), sc.streamMsgs, decided)
		cancel()
		wg.Wait()
	})
}

// TestConnectStorm connects and disconnects as fast as it can, half the
// time after sending a partial request, on both ports.
func TestConnectStorm(t *testing.T) {
	attack(t, nil, func(t *testing.T, n *node, sc scale) {
		var conns atomic.Int64
		stop := time.Now().Add(sc.storm)
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; time.Now().Before(stop); i++ {
					addr := n.http
					if w%2 == 1 {
						addr = n.grpc
					}
					c, err := net.DialTimeout("tcp", addr, 2*time.Second)
					if err != nil {
						continue
					}
					conns.Add(1)
					if i%2 == 0 {
						_, _ = c.Write([]byte("POST /v1/take HTTP/1.1\r\nHost: x\r\nContent-Le"))
					}
					if tc, ok := c.(*net.TCPConn); ok && i%3 == 0 {
						_ = tc.SetLinger(0) // reset instead of FIN
					}
					_ = c.Close()
				}
			}()
		}
		wg.Wait()
		t.Logf("%d connections opened and dropped in %v", conns.Load(), sc.storm)
	})
}

// TestBadTokenFlood sends requests with wrong, empty and malformed
// credentials: each is 401, counted, and spends nothing.
func TestBadTokenFlood(t *testing.T) {
	attack(t, nil, func(t *testing.T, n *node, sc scale) {
		before := n.metrics()
		var wg sync.WaitGroup
		var next atomic.Int64
		var wrong atomic.Value
		tr := &http.Transport{MaxIdleConnsPerHost: 16}
		defer tr.CloseIdleConnections()
		hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		body := jsonTake("export", "flood")
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := next.Add(1); i <= int64(sc.badTokens); i = next.Add(1) {
					req, _ := http.NewRequest(http.MethodPost, "http://"+n.http+"/v1/take", bytes.NewReader(body))
					switch i % 4 {
					case 0:
						req.Header.Set("Authorization", "Bearer "+strconv.FormatInt(i, 16)+canaryToken)
					case 1:
						req.Header.Set("Authorization", "Basic "+canaryToken)
					case 2:
						req.Header.Set("X-Weir-Token", strings.Repeat("x", 4096))
					}
					resp, err := hc.Do(req)
					if err != nil {
						wrong.CompareAndSwap(nil, err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					if resp.StatusCode != http.StatusUnauthorized {
						wrong.CompareAndSwap(nil, fmt.Errorf("bad token answered %d", resp.StatusCode))
						return
					}
				}
			}()
		}
		wg.Wait()
		if err, _ := wrong.Load().(error); err != nil {
			t.Fatal(err)
		}
		after := n.metrics()
		failures := sum(after, "weir_auth_failures_total") - sum(before, "weir_auth_failures_total")
		if failures != float64(sc.badTokens) {
			t.Fatalf("auth failures counted %v, want %d", failures, sc.badTokens)
		}
		if after["weir_buckets"] != before["weir_buckets"] || sum(after, `weir_decisions_total{limit="export"`) != 0 {
			t.Fatal("requests with bad tokens changed state")
		}
	})
}
