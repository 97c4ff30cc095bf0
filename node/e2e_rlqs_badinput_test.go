package node_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/node"
)

// TestRLQSBadInput sends reports the server must refuse whole, each on a
// fresh stream after a good one: InvalidArgument with a reason, and
// nothing asked of the owner (what it counts outstanding does not move).
// Buckets over the per-stream bound are a DENY_ALL, untracked, and a
// stream over MaxStreams is ResourceExhausted.
func TestRLQSBadInput(t *testing.T) {
	tn := startNode(t, func(c *node.Config) {
		c.LimitsPath = writeLimits(t, rlqsLimits)
		c.RLQS.MaxBucketsPerStream = 2
		c.RLQS.MaxStreams = 3
	})
	good := func(tenant string) *rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage {
		return usage(map[string]string{"name": "api", "tenant": tenant}, 1, 0, 0)
	}
	many := map[string]string{"name": "api"}
	for i := range 17 {
		many[fmt.Sprint("k", i)] = "v"
	}
	rep := func(domain string, us ...*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage) *rlqsv3.RateLimitQuotaUsageReports {
		return &rlqsv3.RateLimitQuotaUsageReports{Domain: domain, BucketQuotaUsages: us}
	}
	var usages []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage
	for i := range 1001 {
		usages = append(usages, good(fmt.Sprint(i)))
	}
	cases := []struct {
		name  string
		first *rlqsv3.RateLimitQuotaUsageReports // sent before msg, answered
		msg   *rlqsv3.RateLimitQuotaUsageReports
		want  string
	}{
		{name: "no domain", msg: rep("", good("a")), want: "domain is empty"},
		{name: "domain changed", first: rep("edge", usage(map[string]string{"name": "sync-nope"}, 0, 0, 0)), msg: rep("other", good("a")), want: "domain changed"},
		{name: "empty bucket id", msg: rep("edge", good("a"), usage(nil, 1, 0, 0)), want: "bucket_quota_usages[1].bucket_id is empty"},
		{name: "no name", msg: rep("edge", good("a"), usage(map[string]string{"tenant": "a"}, 1, 0, 0)), want: `no "name" entry`},
		{name: "empty entry key", msg: rep("edge", usage(map[string]string{"name": "api", "": "x"}, 1, 0, 0)), want: "empty key"},
		{name: "too many entries", msg: rep("edge", good("a"), usage(many, 1, 0, 0)), want: "18 entries, over the 16 maximum"},
		{name: "key too long", msg: rep("edge", good(strings.Repeat("x", 600))), want: "over the 512-byte maximum"},
		{name: "too many usages", msg: rep("edge", usages...), want: "1001 entries, over the 1000 maximum"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := tn.metric(outstandingSeries)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s, err := rlqsv3.NewRateLimitQuotaServiceClient(tn.conn).StreamRateLimitQuotas(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if c.first != nil {
				if err := s.Send(c.first); err != nil {
					t.Fatal(err)
				}
				if _, err := s.Recv(); err != nil {
					t.Fatalf("first report: %v", err)
				}
			}
			if err := s.Send(c.msg); err != nil {
				t.Fatal(err)
			}
			_, err = s.Recv()
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), c.want) {
				t.Fatalf("got %v, want InvalidArgument containing %q", err, c.want)
			}
			if got := tn.metric(outstandingSeries); got != before {
				t.Fatalf("outstanding moved from %v to %v on a refused report", before, got)
			}
		})
	}

	// Over MaxBucketsPerStream: the third bucket is a DENY_ALL, untracked.
	p := newSimProxy(t, tn.conn)
	for _, tenant := range []string{"a", "b", "c"} {
		p.bucket(map[string]string{"name": "api", "tenant": tenant}).admit(tn.clock.Now())
	}
	as := p.report(tn.clock.Now(), 0, 0)
	if len(as) != 3 {
		t.Fatalf("got %d actions, want 3", len(as))
	}
	denied := 0
	for _, a := range as {
		if a.GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket() == nil {
			denied++
			if ttl := denyTTL(t, a); ttl != 10*time.Second {
				t.Fatalf("bucket over the bound: DENY_ALL for %v, want RefusedTTL", ttl)
			}
		}
	}
	if denied != 1 {
		t.Fatalf("%d buckets denied, want the one over the bound", denied)
	}

	// Over MaxStreams (3): p is open; two more fit, the fourth is refused.
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := rlqsv3.NewRateLimitQuotaServiceClient(tn.conn).StreamRateLimitQuotas(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// A refused stream may end before the report is sent: Send then
		// returns io.EOF and Recv the stream's status.
		if err := s.Send(&rlqsv3.RateLimitQuotaUsageReports{Domain: "edge", BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(map[string]string{"name": "sync-nope"}, 0, 0, 0)}}); err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		_, err = s.Recv()
		switch {
		case i < 2 && err != nil:
			t.Fatalf("stream %d: %v", i+2, err)
		case i == 2 && status.Code(err) != codes.ResourceExhausted:
			t.Fatalf("stream 4: %v, want ResourceExhausted", err)
		}
	}
}
