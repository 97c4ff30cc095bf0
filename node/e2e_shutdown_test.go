package node_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/api/weirv1"
)

// TestShutdownAnswersParkedAcquire parks an acquire (wait_ms far beyond the
// shutdown timeout, on a clock that does not move) and shuts the node down:
// the parked caller must get an answer or a clean error, Shutdown must
// return nil, and both listeners must be closed.
func TestShutdownAnswersParkedAcquire(t *testing.T) {
	tn := startNode(t, nil)
	for range 8 {
		tn.acquire(`{"limit":"export-db","key":"sd"}`)
	}
	reqCtx, cancelReq := context.WithCancel(context.Background())
	defer cancelReq()
	type result struct {
		status int
		body   string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		req, _ := http.NewRequestWithContext(reqCtx, http.MethodPost, tn.base+"/v1/leases",
			strings.NewReader(`{"limit":"export-db","key":"sd","wait_ms":5000}`))
		resp, err := tn.hc.Do(req)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := readAll(resp)
		done <- result{status: resp.StatusCode, body: b, err: err}
	}()
	waitFor(t, "the acquire to park", 10*time.Second, func() bool {
		return tn.metric(`weir_lease_events_total{event="queued",limit="export-db"}`) == 1
	})
	httpAddr, grpcAddr := tn.n.HTTPAddr(), tn.n.GRPCAddr()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	err := tn.n.Shutdown(ctx)
	took := time.Since(start)
	// The answer was written before Shutdown returned; give the client
	// time to read it off the socket (a bound, not an expectation).
	var res result
	select {
	case res = <-done:
	case <-time.After(10 * time.Second):
		cancelReq() // unblock the parked handler so nothing leaks
		res = <-done
		t.Errorf("the parked acquire had no answer when Shutdown returned (after %v)", took)
	}
	if err != nil {
		t.Errorf("Shutdown = %v (after %v), want nil", err, took)
	}
	if res.err == nil {
		// An answer: a refusal or "unavailable", in JSON.
		if res.status != http.StatusTooManyRequests && res.status != http.StatusServiceUnavailable {
			t.Errorf("parked acquire answered %d %s, want 429 or 503", res.status, res.body)
		}
	} else if !errors.Is(res.err, context.Canceled) && !strings.Contains(res.err.Error(), "EOF") &&
		!strings.Contains(res.err.Error(), "connection reset") {
		t.Errorf("parked acquire failed uncleanly: %v", res.err)
	}

	for _, addr := range []string{httpAddr, grpcAddr} {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			t.Errorf("%s still accepts connections after Shutdown", addr)
		}
	}
	if r := tn.n.Readiness(); r.Ready || r.Reason != "shutting down" {
		t.Errorf("Readiness() = %+v after Shutdown, want not ready, shutting down", r)
	}
	if err := tn.n.Shutdown(context.Background()); err != nil {
		t.Errorf("second Shutdown = %v, want nil", err)
	}
}

// TestShutdownFinishesInFlightTakes shuts down while a gRPC caller keeps
// sending: every call gets a decision or a clean error; Shutdown returns nil
// and HTTP is closed afterwards.
func TestShutdownFinishesInFlightTakes(t *testing.T) {
	tn := startNode(t, nil)
	stop := make(chan struct{})
	errs := make(chan error, 2)
	go func() {
		for {
			select {
			case <-stop:
				errs <- nil
				return
			default:
			}
			_, err := tn.grpc.Take(context.Background(), &weirv1.TakeRequest{Checks: []*weirv1.Check{{Limit: "search", Key: "x"}}})
			if err != nil {
				errs <- nil // Unavailable once the server is gone: a clean error
				return
			}
		}
	}()
	waitFor(t, "some decisions", 10*time.Second, func() bool {
		return tn.metric(`weir_decisions_total{limit="search",outcome="allowed",source="owner"}`) >= 5
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tn.n.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown = %v, want nil", err)
	}
	close(stop)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if resp, err := tn.hc.Get(tn.base + "/healthz"); err == nil {
		_ = resp.Body.Close()
		t.Fatal("GET /healthz succeeded after Shutdown")
	}
}

// TestShutdownGRPCParkedAcquire is TestShutdownAnswersParkedAcquire over
// gRPC: the parked Acquire ends with an answer or a clean status, and
// Shutdown returns nil.
func TestShutdownGRPCParkedAcquire(t *testing.T) {
	tn := startNode(t, nil)
	for range 8 {
		tn.acquire(`{"limit":"export-db","key":"sdg"}`)
	}
	type result struct {
		resp *weirv1.AcquireResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := tn.grpc.Acquire(context.Background(), &weirv1.AcquireRequest{Limit: "export-db", Key: "sdg", WaitMs: 5000})
		done <- result{resp, err}
	}()
	waitFor(t, "the acquire to park", 10*time.Second, func() bool {
		return tn.metric(`weir_lease_events_total{event="queued",limit="export-db"}`) == 1
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tn.n.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown = %v, want nil", err)
	}
	res := <-done
	if res.err == nil && res.resp.GetGranted() {
		t.Fatalf("parked acquire was granted during shutdown with every permit held: %v", res.resp)
	}
	if st, _ := status.FromError(res.err); res.err != nil && st.Code() != codes.Unavailable && st.Code() != codes.Canceled {
		t.Fatalf("parked acquire = %v, want a refusal or Unavailable", res.err)
	}
}
