package node_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/api/weirv1"
	"github.com/weir-rl/weir/auth"
	"github.com/weir-rl/weir/node"
)

// The tokens of the auth tests, and the file that admits them.
const (
	tokAcme  = "acme-0123456789abcdef0123456789abcdef"
	tokAdmin = "admin-0123456789abcdef0123456789abcdef"
	tokAll   = "all-0123456789abcdef0123456789abcdef"
	tokRead  = "read-0123456789abcdef0123456789abcdef"
)

func tokensFile() string {
	return `version: 1
tokens:
  - name: acme
    sha256: ` + auth.HashToken(tokAcme) + `
    scopes: [decide]
    key_prefix: "tenant:acme:"
  - name: ops
    sha256: ` + auth.HashToken(tokAdmin) + `
    scopes: [admin]
  - name: all
    sha256: ` + auth.HashToken(tokAll) + `
    scopes: [decide]
  - name: monitoring
    sha256: ` + auth.HashToken(tokRead) + `
    scopes: [read]
`
}

func startAuthNode(t *testing.T, protectMetrics bool) (*testNode, string) {
	t.Helper()
	path := writeLimits(t, tokensFile())
	tn := startNode(t, func(c *node.Config) {
		c.Security.TokensFile = path
		c.Security.ProtectMetrics = protectMetrics
	})
	return tn, path
}

// as sends a request with a bearer token ("" sends none).
func (tn *testNode) as(token, method, path, body string) response {
	tn.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, tn.base+path, rd)
	if err != nil {
		tn.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return tn.send(req)
}

// remaining takes cost 1 on (limit, key) with the unrestricted token and
// returns what is left afterwards.
func (tn *testNode) remaining(limit, key string) int64 {
	tn.t.Helper()
	r := tn.as(tokAll, http.MethodPost, "/v1/take", takeBody(checkJSON{Limit: limit, Key: key, Cost: 1}))
	if r.status != http.StatusOK {
		tn.t.Fatalf("take with the full token: %d %s", r.status, r.body)
	}
	var out takeJSON
	decodeStrict(tn.t, r.body, &out)
	return out.Results[0].Remaining
}

// TestTokenConfinedToPrefixSpendsNothingElsewhere: a token confined to
// tenant:acme: is refused (403) on tenant:evil:x, alone or in a take that
// also names its own key, and neither bucket is spent.
func TestTokenConfinedToPrefixSpendsNothingElsewhere(t *testing.T) {
	tn, _ := startAuthNode(t, false)
	evil := checkJSON{Limit: "export", Key: "tenant:evil:x", Cost: 3}
	own := checkJSON{Limit: "export", Key: "tenant:acme:x", Cost: 3}
	for _, body := range []string{takeBody(evil), takeBody(own, evil)} {
		r := tn.as(tokAcme, http.MethodPost, "/v1/take", body)
		if r.status != http.StatusForbidden || !strings.Contains(r.body, `"forbidden"`) || strings.Contains(r.body, "evil") {
			t.Fatalf("acme token on tenant:evil:x = %d %s, want 403 that does not echo the key", r.status, r.body)
		}
	}
	if r := tn.as(tokAcme, http.MethodGet, "/v1/check?limit=export&key=tenant:evil:x", ""); r.status != http.StatusForbidden {
		t.Fatalf("forward-auth check on another tenant = %d", r.status)
	}
	// Nothing was spent: each bucket has capacity 6 and one take of 1 now.
	if got := tn.remaining("export", "tenant:evil:x"); got != 5 {
		t.Fatalf("tenant:evil:x has %d left after refused takes, want 5 (nothing spent)", got)
	}
	if got := tn.remaining("export", "tenant:acme:x"); got != 5 {
		t.Fatalf("tenant:acme:x has %d left after a refused multi-check take, want 5", got)
	}
	// The token works on its own prefix.
	if r := tn.as(tokAcme, http.MethodPost, "/v1/take", takeBody(own)); r.status != http.StatusOK {
		t.Fatalf("acme token on its own key = %d %s", r.status, r.body)
	}
	if got := tn.metric(`weir_auth_failures_total{reason="key_prefix"}`); got != 3 {
		t.Fatalf("key_prefix failures = %v, want 3", got)
	}
	// A lease on another tenant is refused too, and none is held.
	if r := tn.as(tokAcme, http.MethodPost, "/v1/leases", `{"limit":"export-db","key":"tenant:evil:x"}`); r.status != http.StatusForbidden {
		t.Fatalf("lease on another tenant = %d %s", r.status, r.body)
	}
	if got := tn.metric("weir_leases_held"); got != 0 {
		t.Fatalf("%v leases held after a refused acquire", got)
	}
}

// TestDecideTokenCannotForget: forgetting a member needs the admin scope.
func TestDecideTokenCannotForget(t *testing.T) {
	tn, _ := startAuthNode(t, false)
	if r := tn.as(tokAll, http.MethodDelete, "/v1/cluster/members/n9", ""); r.status != http.StatusForbidden || !strings.Contains(r.body, "admin") {
		t.Fatalf("decide token forgetting = %d %s, want 403 naming the admin scope", r.status, r.body)
	}
	// The admin token reaches the node, which does not know n9.
	if r := tn.as(tokAdmin, http.MethodDelete, "/v1/cluster/members/n9", ""); r.status != http.StatusNotFound {
		t.Fatalf("admin token forgetting an unknown member = %d %s, want 404", r.status, r.body)
	}
	if r := tn.as(tokAdmin, http.MethodPost, "/v1/take", takeBody(checkJSON{Limit: "export", Key: "k", Cost: 1})); r.status != http.StatusForbidden {
		t.Fatalf("admin token taking = %d, want 403 (scopes do not imply one another)", r.status)
	}
	if got := tn.metric(`weir_auth_failures_total{reason="scope"}`); got != 2 {
		t.Fatalf("scope failures = %v, want 2", got)
	}
}

func TestMissingOrBadTokenIs401AndProbesStayOpen(t *testing.T) {
	tn, _ := startAuthNode(t, false)
	body := takeBody(checkJSON{Limit: "export", Key: "tenant:acme:x", Cost: 1})
	for tok, reason := range map[string]string{"": "missing_token", "wrong": "unknown_token"} {
		r := tn.as(tok, http.MethodPost, "/v1/take", body)
		if r.status != http.StatusUnauthorized || r.header.Get("WWW-Authenticate") == "" {
			t.Fatalf("token %q: %d %v, want 401 with WWW-Authenticate", tok, r.status, r.header)
		}
		if got := tn.metric(`weir_auth_failures_total{reason="` + reason + `"}`); got != 1 {
			t.Fatalf("%s failures = %v, want 1", reason, got)
		}
	}
	// A malformed body without a token is 401, not 400: nothing is read.
	if r := tn.as("", http.MethodPost, "/v1/take", "{not json"); r.status != http.StatusUnauthorized {
		t.Fatalf("malformed body without a token = %d, want 401", r.status)
	}
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		if r := tn.as("", http.MethodGet, p, ""); r.status != http.StatusOK {
			t.Fatalf("GET %s without a token = %d, want 200", p, r.status)
		}
	}
	if r := tn.as("", http.MethodGet, "/v1/cluster", ""); r.status != http.StatusUnauthorized {
		t.Fatalf("cluster status without a token = %d", r.status)
	}
	if r := tn.as(tokRead, http.MethodGet, "/v1/cluster", ""); r.status != http.StatusOK {
		t.Fatalf("cluster status with a read token = %d", r.status)
	}
	// The proxy's own credential header wins over the client's Authorization.
	req, _ := http.NewRequest(http.MethodGet, tn.base+"/v1/check?limit=export&key=tenant:acme:y", nil)
	req.Header.Set("Authorization", "Bearer the-client's-own-credential")
	req.Header.Set("X-Weir-Token", tokAcme)
	if r := tn.send(req); r.status != http.StatusOK {
		t.Fatalf("forward-auth with X-Weir-Token = %d %s", r.status, r.body)
	}
}

func TestProtectedMetrics(t *testing.T) {
	tn, _ := startAuthNode(t, true)
	if r := tn.as("", http.MethodGet, "/metrics", ""); r.status != http.StatusUnauthorized {
		t.Fatalf("protected /metrics without a token = %d", r.status)
	}
	if r := tn.as(tokAll, http.MethodGet, "/metrics", ""); r.status != http.StatusForbidden {
		t.Fatalf("protected /metrics with a decide token = %d", r.status)
	}
	if r := tn.as(tokRead, http.MethodGet, "/metrics", ""); r.status != http.StatusOK || !strings.Contains(r.body, "weir_auth_failures_total") {
		t.Fatalf("protected /metrics with a read token = %d", r.status)
	}
}

func TestGRPCTokens(t *testing.T) {
	tn, _ := startAuthNode(t, false)
	with := func(tok string) context.Context {
		ctx := context.Background()
		if tok != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
		}
		return ctx
	}
	req := func(key string) *weirv1.TakeRequest {
		return &weirv1.TakeRequest{Checks: []*weirv1.Check{{Limit: "export", Key: key, Cost: 2}}}
	}
	if _, err := tn.grpc.Take(with(""), req("tenant:acme:g")); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("no token: %v", err)
	}
	if _, err := tn.grpc.Take(with(tokAcme), req("tenant:evil:g")); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("other tenant: %v", err)
	}
	if _, err := tn.grpc.Take(with(tokAcme), req("tenant:acme:g")); err != nil {
		t.Fatalf("own tenant: %v", err)
	}
	// The stream is authenticated once and authorised per message.
	st, err := tn.grpc.TakeStream(with(tokAcme))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"tenant:evil:g", "tenant:acme:g"} {
		if err := st.Send(req(k)); err != nil {
			t.Fatal(err)
		}
		out, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		denied := out.GetError().GetCode() == weirv1.ErrorCode(codes.PermissionDenied)
		if denied != (k == "tenant:evil:g") {
			t.Fatalf("stream take on %s: %v", k, out)
		}
	}
	_ = st.CloseSend()
	anon, err := tn.grpc.TakeStream(with(""))
	if err == nil {
		_, err = anon.Recv()
	}
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("stream without a token: %v", err)
	}
	if got := tn.remaining("export", "tenant:evil:g"); got != 5 {
		t.Fatalf("tenant:evil:g has %d left, want 5 (nothing spent over gRPC)", got)
	}
}

// TestTokensFileReload: a new token works once the file is replaced, and a
// broken file keeps the last valid one.
func TestTokensFileReload(t *testing.T) {
	tn, path := startAuthNode(t, false)
	const fresh = "fresh-0123456789abcdef0123456789abcdef"
	body := takeBody(checkJSON{Limit: "export", Key: "k", Cost: 1})
	if r := tn.as(fresh, http.MethodPost, "/v1/take", body); r.status != http.StatusUnauthorized {
		t.Fatalf("fresh token before the reload = %d", r.status)
	}
	replaceFile(t, path, tokensFile()+"  - name: fresh\n    sha256: "+auth.HashToken(fresh)+"\n    scopes: [decide]\n")
	waitFor(t, "the fresh token to be accepted", 10*time.Second, func() bool {
		return tn.as(fresh, http.MethodPost, "/v1/take", body).status == http.StatusOK
	})
	// The file was unchanged when the watch came up: one reload, not two.
	if n := tn.metric(`weir_tokens_reloads_total{result="success"}`); n != 1 {
		t.Fatalf("%v successful reloads after one replacement, want 1", n)
	}
	replaceFile(t, path, "version: 1\ntokens: [broken\n")
	waitFor(t, "the broken file to be rejected", 10*time.Second, func() bool {
		return tn.metric(`weir_tokens_reloads_total{result="failure"}`) >= 1
	})
	if r := tn.as(fresh, http.MethodPost, "/v1/take", body); r.status != http.StatusOK {
		t.Fatalf("after a broken file the last valid one must stay: %d", r.status)
	}
}

// TestTokensReplacedBeforeStartAreInForce: a tokens file replaced after
// node.New read it but before Start's watch is up is in force once the
// node has started.
func TestTokensReplacedBeforeStartAreInForce(t *testing.T) {
	path := writeLimits(t, tokensFile())
	const fresh = "fresh-0123456789abcdef0123456789abcdef"
	tn := startNodeAfter(t, func(c *node.Config) { c.Security.TokensFile = path }, func() {
		replaceFile(t, path, tokensFile()+"  - name: fresh\n    sha256: "+auth.HashToken(fresh)+"\n    scopes: [decide]\n")
	})
	body := takeBody(checkJSON{Limit: "export", Key: "k", Cost: 1})
	waitFor(t, "the token added before Start to be accepted", 10*time.Second, func() bool {
		return tn.as(fresh, http.MethodPost, "/v1/take", body).status == http.StatusOK
	})
}

// TestOperatorRoutesNeedRead: hot keys and cluster stats name every
// tenant's keys, so behind a tokens file they need the read scope, and
// they stay served (the authorizing wrapper keeps the node an Operator).
func TestOperatorRoutesNeedRead(t *testing.T) {
	tn, _ := startAuthNode(t, false)
	for _, p := range []string{"/v1/cluster/hot?limit=export&n=5", "/v1/cluster/stats"} {
		if r := tn.as("", http.MethodGet, p, ""); r.status != http.StatusUnauthorized {
			t.Errorf("GET %s without a token = %d, want 401", p, r.status)
		}
		if r := tn.as(tokAll, http.MethodGet, p, ""); r.status != http.StatusForbidden {
			t.Errorf("GET %s with a decide token = %d, want 403", p, r.status)
		}
		if r := tn.as(tokRead, http.MethodGet, p, ""); r.status != http.StatusOK {
			t.Errorf("GET %s with a read token = %d %s, want 200", p, r.status, r.body)
		}
	}
}

// TestRingServedToDecideTokens: a cluster-aware client needs the ring to
// route its takes, so GetRing and GET /v1/ring serve a decide token as
// well as a read one; the cluster status beside it stays read only, and a
// token with neither scope is refused.
func TestRingServedToDecideTokens(t *testing.T) {
	tn, _ := startAuthNode(t, false)
	for tok, want := range map[string]int{"": http.StatusUnauthorized, tokAdmin: http.StatusForbidden, tokAcme: http.StatusOK, tokRead: http.StatusOK} {
		if r := tn.as(tok, http.MethodGet, "/v1/ring", ""); r.status != want {
			t.Errorf("GET /v1/ring with %q = %d %s, want %d", tok, r.status, r.body, want)
		}
		ctx := context.Background()
		if tok != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
		}
		_, err := tn.grpc.GetRing(ctx, &weirv1.GetRingRequest{})
		wantCode := map[int]codes.Code{http.StatusUnauthorized: codes.Unauthenticated, http.StatusForbidden: codes.PermissionDenied, http.StatusOK: codes.OK}[want]
		if status.Code(err) != wantCode {
			t.Errorf("GetRing with %q: %v, want %v", tok, err, wantCode)
		}
	}
	if r := tn.as(tokAcme, http.MethodGet, "/v1/cluster", ""); r.status != http.StatusForbidden {
		t.Errorf("GET /v1/cluster with a decide token = %d, want 403", r.status)
	}
}

// TestEnvoyNeedsAToken: Envoy's rate limit service is behind the same
// interceptors: no token is Unauthenticated, the proxy's token in
// x-weir-token metadata (Envoy's initial_metadata) is served.
func TestEnvoyNeedsAToken(t *testing.T) {
	tn, _ := startAuthNode(t, false)
	rls := rlsv3.NewRateLimitServiceClient(tn.conn)
	req := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{{
		Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "generic_key", Value: "export"}, {Key: "tenant", Value: "acme"}},
	}}}
	if _, err := rls.ShouldRateLimit(context.Background(), req); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("Envoy without a token: %v", err)
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-weir-token", tokAll)
	if resp, err := rls.ShouldRateLimit(ctx, req); err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		t.Fatalf("Envoy with the proxy's token: %v, %v", resp, err)
	}
	// The tenant-confined token cannot reach the key "tenant=acme" (not its prefix).
	ctx = metadata.AppendToOutgoingContext(context.Background(), "x-weir-token", tokAcme)
	if _, err := rls.ShouldRateLimit(ctx, req); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("Envoy with a confined token on another key: %v", err)
	}
}
