package node_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/api/weirv1"
	"github.com/weir-rl/weir/auth"
	"github.com/weir-rl/weir/node"
)

// TestReloadReachesOpenConnections: a token narrowed or removed by a
// tokens-file reload (SIGHUP) stops working on the Redis-protocol
// connections and gRPC TakeStreams it authenticated before the reload:
// every command and stream message is authorized by the file in force.
// The connections stay open; what they ask is refused and spends nothing.
func TestReloadReachesOpenConnections(t *testing.T) {
	path := writeLimits(t, tokensFile())
	tn := startNode(t, func(c *node.Config) {
		c.Security.TokensFile = path
		c.RESPAddr = "127.0.0.1:0"
	})
	ctx := context.Background()
	rc := respClient(t, tn.n.RESPAddr(), tokAcme, nil)
	st, err := tn.grpc.TakeStream(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tokAcme))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.CloseSend() }()
	streamTake := func(key string) *weirv1.TakeResponse {
		t.Helper()
		if err := st.Send(&weirv1.TakeRequest{Checks: []*weirv1.Check{{Limit: "export", Key: key, Cost: 1}}}); err != nil {
			t.Fatal(err)
		}
		out, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	respTake := func(key string) error { return rc.Do(ctx, "WEIR.TAKE", "export", key).Err() }
	reload := func(file string) {
		t.Helper()
		replaceFile(t, path, file)
		if err := tn.n.ReloadTokens(); err != nil {
			t.Fatal(err)
		}
	}
	if err := respTake("tenant:acme:a"); err != nil {
		t.Fatalf("RESP before the reload: %v", err)
	}
	if out := streamTake("tenant:acme:a"); out.GetError() != nil {
		t.Fatalf("stream before the reload: %v", out)
	}

	// Narrowed: acme may now spend only under tenant:acme:eu:.
	reload(strings.Replace(tokensFile(), `key_prefix: "tenant:acme:"`, `key_prefix: "tenant:acme:eu:"`, 1))
	if err := respTake("tenant:acme:a"); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
		t.Fatalf("RESP on the old prefix after narrowing: %v, want NOPERM", err)
	}
	if out := streamTake("tenant:acme:a"); out.GetError().GetCode() != weirv1.ErrorCode(codes.PermissionDenied) {
		t.Fatalf("stream on the old prefix after narrowing: %v, want PermissionDenied", out)
	}
	if err := respTake("tenant:acme:eu:a"); err != nil {
		t.Fatalf("RESP on the new prefix: %v", err)
	}

	// Removed: the file keeps the other tokens only.
	reload("version: 1\ntokens:\n  - name: all\n    sha256: " + auth.HashToken(tokAll) + "\n    scopes: [decide]\n")
	if err := respTake("tenant:acme:eu:a"); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
		t.Fatalf("RESP after removal: %v, want NOAUTH", err)
	}
	if out := streamTake("tenant:acme:eu:a"); out.GetError().GetCode() != weirv1.ErrorCode(codes.Unauthenticated) {
		t.Fatalf("stream after removal: %v, want Unauthenticated", out)
	}
	// Spent: one take on tenant:acme:a before narrowing from each front
	// end, one on tenant:acme:eu:a between the reloads, none after.
	if got := tn.remaining("export", "tenant:acme:a"); got != 6-2-1 {
		t.Fatalf("tenant:acme:a has %d left, want 3 (remaining spends one itself)", got)
	}
	if got := tn.remaining("export", "tenant:acme:eu:a"); got != 6-1-1 {
		t.Fatalf("tenant:acme:eu:a has %d left, want 4", got)
	}
}

// TestEnvoyRulesRefusalSpendsNothing: with --envoy-config-dir, a request
// whose second descriptor is outside the caller's key prefix is refused
// whole, and its first descriptor, which the token may use, is not
// charged: three refused calls leave the bucket full.
func TestEnvoyRulesRefusalSpendsNothing(t *testing.T) {
	const tokEdge = "edge-0123456789abcdef0123456789abcdef"
	dir := t.TempDir()
	rules := "domain: edge\ndescriptors:\n  - key: tenant\n    rate_limit: {unit: minute, requests_per_unit: 3}\n"
	if err := os.WriteFile(filepath.Join(dir, "edge.yaml"), []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	path := writeLimits(t, tokensFile()+"  - name: edge\n    sha256: "+auth.HashToken(tokEdge)+"\n    scopes: [decide]\n    key_prefix: \"tenant=acme\"\n")
	tn := startNode(t, func(c *node.Config) {
		c.Security.TokensFile = path
		c.EnvoyConfigDir = dir
	})
	rls := rlsv3.NewRateLimitServiceClient(tn.conn)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-weir-token", tokEdge)
	for range 3 {
		if _, err := rls.ShouldRateLimit(ctx, envoyReq("edge", "tenant=acme", "tenant=evil")); status.Code(err) != codes.PermissionDenied {
			t.Fatalf("a request with another tenant's descriptor: %v, want PermissionDenied", err)
		}
	}
	for i := range 3 {
		resp, err := rls.ShouldRateLimit(ctx, envoyReq("edge", "tenant=acme"))
		if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
			t.Fatalf("own descriptor, call %d of 3 after the refusals: %v, %v; want OK (the refusals spent nothing)", i+1, resp, err)
		}
	}
	if resp, err := rls.ShouldRateLimit(ctx, envoyReq("edge", "tenant=acme")); err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("fourth call: %v, %v; want OVER_LIMIT", resp, err)
	}
}
