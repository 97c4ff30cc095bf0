package node_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"
)

// This file is a simulated Envoy rate_limit_quota filter for the RLQS
// tests: it keeps each bucket's assignment as Envoy's filter does
// (source/extensions/filters/http/rate_limit_quota/global_client_impl.cc)
// and decides requests from it, on the test's fake clock.
//
//   - A token bucket assignment whose strategy equals the one in force
//     (max_tokens, tokens_per_fill and fill_interval's nanos, as Envoy
//     compares them) keeps the bucket and restarts the time to live;
//     any other starts a new bucket, full.
//   - Times to live and fill intervals count whole seconds only.
//   - No assignment, an expired one and DENY_ALL deny: the configuration
//     the README recommends (no_assignment_behavior and
//     expired_assignment_behavior DENY_ALL).

// rlqsLimits has two allotted limits for the RLQS tests and one without
// allotments.
const rlqsLimits = `version: 1
limits:
  - name: api
    algorithm: token_bucket
    capacity: 100
    rate: 10/s
    allotments: auto
    allotment_ttl: 10s
  - name: hot
    algorithm: token_bucket
    capacity: 1000
    rate: 100/s
    allotments: auto
    allotment_ttl: 10s
  - name: plain
    algorithm: token_bucket
    capacity: 10
    rate: 1/s
`

// simBucket is one bucket in the simulated proxy.
type simBucket struct {
	id      map[string]string
	kind    string // "" none, "tb", "deny"
	tb      *typev3.TokenBucket
	tokens  float64
	rate    float64
	last    time.Time
	expires time.Time
	// Since the last report.
	allowed, denied uint64
}

// admit decides one request at now.
func (b *simBucket) admit(now time.Time) bool {
	if b.kind != "tb" || !now.Before(b.expires) {
		b.denied++
		return false
	}
	b.tokens = min(float64(b.tb.GetMaxTokens()), b.tokens+b.rate*now.Sub(b.last).Seconds())
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		b.allowed++
		return true
	}
	b.denied++
	return false
}

// apply takes in an action received at now.
func (b *simBucket) apply(now time.Time, a *rlqsv3.RateLimitQuotaResponse_BucketAction) {
	if a.GetAbandonAction() != nil {
		*b = simBucket{id: b.id}
		return
	}
	q := a.GetQuotaAssignmentAction()
	ttl := time.Duration(q.GetAssignmentTimeToLive().GetSeconds()) * time.Second
	s := q.GetRateLimitStrategy()
	if s.GetBlanketRule() == typev3.RateLimitStrategy_DENY_ALL && s.GetTokenBucket() == nil {
		b.kind, b.tb, b.expires = "deny", nil, now.Add(ttl)
		return
	}
	tb := s.GetTokenBucket()
	same := b.kind == "tb" && now.Before(b.expires) && b.tb.GetMaxTokens() == tb.GetMaxTokens() &&
		b.tb.GetTokensPerFill().GetValue() == tb.GetTokensPerFill().GetValue() &&
		b.tb.GetFillInterval().GetNanos() == tb.GetFillInterval().GetNanos()
	if !same {
		b.tokens, b.last = float64(tb.GetMaxTokens()), now
		b.rate = float64(tb.GetTokensPerFill().GetValue()) / float64(tb.GetFillInterval().GetSeconds())
	}
	b.kind, b.tb, b.expires = "tb", tb, now.Add(ttl)
}

// pendingAction is an answer on its way to the proxy.
type pendingAction struct {
	at time.Time
	a  *rlqsv3.RateLimitQuotaResponse_BucketAction
}

// simProxy is one Envoy with one RLQS stream.
type simProxy struct {
	t       *testing.T
	stream  grpc.BidiStreamingClient[rlqsv3.RateLimitQuotaUsageReports, rlqsv3.RateLimitQuotaResponse]
	cancel  context.CancelFunc
	domain  string
	buckets map[string]*simBucket
	pending []pendingAction
	syncN   int
}

// newSimProxy opens a stream to the node behind conn.
func newSimProxy(t *testing.T, conn grpc.ClientConnInterface) *simProxy {
	t.Helper()
	return newSimProxyAs(t, conn, "")
}

// newSimProxyAs opens a stream with a bearer token ("" sends none), as
// Envoy's grpc_service initial_metadata does.
func newSimProxyAs(t *testing.T, conn grpc.ClientConnInterface, token string) *simProxy {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	stream, err := rlqsv3.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		cancel()
		t.Fatalf("StreamRateLimitQuotas: %v", err)
	}
	t.Cleanup(cancel)
	return &simProxy{t: t, stream: stream, cancel: cancel, domain: "edge", buckets: map[string]*simBucket{}}
}

// bucketName is a bucket id as a map key.
func bucketName(id map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(id)) {
		fmt.Fprintf(&b, "%q=%q;", k, id[k])
	}
	return b.String()
}

// bucket returns the proxy's bucket for id, created on first use.
func (p *simProxy) bucket(id map[string]string) *simBucket {
	n := bucketName(id)
	b := p.buckets[n]
	if b == nil {
		b = &simBucket{id: id}
		p.buckets[n] = b
	}
	return b
}

// deliver applies the answers that have arrived by now.
func (p *simProxy) deliver(now time.Time) {
	kept := p.pending[:0]
	for _, pa := range p.pending {
		if pa.at.After(now) {
			kept = append(kept, pa)
			continue
		}
		if b := p.buckets[bucketName(pa.a.GetBucketId().GetBucket())]; b != nil {
			b.apply(pa.at, pa.a)
		}
	}
	p.pending = kept
}

// report sends every bucket's usage since the last report (elapsed is its
// time_elapsed) with a sync bucket the server always answers (its limit
// does not exist), and returns the answers for the proxy's own buckets;
// they reach the proxy after delay (deliver).
func (p *simProxy) report(now time.Time, elapsed, delay time.Duration) []*rlqsv3.RateLimitQuotaResponse_BucketAction {
	p.t.Helper()
	msg := p.usagesOver(elapsed)
	p.syncN++
	msg.BucketQuotaUsages = append(msg.BucketQuotaUsages, usage(map[string]string{"name": "sync-nope", "n": fmt.Sprint(p.syncN)}, 0, 0, 0))
	if err := p.stream.Send(msg); err != nil {
		p.t.Fatalf("report: %v", err)
	}
	resp, err := p.stream.Recv()
	if err != nil {
		p.t.Fatalf("answer: %v", err)
	}
	var out []*rlqsv3.RateLimitQuotaResponse_BucketAction
	for _, a := range resp.GetBucketAction() {
		if a.GetBucketId().GetBucket()["name"] == "sync-nope" {
			continue
		}
		out = append(out, a)
		p.pending = append(p.pending, pendingAction{at: now.Add(delay), a: a})
	}
	return out
}

// usages is a report of every bucket's usage since the last one, which it
// resets.
func (p *simProxy) usages() *rlqsv3.RateLimitQuotaUsageReports { return p.usagesOver(0) }

// usagesOver is usages with time_elapsed elapsed.
func (p *simProxy) usagesOver(elapsed time.Duration) *rlqsv3.RateLimitQuotaUsageReports {
	msg := &rlqsv3.RateLimitQuotaUsageReports{Domain: p.domain}
	for _, n := range slices.Sorted(maps.Keys(p.buckets)) {
		b := p.buckets[n]
		msg.BucketQuotaUsages = append(msg.BucketQuotaUsages, usage(b.id, b.allowed, b.denied, elapsed))
		b.allowed, b.denied = 0, 0
	}
	return msg
}

// usage is one bucket's usage report.
func usage(id map[string]string, allowed, denied uint64, elapsed time.Duration) *rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage {
	return &rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{
		BucketId:           &rlqsv3.BucketId{Bucket: id},
		TimeElapsed:        durationpb.New(elapsed.Truncate(time.Second)),
		NumRequestsAllowed: allowed,
		NumRequestsDenied:  denied,
	}
}
