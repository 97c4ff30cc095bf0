package node_test

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/auth"
	"github.com/weir-rl/weir/node"
)

// TestRLQSTokens: with a tokens file, a stream without a token is
// Unauthenticated; a token with the allot scope gets quota for the keys
// under its prefix and DENY_ALL (RefusedTTL) for the others; a token
// without the allot scope gets DENY_ALL for every bucket.
func TestRLQSTokens(t *testing.T) {
	const (
		tokEnvoy  = "envoy-0123456789abcdef0123456789abcdef"
		tokDecide = "decide-0123456789abcdef0123456789abcdef"
	)
	tokens := `version: 1
tokens:
  - name: envoy
    sha256: ` + auth.HashToken(tokEnvoy) + `
    scopes: [allot]
    key_prefix: "tenant=acme"
  - name: decide
    sha256: ` + auth.HashToken(tokDecide) + `
    scopes: [decide]
`
	tn := startNode(t, func(c *node.Config) {
		c.LimitsPath = writeLimits(t, rlqsLimits)
		c.Security.TokensFile = writeLimits(t, tokens)
	})
	acme := map[string]string{"name": "api", "tenant": "acme"}
	other := map[string]string{"name": "api", "tenant": "other"}

	p := newSimProxyAs(t, tn.conn, "")
	p.bucket(acme)
	_ = p.stream.Send(p.usages()) // the error, if any, is the stream's status, read below
	if _, err := p.stream.Recv(); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("no token: %v, want Unauthenticated", err)
	}

	p = newSimProxyAs(t, tn.conn, tokEnvoy)
	p.bucket(acme)
	p.bucket(other)
	granted := 0
	for _, a := range p.report(tn.clock.Now(), 0, 0) {
		if a.GetBucketId().GetBucket()["tenant"] == "acme" {
			tokenBucket(t, a)
			granted++
			continue
		}
		if ttl := denyTTL(t, a); ttl != 10*time.Second {
			t.Fatalf("bucket outside the token's prefix: DENY_ALL for %v, want 10 s", ttl)
		}
	}
	if granted != 1 {
		t.Fatalf("%d buckets under the prefix got quota, want 1", granted)
	}

	p = newSimProxyAs(t, tn.conn, tokDecide)
	p.bucket(acme)
	denyTTL(t, one(t, p.report(tn.clock.Now(), 0, 0)))
}
