package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/api/client"
	"github.com/weir-rl/weir/api/weirv1"
	"github.com/weir-rl/weir/internal/nodetest"
	"github.com/weir-rl/weir/node" //nolint:depguard // integration tests against a real node, in the external test package only
)

// These tests talk to a real node over gRPC on loopback, on the real clock.
// The embedded limits file has export-db: 8 permits, lease_ttl 30s
// (max_lease_ttl 5m), queue 16 / 5s.

const (
	limit   = "export-db"
	permits = 8
)

// startNode starts a node and returns a client and a raw gRPC client of it;
// everything is stopped in t.Cleanup.
func startNode(t *testing.T) (*client.Client, weirv1.LimiterClient) {
	t.Helper()
	return startNodeAt(t, nil)
}

// startNodeAt is startNode with the node deciding on clock (nil: the real
// clock).
func startNodeAt(t *testing.T, clock func() time.Time) (*client.Client, weirv1.LimiterClient) {
	t.Helper()
	n, err := node.New(node.LocalConfig(), node.Deps{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(n.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := n.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return client.New(conn), weirv1.NewLimiterClient(conn)
}

// fill acquires n leases of key without waiting and fails the test if any
// is refused. The leases are closed in t.Cleanup.
func fill(t *testing.T, c *client.Client, key string, n int, opts client.AcquireOptions) []*client.Lease {
	t.Helper()
	var out []*client.Lease
	for i := range n {
		l, err := c.Acquire(t.Context(), limit, key, opts)
		if err != nil {
			t.Fatalf("acquire %d of %d: %v", i+1, n, err)
		}
		t.Cleanup(func() { _ = l.Close() })
		if len(out) > 0 && l.FencingToken() <= out[len(out)-1].FencingToken() {
			t.Fatalf("fencing token %d after %d", l.FencingToken(), out[len(out)-1].FencingToken())
		}
		out = append(out, l)
	}
	return out
}

// refused requires that one more acquire of key gets no permit.
func refused(t *testing.T, c *client.Client, key string) {
	t.Helper()
	l, err := c.Acquire(t.Context(), limit, key, client.AcquireOptions{})
	if err == nil {
		_ = l.Close()
		t.Fatal("an acquire beyond the permits was granted")
	}
	ref, ok := errors.AsType[*client.RefusedError](err)
	if !ok || !errors.Is(err, client.ErrRefused) || ref.RetryAfter <= 0 {
		t.Fatalf("acquire beyond the permits = %v, want a *RefusedError with a RetryAfter hint", err)
	}
}

// allFree requires that all permits of key can be acquired, then releases
// them.
func allFree(t *testing.T, c *client.Client, key string) {
	t.Helper()
	for _, l := range fill(t, c, key, permits, client.AcquireOptions{}) {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestNodeCloseReleases(t *testing.T) {
	c, _ := startNode(t)
	held := fill(t, c, "tenant:a", permits, client.AcquireOptions{Holder: "worker-1"})
	refused(t, c, "tenant:a")
	if err := held[3].Close(); err != nil {
		t.Fatal(err)
	}
	if err := held[3].Close(); err != nil { // idempotent
		t.Fatal(err)
	}
	if !errors.Is(held[3].Err(), client.ErrClosed) || held[3].Context().Err() == nil {
		t.Fatalf("closed lease: Err %v, context %v", held[3].Err(), held[3].Context().Err())
	}
	ninth := fill(t, c, "tenant:a", 1, client.AcquireOptions{})[0]
	if ninth.FencingToken() <= held[permits-1].FencingToken() {
		t.Fatal("the ninth lease's fencing token is not above the others")
	}
	refused(t, c, "tenant:a")
}

func TestNodeAcquireWaitsForAPermit(t *testing.T) {
	c, _ := startNode(t)
	held := fill(t, c, "tenant:w", permits, client.AcquireOptions{})
	type result struct {
		l   *client.Lease
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := c.Acquire(t.Context(), limit, "tenant:w", client.AcquireOptions{Wait: 5 * time.Second})
		got <- result{l, err}
	}()
	if err := held[0].Close(); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("waiting acquire: %v", r.err)
	}
	if err := r.l.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestNodeWithLeaseReleases(t *testing.T) {
	c, _ := startNode(t)
	boom := errors.New("boom")

	// On fn's error; while fn runs, its permit is held.
	err := c.WithLease(t.Context(), limit, "tenant:e", client.AcquireOptions{}, func(ctx context.Context, fencing uint64) error {
		if fencing == 0 {
			t.Error("zero fencing token")
		}
		others := fill(t, c, "tenant:e", permits-1, client.AcquireOptions{})
		refused(t, c, "tenant:e")
		for _, l := range others {
			_ = l.Close()
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("WithLease = %v, want fn's error", err)
	}
	allFree(t, c, "tenant:e")

	// On the caller's cancellation.
	ctx, cancel := context.WithCancel(t.Context())
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- c.WithLease(ctx, limit, "tenant:c", client.AcquireOptions{}, func(ctx context.Context, _ uint64) error {
			close(started)
			<-ctx.Done()
			return ctx.Err()
		})
	}()
	<-started
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("WithLease after cancel = %v, want context.Canceled", err)
	}
	allFree(t, c, "tenant:c")

	// On a panic, which propagates.
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v, want fn's panic", r)
			}
		}()
		_ = c.WithLease(t.Context(), limit, "tenant:p", client.AcquireOptions{}, func(context.Context, uint64) error {
			panic("boom")
		})
	}()
	allFree(t, c, "tenant:p")
}

// TestNodeRenewalOutlivesTTL holds every permit with 2s leases, renewed
// every 200ms, for two lifetimes: the renewals keep all of them, while a
// lease nobody renews, taken at the same time under another key, is gone.
// Each renewal has 1.8 s of slack on the real clock; the exact timing of
// renewals is the synctest tests' (lease_test.go).
func TestNodeRenewalOutlivesTTL(t *testing.T) {
	c, raw := startNode(t)
	const ttl = 2 * time.Second
	unrenewed, err := raw.Acquire(t.Context(), &weirv1.AcquireRequest{Limit: limit, Key: "tenant:control", TtlMs: ttl.Milliseconds()})
	if err != nil || !unrenewed.GetGranted() || unrenewed.GetTtlMs() != ttl.Milliseconds() {
		t.Fatalf("control acquire = %v, %v", unrenewed, err)
	}
	held := fill(t, c, "tenant:r", permits, client.AcquireOptions{TTL: ttl, RenewFraction: 0.1})
	<-time.After(2 * ttl) // the window the leases must outlive, not a wait for an effect
	// The server's clock agrees that more than a lifetime passed.
	if _, err := raw.Renew(t.Context(), &weirv1.RenewRequest{Id: unrenewed.GetId()}); status.Code(err) != codes.NotFound {
		t.Fatalf("renewing the unrenewed control lease = %v, want NotFound (expired)", err)
	}
	refused(t, c, "tenant:r")
	for _, l := range held {
		if l.Err() != nil {
			t.Fatalf("lease ended: %v", l.Err())
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	allFree(t, c, "tenant:r")
}

func TestNodeLostLeaseCancelsContext(t *testing.T) {
	c, raw := startNode(t)
	l, err := c.Acquire(t.Context(), limit, "tenant:l", client.AcquireOptions{TTL: 600 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Release(t.Context(), &weirv1.ReleaseRequest{Id: l.ID()}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a lease released behind its back was not noticed within 10s (renewals every 200ms)")
	}
	if !errors.Is(l.Err(), client.ErrLost) || !errors.Is(context.Cause(l.Context()), client.ErrLost) {
		t.Fatalf("Err = %v, want ErrLost", l.Err())
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close after loss = %v", err)
	}
	allFree(t, c, "tenant:l")
}

func TestNodeTakeAndErrors(t *testing.T) {
	// A frozen clock: the export bucket refills 2/s, and the fourth take
	// must meet it empty however long the first three took.
	frozen := time.Now()
	c, _ := startNodeAt(t, func() time.Time { return frozen })
	resp, err := c.Take(t.Context(), api.Check{Limit: "export", Key: "tenant:t", Cost: 2}, api.Check{Limit: "search", Key: "tenant:t"})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Allowed || resp.RulesVersion != 3 || len(resp.Results) != 2 ||
		resp.Results[0].Remaining != 4 || resp.Results[0].Capacity != 6 || resp.Results[1].Remaining != 99 {
		t.Fatalf("Take = %+v", resp)
	}
	for i := range 2 {
		resp, err = c.Take(t.Context(), api.Check{Limit: "export", Key: "tenant:t", Cost: 2})
		if err != nil || !resp.Allowed {
			t.Fatalf("take %d: %+v, %v", i, resp, err)
		}
	}
	resp, err = c.Take(t.Context(), api.Check{Limit: "export", Key: "tenant:t", Cost: 2})
	if err != nil || resp.Allowed || resp.RetryAfter <= 0 {
		t.Fatalf("take of an empty bucket = %+v, %v; want a denial with RetryAfter", resp, err)
	}

	invalid := func(what string, err error) {
		t.Helper()
		if e, ok := errors.AsType[*api.Error](err); !ok || e.Code != api.CodeInvalid || e.Detail == "" {
			t.Fatalf("%s: err = %v, want *api.Error CodeInvalid with a detail", what, err)
		}
	}
	_, err = c.Take(t.Context(), api.Check{Limit: "nope", Key: "k"})
	invalid("unknown limit", err)
	_, err = c.Take(t.Context(), api.Check{Limit: limit, Key: "k"})
	invalid("take of a concurrency limit", err)
	_, err = c.Take(t.Context())
	invalid("no checks", err)
	_, err = c.Acquire(t.Context(), "export", "k", client.AcquireOptions{})
	invalid("lease of a rate limit", err)
	_, err = c.Acquire(t.Context(), limit, "", client.AcquireOptions{})
	invalid("empty key", err)
}

// Dial works against a node that is not clustered: its ring is itself.
func TestDialSingleNodeTakesAndLeases(t *testing.T) {
	n := nodetest.Start(t, node.LocalConfig(), node.Deps{})
	c := dial(t, n, client.Options{})
	if o, ok := c.Owner("search", "k"); !ok || o != "weir" {
		t.Fatalf("Owner = %q, %v; want the node", o, ok)
	}
	for range 3 {
		resp, err := c.Take(t.Context(), api.Check{Limit: "search", Key: "k", Cost: 1})
		if err != nil || !resp.Allowed || resp.Forwarded {
			t.Fatalf("take = %+v, %v", resp, err)
		}
	}
	err := c.WithLease(t.Context(), limit, "job", client.AcquireOptions{}, func(_ context.Context, fencing uint64) error {
		if fencing == 0 {
			t.Error("no fencing token")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Take(t.Context(), api.Check{Limit: "search", Key: "k"}); err == nil {
		t.Fatal("a take after Close succeeded")
	}
}
