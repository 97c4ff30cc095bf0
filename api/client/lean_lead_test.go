package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/internal/testpki"
	"github.com/weir-rl/weir/internal/testwait"
	"github.com/weir-rl/weir/internal/tlsreload"
)

// These tests hold the lean connection's reading by its takes: the turn to
// read passes on when the reader's context ends, replies of takes that
// gave up are dropped in order, and an idle connection its member closed
// is replaced before a take is sent into it.

// versionReply is a WEIR.CTAKE reply whose rules version is v, so that a
// test can tell which reply a take got.
func versionReply(v int) []byte {
	return fmt.Appendf(nil, "*13\r\n:1\r\n:0\r\n:%d\r\n:1\r\n:0\r\n$5\r\nexact\r\n:1\r\n:9\r\n:10\r\n:0\r\n:100\r\n:0\r\n:1000\r\n", v)
}

// gatedRESP is a fake endpoint (TLS with tc when set) whose n-th
// WEIR.CTAKE is answered with versionReply(n) once the test lets it
// through gate.
func gatedRESP(t *testing.T, tc *tls.Config) (*fakeRESP, chan struct{}) {
	gate := make(chan struct{}, 16)
	n := 0
	f := newFakeRESPWith(t, tc, func([]string) []byte {
		<-gate
		n++ // one connection: calls come one at a time
		return versionReply(n)
	})
	return f, gate
}

// leanConnTo dials one lean connection to f (TLS with tc when set).
func leanConnTo(t *testing.T, f *fakeRESP, tc *tls.Config) *leanConn {
	t.Helper()
	p := newLeanPool(f.ln.Addr().String(), &Options{LeanConns: 1, Clock: realClock{}, TLSConfig: tc})
	c := p.get(t.Context())
	if c == nil {
		t.Fatal("no lean connection to the fake endpoint")
	}
	t.Cleanup(func() { c.fail(errClosed) })
	return c
}

type leanResult struct {
	resp api.TakeResponse
	err  error
}

// goTake runs a take on c in a goroutine and waits until it is queued.
func goTake(t *testing.T, c *leanConn, ctx context.Context, queued int) chan leanResult {
	t.Helper()
	out := make(chan leanResult, 1)
	go func() {
		resp, err := c.take(ctx, []byte("rid"), []api.Check{{Limit: "exact", Key: "k", Cost: 1}})
		out <- leanResult{resp, err}
	}()
	waitUntil(t, 10*time.Second, "the take to be queued", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.waiters) == queued
	})
	return out
}

// waitUntil polls cond every millisecond until it holds, failing t after
// d (testwait.Until).
func waitUntil(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, d, time.Millisecond, what, cond)
}

func recv(t *testing.T, ch chan leanResult) leanResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("the take never returned: nobody read its reply")
		return leanResult{}
	}
}

// TestLeanReaderGivesUpTurnPasses: the take reading the connection stops
// when its context ends, and the take queued behind it reads on: it drops
// the first reply and gets its own. Over TLS too, whose reads resume after
// a deadline.
func TestLeanReaderGivesUpTurnPasses(t *testing.T) {
	t.Run("tcp", func(t *testing.T) { testReaderGivesUpTurnPasses(t, nil, nil) })
	t.Run("tls", func(t *testing.T) {
		dir := t.TempDir()
		ca := testpki.NewCA(t, dir, "ca")
		pair := ca.Server(t, dir, "node")
		cert, err := tls.LoadX509KeyPair(pair.CertFile, pair.KeyFile)
		if err != nil {
			t.Fatal(err)
		}
		client, err := tlsreload.ClientConfig(tlsreload.ClientOptions{CAFile: ca.CertFile})
		if err != nil {
			t.Fatal(err)
		}
		testReaderGivesUpTurnPasses(t, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}, client)
	})
}

func testReaderGivesUpTurnPasses(t *testing.T, server, client *tls.Config) {
	f, gate := gatedRESP(t, server)
	c := leanConnTo(t, f, client)
	ctxA, cancelA := context.WithCancel(t.Context())
	a := goTake(t, c, ctxA, 1) // a reads: it found no one reading
	b := goTake(t, c, t.Context(), 2)
	cancelA()
	if r := recv(t, a); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("the reader whose context ended: %+v, %v", r.resp, r.err)
	}
	gate <- struct{}{}
	gate <- struct{}{}
	if r := recv(t, b); r.err != nil || r.resp.RulesVersion != 2 {
		t.Fatalf("the take behind it: version %d, %v; want its own reply, version 2", r.resp.RulesVersion, r.err)
	}
}

// TestLeanFollowerGivesUp: a queued take whose context ends returns, the
// reader gets its own reply, and the next take reads past the abandoned
// reply to its own.
func TestLeanFollowerGivesUp(t *testing.T) {
	f, gate := gatedRESP(t, nil)
	c := leanConnTo(t, f, nil)
	a := goTake(t, c, t.Context(), 1)
	ctxB, cancelB := context.WithCancel(t.Context())
	b := goTake(t, c, ctxB, 2)
	cancelB()
	if r := recv(t, b); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("the queued take whose context ended: %+v, %v", r.resp, r.err)
	}
	gate <- struct{}{}
	if r := recv(t, a); r.err != nil || r.resp.RulesVersion != 1 {
		t.Fatalf("the reader: version %d, %v; want 1", r.resp.RulesVersion, r.err)
	}
	next := goTake(t, c, t.Context(), 2)
	gate <- struct{}{}
	gate <- struct{}{}
	if r := recv(t, next); r.err != nil || r.resp.RulesVersion != 3 {
		t.Fatalf("the next take: version %d, %v; want 3 (2 was the abandoned take's)", r.resp.RulesVersion, r.err)
	}
}

// TestLeanIdleConnClosedByMember: a connection its member closed while it
// sat idle is replaced before the next take is sent into it, so the take
// succeeds without a retry.
func TestLeanIdleConnClosedByMember(t *testing.T) {
	n := startLeanNode(t, nil)
	f := newFakeRESP(t, func() []byte { return versionReply(1) })
	fc := newFakeClock()
	c := dialLean(t, n, Options{LeanConns: 1, Clock: fc, Retry: RetryPolicy{MaxAttempts: 1}}, f.ln.Addr().String())
	if _, err := c.Take(t.Context(), api.Check{Limit: "exact", Key: "k"}); err != nil {
		t.Fatal(err)
	}
	lc := c.r.members.Load().list[0].lean.slots[0].Load()
	f.mu.Lock()
	for _, nc := range f.conns {
		_ = nc.Close()
	}
	f.mu.Unlock()
	waitUntil(t, 10*time.Second, "the member's close to reach the connection", func() bool { return peerClosed(lc.nc) })
	_ = fc.Sleep(t.Context(), leanIdleCheck)
	if _, err := c.Take(t.Context(), api.Check{Limit: "exact", Key: "k"}); err != nil {
		t.Fatalf("a take after the member closed the idle connection: %v", err)
	}
	if st := c.Stats(); st.LeanTakes != 2 || f.seen.Load() != 2 {
		t.Fatalf("stats %+v, the endpoint read %d takes: want both over RESP", st, f.seen.Load())
	}
}

// stutterReader hands out one byte per read, with a read deadline's error
// between every two.
type stutterReader struct {
	s       string
	timeout bool
}

func (r *stutterReader) Read(p []byte) (int, error) {
	if r.timeout = !r.timeout; r.timeout {
		return 0, os.ErrDeadlineExceeded
	}
	if r.s == "" {
		return 0, io.EOF
	}
	p[0] = r.s[0]
	r.s = r.s[1:]
	return 1, nil
}

// TestReplyReaderResumes: a read deadline in the middle of a reply
// consumes nothing; reading on gets the whole reply, then the next.
func TestReplyReaderResumes(t *testing.T) {
	rr := newReplyReader(&stutterReader{s: string(versionReply(7)) + string(versionReply(8))})
	for _, want := range []int64{7, 8} {
		timeouts := 0
		for {
			resp, err := rr.readCTake(nil)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				timeouts++
				continue
			}
			if err != nil || resp.RulesVersion != want || len(resp.Results) != 1 || resp.Results[0].Limit != "exact" {
				t.Fatalf("reply %d after %d timeouts: %+v, %v", want, timeouts, resp, err)
			}
			break
		}
		if timeouts < 50 {
			t.Fatalf("reply %d read after %d timeouts: the reader did not stop in the middle", want, timeouts)
		}
	}
	if _, err := rr.readCTake(nil); !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("past the last reply: %v", err)
	}
}

// TestLeanAnswersNeverCross: many callers on one connection, a quarter
// of them giving up at once or within a few hundred microseconds, against
// an endpoint that answers each take with a version taken from its key and
// sometimes pauses: every take that returns an answer gets its own, and
// every other one its context's error, however the turn to read moves.
func TestLeanAnswersNeverCross(t *testing.T) {
	var n atomic.Int64
	f := newFakeRESPWith(t, nil, func(args []string) []byte {
		// args: WEIR.CTAKE rid budget limit key cost
		v, err := strconv.Atoi(strings.TrimPrefix(args[4], "k"))
		if err != nil {
			return []byte("-ERR bad key\r\n")
		}
		if n.Add(1)%7 == 0 {
			time.Sleep(200 * time.Microsecond) // the endpoint falls behind now and then
		}
		return versionReply(v)
	})
	c := leanConnTo(t, f, nil)
	const callers, each = 8, 200
	var wg sync.WaitGroup
	var answered, gaveUp atomic.Int64
	for i := range callers {
		wg.Go(func() {
			for j := range each {
				v := i*each + j
				ctx, cancel := context.WithCancel(t.Context())
				if v%4 == 0 {
					// Give up at once, or a little later, while the take may
					// be reading for others.
					time.AfterFunc(time.Duration(v%3)*100*time.Microsecond, cancel)
				}
				resp, err := c.take(ctx, []byte("rid"), []api.Check{{Limit: "exact", Key: fmt.Sprint("k", v), Cost: 1}})
				cancel()
				switch {
				case err == nil && resp.RulesVersion == int64(v):
					answered.Add(1)
				case errors.Is(err, context.Canceled) && v%4 == 0:
					gaveUp.Add(1)
				default:
					t.Errorf("take %d: version %d, %v", v, resp.RulesVersion, err)
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		c.fail(errClosed) // release them, so the test ends with its callers
		<-done
		t.Fatal("takes still waiting after 30s: an answer or the turn to read was lost")
	}
	t.Logf("%d answered, %d gave up", answered.Load(), gaveUp.Load())
	if answered.Load()+gaveUp.Load() != callers*each || answered.Load() < callers*each*3/4 {
		t.Fatalf("%d answered and %d gave up of %d", answered.Load(), gaveUp.Load(), callers*each)
	}
}

// TestLeanPoolSpills: takes share a member's first connection until it has
// leanSpill in flight; the next take opens the second, and with both that
// busy a take goes on the less busy one.
func TestLeanPoolSpills(t *testing.T) {
	f := newFakeRESP(t, func() []byte { return nil }) // never answers: takes stay in flight
	p := newLeanPool(f.ln.Addr().String(), &Options{LeanConns: 2, Clock: realClock{}})
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	fill := func(c *leanConn, n int) {
		t.Helper()
		want := c.inflight.Load() + int32(n)
		for range n {
			wg.Go(func() { _, _ = c.take(ctx, []byte("rid"), []api.Check{{Limit: "exact", Key: "k", Cost: 1}}) })
		}
		waitUntil(t, 10*time.Second, "the takes to be in flight", func() bool { return c.inflight.Load() == want })
	}
	first := p.get(ctx)
	if first == nil {
		t.Fatal("no lean connection to the fake endpoint")
	}
	fill(first, leanSpill-1)
	if c := p.get(ctx); c != first {
		t.Fatalf("with %d in flight a take went on another connection", leanSpill-1)
	}
	fill(first, 1)
	second := p.get(ctx)
	if second == nil || second == first {
		t.Fatalf("with %d in flight on the first connection, get returned %p (first %p); want a second", leanSpill, second, first)
	}
	fill(second, leanSpill+1)
	if c := p.get(ctx); c != first {
		t.Fatalf("both busy (%d and %d in flight): get returned %p, want the less busy first %p", first.inflight.Load(), second.inflight.Load(), c, first)
	}
}
