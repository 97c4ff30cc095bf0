package node_test

import (
	"context"
	"strings"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/weir-rl/weir/api/weirv1"
	"github.com/weir-rl/weir/node"
)

// This file runs the RLQS flows the protocol documents against a real
// node through go-control-plane's generated client: first report, steady
// reports, demand change, an empty bucket, buckets Weir cannot assign,
// abandon, a broken stream and a restarted server.

const outstandingSeries = "weir_allotments_outstanding_tokens"

// tokenBucket returns a's token bucket, failing when a is anything else.
func tokenBucket(t *testing.T, a *rlqsv3.RateLimitQuotaResponse_BucketAction) (*typev3.TokenBucket, time.Duration) {
	t.Helper()
	q := a.GetQuotaAssignmentAction()
	tb := q.GetRateLimitStrategy().GetTokenBucket()
	if tb == nil {
		t.Fatalf("action %v: want a token bucket", a)
	}
	return tb, time.Duration(q.GetAssignmentTimeToLive().GetSeconds()) * time.Second
}

// denyTTL returns a's DENY_ALL time to live, failing when a is anything else.
func denyTTL(t *testing.T, a *rlqsv3.RateLimitQuotaResponse_BucketAction) time.Duration {
	t.Helper()
	q := a.GetQuotaAssignmentAction()
	if q.GetRateLimitStrategy().GetBlanketRule() != typev3.RateLimitStrategy_DENY_ALL || q.GetRateLimitStrategy().GetTokenBucket() != nil {
		t.Fatalf("action %v: want DENY_ALL", a)
	}
	return time.Duration(q.GetAssignmentTimeToLive().GetSeconds()) * time.Second
}

// one returns the only action of as.
func one(t *testing.T, as []*rlqsv3.RateLimitQuotaResponse_BucketAction) *rlqsv3.RateLimitQuotaResponse_BucketAction {
	t.Helper()
	if len(as) != 1 {
		t.Fatalf("got %d actions %v, want 1", len(as), as)
	}
	return as[0]
}

// drive runs the proxy for d at demand requests per second (in 10 ms
// steps), then reports; it returns the answer.
func drive(tn *testNode, p *simProxy, id map[string]string, demand int, d time.Duration) []*rlqsv3.RateLimitQuotaResponse_BucketAction {
	b := p.bucket(id)
	for i := range int(d / (10 * time.Millisecond)) {
		now := tn.clock.Now()
		p.deliver(now)
		for range demand*(i+1)/100 - demand*i/100 {
			b.admit(now)
		}
		tn.clock.Advance(10 * time.Millisecond)
	}
	return p.report(tn.clock.Now(), d, 0)
}

// TestRLQSReportsAndAssignments walks one bucket through its first report,
// steady reports (the same token bucket, which Envoy extends), a demand
// change up and down, and checks that what the owner counts outstanding
// covers every assignment sent.
func TestRLQSReportsAndAssignments(t *testing.T) {
	tn := startNode(t, func(c *node.Config) { c.LimitsPath = writeLimits(t, rlqsLimits) })
	p := newSimProxy(t, tn.conn)
	id := map[string]string{"name": "api", "tenant": "acme", "env": "prod"}

	// First report: the first request was denied (no assignment yet).
	p.bucket(id).admit(tn.clock.Now())
	a := one(t, p.report(tn.clock.Now(), 0, 0))
	if !proto.Equal(a.GetBucketId(), &rlqsv3.BucketId{Bucket: id}) {
		t.Fatalf("bucket id %v, want the one reported", a.GetBucketId())
	}
	tb, ttl := tokenBucket(t, a)
	if ttl < time.Second || ttl > 9*time.Second || tb.GetFillInterval().AsDuration() != time.Second {
		t.Fatalf("first assignment %v ttl %v: want 1..9 s and a 1 s fill interval", tb, ttl)
	}
	exposure := float64(tb.GetMaxTokens()) + float64(tb.GetTokensPerFill().GetValue())*(ttl+500*time.Millisecond).Seconds()
	if got := tn.metric(outstandingSeries); got < exposure {
		t.Fatalf("owner counts %v outstanding, under the assignment's %v", got, exposure)
	}

	// Steady reports at 4/s: after the strategy settles, the same token
	// bucket every second (Envoy keeps its bucket), living at least two
	// report intervals.
	var prev *typev3.TokenBucket
	for i := range 8 {
		tb, ttl := tokenBucket(t, one(t, drive(tn, p, id, 4, time.Second)))
		if i >= 2 && !proto.Equal(tb, prev) {
			t.Fatalf("steady report %d: strategy %v, want %v again", i, tb, prev)
		}
		if i >= 2 && ttl < 2*time.Second {
			t.Fatalf("steady report %d: ttl %v, want at least 2 s", i, ttl)
		}
		prev = tb
	}
	if got := prev.GetTokensPerFill().GetValue(); got != 4 {
		t.Fatalf("steady rate %d per second, want the demand, 4", got)
	}

	// Demand up to 40/s: the rate rises to the limit's, 10/s.
	var up *typev3.TokenBucket
	for range 4 {
		up, _ = tokenBucket(t, one(t, drive(tn, p, id, 40, time.Second)))
	}
	if got := up.GetTokensPerFill().GetValue(); got != 10 {
		t.Fatalf("rate after demand rose: %d per second, want 10 (the limit's)", got)
	}
	// And down to 1/s: a smaller strategy, holding less outstanding.
	var down *typev3.TokenBucket
	for range 6 {
		down, _ = tokenBucket(t, one(t, drive(tn, p, id, 1, time.Second)))
	}
	if got := down.GetTokensPerFill().GetValue(); got > 2 {
		t.Fatalf("rate after demand fell: %d per second, want at most 2", got)
	}
}

// TestRLQSEmptyBucketAndRefusals: an empty bucket is a DENY_ALL for the
// owner's retry-after, with no ask until it passes; an unknown limit and a
// limit without allotments are DENY_ALL for RefusedTTL; a bucket that
// reports no request for AbandonAfter is abandoned.
func TestRLQSEmptyBucketAndRefusals(t *testing.T) {
	tn := startNode(t, func(c *node.Config) { c.LimitsPath = writeLimits(t, rlqsLimits) })
	for range 4 {
		if _, err := tn.grpc.Take(context.Background(), &weirv1.TakeRequest{Checks: []*weirv1.Check{{Limit: "api", Key: "tenant=drained", Cost: 25}}}); err != nil {
			t.Fatal(err)
		}
	}
	p := newSimProxy(t, tn.conn)
	drained := map[string]string{"name": "api", "tenant": "drained"}
	p.bucket(drained)
	if ttl := denyTTL(t, one(t, p.report(tn.clock.Now(), 0, 0))); ttl != time.Second {
		t.Fatalf("empty bucket: DENY_ALL for %v, want 1 s (one token at 10/s, rounded up)", ttl)
	}
	tn.clock.Advance(50 * time.Millisecond)
	if as := p.report(tn.clock.Now(), 0, 0); len(as) != 0 {
		t.Fatalf("report within the retry-after: %v, want no answer", as)
	}
	tn.clock.Advance(time.Second)
	if as := p.report(tn.clock.Now(), time.Second, 0); len(as) != 1 {
		t.Fatalf("report after the retry-after: %v, want an answer", as)
	}

	for _, id := range []map[string]string{{"name": "nope", "k": "v"}, {"name": "plain"}} {
		q := newSimProxy(t, tn.conn)
		q.bucket(id)
		if ttl := denyTTL(t, one(t, q.report(tn.clock.Now(), 0, 0))); ttl != 10*time.Second {
			t.Fatalf("bucket %v: DENY_ALL for %v, want RefusedTTL 10 s", id, ttl)
		}
	}

	idle := map[string]string{"name": "api", "tenant": "idle"}
	q := newSimProxy(t, tn.conn)
	q.bucket(idle).admit(tn.clock.Now())
	tokenBucket(t, one(t, q.report(tn.clock.Now(), 0, 0)))
	for i := 1; ; i++ {
		tn.clock.Advance(time.Second)
		as := q.report(tn.clock.Now(), time.Second, 0)
		if len(as) == 1 && as[0].GetAbandonAction() != nil {
			if i < 60 {
				t.Fatalf("abandoned after %d idle seconds, want 60", i)
			}
			break
		}
		if i > 61 {
			t.Fatalf("idle bucket not abandoned after %d s", i)
		}
	}
}

// TestRLQSBrokenStreamAndRestart: a stream that breaks gives nothing back
// (the proxy may still apply its assignment), so the owner keeps the
// tokens outstanding until the allotment expires; a proxy that reconnects
// to a restarted server reports again and gets a new assignment.
func TestRLQSBrokenStreamAndRestart(t *testing.T) {
	tn := startNode(t, func(c *node.Config) {
		c.LimitsPath = writeLimits(t, rlqsLimits)
		c.RLQS.MaxStreams = 1 // a second stream opens once the first has ended at the server
	})
	p := newSimProxy(t, tn.conn)
	id := map[string]string{"name": "api", "tenant": "acme"}
	p.bucket(id).admit(tn.clock.Now())
	tokenBucket(t, one(t, p.report(tn.clock.Now(), 0, 0)))
	for range 3 {
		tokenBucket(t, one(t, drive(tn, p, id, 20, time.Second)))
	}
	held := tn.metric(outstandingSeries)
	if held <= 0 {
		t.Fatalf("nothing outstanding after three assignments")
	}
	p.cancel() // the stream breaks
	var q *simProxy
	waitFor(t, "the broken stream to end at the server", 10*time.Second, func() bool {
		q = newSimProxy(t, tn.conn)
		// The stream is refused at its first message when another is open.
		_ = q.stream.Send(&rlqsv3.RateLimitQuotaUsageReports{Domain: q.domain, BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{
			usage(map[string]string{"name": "sync-nope"}, 0, 0, 0),
		}})
		_, err := q.stream.Recv()
		if status.Code(err) == codes.ResourceExhausted {
			return false
		}
		if err != nil {
			t.Fatalf("new stream: %v", err)
		}
		return true
	})
	if got := tn.metric(outstandingSeries); got != held {
		t.Fatalf("outstanding %v after the stream broke, want %v still held", got, held)
	}
	tn.clock.Advance(11 * time.Second) // past the allotment TTL
	r, err := tn.grpc.Take(context.Background(), &weirv1.TakeRequest{Checks: []*weirv1.Check{{Limit: "api", Key: "tenant=acme", Cost: 1}}})
	if err != nil || !r.GetAllowed() {
		t.Fatalf("take after expiry: %v, %v", r, err)
	}
	if got := tn.metric(outstandingSeries); got != 0 {
		t.Fatalf("outstanding %v after the allotment expired, want 0", got)
	}

	// A restarted server: a new node; the proxy reconnects with its
	// bucket still assigned, reports again, and gets a new assignment.
	q.bucket(id).admit(tn.clock.Now())
	tokenBucket(t, one(t, q.report(tn.clock.Now(), 0, 0)))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tn.n.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	// The node drained the stream (Envoy never closes it) rather than
	// waiting for it until its shutdown timeout.
	if _, err := q.stream.Recv(); status.Code(err) != codes.Unavailable || !strings.Contains(status.Convert(err).Message(), "shutting down") {
		t.Fatalf("stream at shutdown: %v, want Unavailable, shutting down", err)
	}
	tn2 := startNode(t, func(c *node.Config) { c.LimitsPath = writeLimits(t, rlqsLimits) })
	r2 := newSimProxy(t, tn2.conn)
	r2.buckets = q.buckets // the proxy's buckets survive its reconnection
	a := one(t, r2.report(tn2.clock.Now(), time.Second, 0))
	if tb, _ := tokenBucket(t, a); tb.GetMaxTokens() < 1 {
		t.Fatalf("after the restart: %v", tb)
	}
}
