package node_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weir-rl/weir/node"
)

// These tests serve envoyproxy/ratelimit's README examples
// (envoyconf/testdata/readme) from a real node's --envoy-config-dir and ask
// through Envoy's own proto; each checks a decision the README describes.
// The node's clock does not move, so windows do not roll over.

// envoyDeadline bounds each ask. Envoy's ratelimit filter waits 20 ms by
// default; these tests check decisions, not latency (a loaded machine
// under -race takes longer), so they give a call far more.
const envoyDeadline = 5 * time.Second

type envoyNode struct {
	*testNode
	dir string
	rls rlsv3.RateLimitServiceClient
}

// startEnvoyNode copies the README examples into a fresh directory and
// starts a node serving them.
func startEnvoyNode(t *testing.T) *envoyNode {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join("..", "envoyconf", "testdata", "readme")
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tn := startNode(t, func(c *node.Config) { c.EnvoyConfigDir = dir })
	en := &envoyNode{testNode: tn, dir: dir, rls: rlsv3.NewRateLimitServiceClient(tn.conn)}
	// Dial once without Envoy's deadline: the connection is Envoy's to keep.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := en.rls.ShouldRateLimit(ctx, envoyReq("warmup", "k=v")); err != nil {
		t.Fatalf("warm-up: %v", err)
	}
	return en
}

// envoyReq builds a request of descriptors, each "k=v,k2=v2".
func envoyReq(domain string, descs ...string) *rlsv3.RateLimitRequest {
	req := &rlsv3.RateLimitRequest{Domain: domain}
	for _, d := range descs {
		var es []*rlcommon.RateLimitDescriptor_Entry
		for _, kv := range strings.Split(d, ",") {
			k, v, _ := strings.Cut(kv, "=")
			es = append(es, &rlcommon.RateLimitDescriptor_Entry{Key: k, Value: v})
		}
		req.Descriptors = append(req.Descriptors, &rlcommon.RateLimitDescriptor{Entries: es})
	}
	return req
}

// ask sends req with Envoy's deadline.
func (en *envoyNode) ask(req *rlsv3.RateLimitRequest) *rlsv3.RateLimitResponse {
	en.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), envoyDeadline)
	defer cancel()
	resp, err := en.rls.ShouldRateLimit(ctx, req)
	if err != nil {
		en.t.Fatalf("ShouldRateLimit(%v): %v", req, err)
	}
	return resp
}

// codeLine returns the overall code and each status's code, as "OK" / "OVER".
func codeLine(resp *rlsv3.RateLimitResponse) string {
	name := func(c rlsv3.RateLimitResponse_Code) string {
		if c == rlsv3.RateLimitResponse_OVER_LIMIT {
			return "OVER"
		}
		return c.String()
	}
	parts := []string{name(resp.GetOverallCode())}
	for _, s := range resp.GetStatuses() {
		parts = append(parts, name(s.GetCode()))
	}
	return strings.Join(parts, " ")
}

func (en *envoyNode) expect(req *rlsv3.RateLimitRequest, n int, want string) *rlsv3.RateLimitResponse {
	en.t.Helper()
	var resp *rlsv3.RateLimitResponse
	for i := range n {
		resp = en.ask(req)
		if got := codeLine(resp); got != want {
			en.t.Fatalf("%s request %d of %d: %s, want %s", req.GetDomain(), i+1, n, got, want)
		}
	}
	return resp
}

// Example 2: ("message_type","marketing"),("to_number",N) gets 5 a day per
// number, ("to_number",N) 100; a request with both descriptors is limited
// by both, each counted on its own, and the answer is their OR.
func TestEnvoyConfigExample2NestedAndPerValue(t *testing.T) {
	en := startEnvoyNode(t)
	both := envoyReq("messaging", "message_type=marketing,to_number=2061111111", "to_number=2061111111")
	resp := en.expect(both, 5, "OK OK OK")
	st := resp.GetStatuses()
	if st[0].GetLimitRemaining() != 0 || st[1].GetLimitRemaining() != 95 {
		t.Fatalf("remaining %d and %d, want 0 and 95", st[0].GetLimitRemaining(), st[1].GetLimitRemaining())
	}
	cl := st[0].GetCurrentLimit()
	if cl.GetRequestsPerUnit() != 5 || cl.GetUnit() != rlsv3.RateLimitResponse_RateLimit_DAY {
		t.Fatalf("current limit %v, want 5 per DAY", cl)
	}
	// The fake clock is 03:04:05 UTC: the day's period ends in 20h55m55s.
	if got, want := st[0].GetDurationUntilReset().AsDuration(), 20*time.Hour+55*time.Minute+55*time.Second; got != want {
		t.Fatalf("duration until reset %v, want %v", got, want)
	}
	resp = en.expect(both, 1, "OVER OVER OK")
	if got := resp.GetStatuses()[1].GetLimitRemaining(); got != 94 {
		t.Fatalf("the per-number limit was not counted beside the denied one: remaining %d, want 94", got)
	}
	if h := headerMap(resp); h["Retry-After"] == "" || !strings.HasPrefix(h["RateLimit"], `"envoy:messaging.message_type_marketing.to_number";r=0;`) {
		t.Fatalf("headers %v", h)
	}
	// Another number has buckets of its own.
	en.expect(envoyReq("messaging", "message_type=marketing,to_number=2062222222"), 5, "OK OK")
	// A descriptor that stops at the placeholder matches nothing: OK, no limit.
	resp = en.expect(envoyReq("messaging", "message_type=marketing"), 1, "OK OK")
	if resp.GetStatuses()[0].GetCurrentLimit() != nil || len(resp.GetResponseHeadersToAdd()) != 0 {
		t.Fatalf("placeholder answer %v", resp)
	}
}

// Example 1: two values of one key, 500 a second each; any other value has
// no rule. Example 8: a key without value (detailed_metric changes only
// metrics) gives each value its own 10 a minute; value1 has its own 20.
func TestEnvoyConfigExamples1And8(t *testing.T) {
	en := startEnvoyNode(t)
	resp := en.expect(envoyReq("mongo_cps", "database=users", "database=default", "database=other"), 1, "OK OK OK OK")
	st := resp.GetStatuses()
	if st[0].GetLimitRemaining() != 499 || st[1].GetLimitRemaining() != 499 || st[2].GetCurrentLimit() != nil {
		t.Fatalf("example 1 statuses %v", st)
	}
	if cl := st[0].GetCurrentLimit(); cl.GetUnit() != rlsv3.RateLimitResponse_RateLimit_SECOND || cl.GetRequestsPerUnit() != 500 {
		t.Fatalf("example 1 limit %v", cl)
	}
	en.expect(envoyReq("example8", "key1=unspecified_value"), 10, "OK OK")
	en.expect(envoyReq("example8", "key1=unspecified_value"), 1, "OVER OVER")
	en.expect(envoyReq("example8", "key1=unspecified_value2"), 10, "OK OK")
	resp = en.expect(envoyReq("example8", "key1=value1"), 1, "OK OK")
	if got := resp.GetStatuses()[0].GetLimitRemaining(); got != 19 {
		t.Fatalf("example 8 value1 remaining %d, want 19", got)
	}
}

// Example 3: key/value is matched before key alone, and 0 requests per
// unit blocks an address outright.
func TestEnvoyConfigExample3MostSpecific(t *testing.T) {
	en := startEnvoyNode(t)
	en.expect(envoyReq("edge_proxy_per_ip", "remote_address=50.0.0.1"), 10, "OK OK")
	en.expect(envoyReq("edge_proxy_per_ip", "remote_address=50.0.0.1"), 1, "OVER OVER")
	en.expect(envoyReq("edge_proxy_per_ip", "remote_address=50.0.0.2"), 1, "OK OK")
	resp := en.expect(envoyReq("edge_proxy_per_ip", "remote_address=50.0.0.5"), 1, "OVER OVER")
	if got := resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit(); got != 0 {
		t.Fatalf("blocked address's limit %d, want 0", got)
	}
}

// Example 4: the request's depth must be the configuration's.
func TestEnvoyConfigExample4Depth(t *testing.T) {
	en := startEnvoyNode(t)
	en.expect(envoyReq("example4", "key=value"), 1, "OK OK")
	resp := en.expect(envoyReq("example4", "key=value,subkey=subvalue"), 1, "OK OK")
	if resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit() != 300 {
		t.Fatalf("the two-level descriptor did not match: %v", resp)
	}
	if en.ask(envoyReq("example4", "key=value")).GetStatuses()[0].GetCurrentLimit() != nil {
		t.Fatal("a one-level descriptor matched a two-level rule")
	}
}

// Example 5: unlimited is OK with limit_remaining MaxUint32 and counts
// nothing; azure is 100 a minute.
func TestEnvoyConfigExample5Unlimited(t *testing.T) {
	en := startEnvoyNode(t)
	resp := en.expect(envoyReq("internal", "ldap=x"), 3, "OK OK")
	if got := resp.GetStatuses()[0].GetLimitRemaining(); got != math.MaxUint32 {
		t.Fatalf("unlimited remaining %d", got)
	}
	resp = en.expect(envoyReq("internal", "azure=x"), 1, "OK OK")
	if got := resp.GetStatuses()[0].GetLimitRemaining(); got != 99 {
		t.Fatalf("azure remaining %d, want 99", got)
	}
}

// Example 6: user-a is in shadow mode (never limited), user-b is limited
// to 20 a second.
func TestEnvoyConfigExample6Shadow(t *testing.T) {
	en := startEnvoyNode(t)
	en.expect(envoyReq("example6", "service=auth-service,user=user-a"), 15, "OK OK")
	en.expect(envoyReq("example6", "service=auth-service,user=user-b"), 20, "OK OK")
	en.expect(envoyReq("example6", "service=auth-service,user=user-b"), 1, "OVER OVER")
	if got := en.metric(`weir_decisions_total{limit="envoy:example6.service.user_user-a",outcome="shadow_denied",source="owner"}`); got != 5 {
		t.Fatalf("shadow denials counted %v, want 5", got)
	}
}

// Example 7: with both descriptors, specific_limit is replaced and left
// untouched; the 10 a second rule applies.
func TestEnvoyConfigExample7Replaces(t *testing.T) {
	en := startEnvoyNode(t)
	both := envoyReq("example7", "key_1=value_1,user=bkthomps", "key_2=value_2,user=bkthomps")
	resp := en.expect(both, 10, "OK OK OK")
	if resp.GetStatuses()[0].GetCurrentLimit() != nil || resp.GetStatuses()[1].GetLimitRemaining() != 0 {
		t.Fatalf("replaced answer %v", resp)
	}
	en.expect(both, 1, "OVER OK OVER")
	// The replaced 5 a second limit was not spent.
	resp = en.expect(envoyReq("example7", "key_1=value_1,user=bkthomps"), 1, "OK OK")
	if got := resp.GetStatuses()[0].GetLimitRemaining(); got != 4 {
		t.Fatalf("specific_limit remaining %d, want 4", got)
	}
}

// Example 9 and 11: wildcards, and share_threshold's one bucket for all
// matching values.
func TestEnvoyConfigWildcardsAndShareThreshold(t *testing.T) {
	en := startEnvoyNode(t)
	en.expect(envoyReq("example9", "path=/api/123/action"), 20, "OK OK")
	en.expect(envoyReq("example9", "path=/api/123/action"), 1, "OVER OVER")
	en.expect(envoyReq("example9", "path=/api/456/action"), 1, "OK OK") // its own bucket
	if en.ask(envoyReq("example9", "path=/api/123/other")).GetStatuses()[0].GetCurrentLimit() != nil {
		t.Fatal("/api/123/other matched /api/*/action")
	}
	en.expect(envoyReq("example11", "files=files/a.pdf"), 5, "OK OK")
	en.expect(envoyReq("example11", "files=files/b.csv"), 5, "OK OK")
	en.expect(envoyReq("example11", "files=files/c.txt"), 1, "OVER OVER")
	en.expect(envoyReq("example11", "files_no_share=files_no_share/a.pdf"), 10, "OK OK")
	en.expect(envoyReq("example11", "files_no_share=files_no_share/b.csv"), 1, "OK OK")
}

// hits_addend: the request's, a descriptor's own (which wins), and 0, which
// asks without counting.
func TestEnvoyConfigHitsAddend(t *testing.T) {
	en := startEnvoyNode(t)
	req := envoyReq("internal", "azure=x")
	req.HitsAddend = 40
	resp := en.expect(req, 2, "OK OK")
	if got := resp.GetStatuses()[0].GetLimitRemaining(); got != 20 {
		t.Fatalf("remaining %d, want 20", got)
	}
	req.Descriptors[0].HitsAddend = wrapperspb.UInt64(0)
	en.expect(req, 1, "OK OK")
	req.Descriptors[0].HitsAddend = wrapperspb.UInt64(21)
	en.expect(req, 1, "OVER OVER")
	req.Descriptors[0].HitsAddend = wrapperspb.UInt64(101) // over the limit itself
	en.expect(req, 1, "OVER OVER")
	req.Descriptors[0].HitsAddend = wrapperspb.UInt64(20)
	en.expect(req, 1, "OK OK")
}

// The directory is watched: a new file is served, a broken one is refused
// and the rules in force stay.
func TestEnvoyConfigReload(t *testing.T) {
	en := startEnvoyNode(t)
	if en.ask(envoyReq("new", "tenant=acme")).GetStatuses()[0].GetCurrentLimit() != nil {
		t.Fatal("an unknown domain matched")
	}
	replaceFile(t, filepath.Join(en.dir, "new.yaml"), `
domain: new
descriptors:
  - key: tenant
    rate_limit:
      unit: minute
      requests_per_unit: 2
      weir: {algorithm: token_bucket}
`)
	waitFor(t, "the new file to be served", 5*time.Second, func() bool {
		return en.ask(envoyReq("new", "tenant=acme")).GetStatuses()[0].GetCurrentLimit() != nil
	})
	// The ask that saw the rule spent the first of its 2 tokens.
	en.expect(envoyReq("new", "tenant=acme"), 1, "OK OK")
	en.expect(envoyReq("new", "tenant=acme"), 1, "OVER OVER")
	replaceFile(t, filepath.Join(en.dir, "new.yaml"), "domain: new\ndescriptors:\n  - key: tenant\n    rate_limit: {unit: fortnight}\n")
	waitFor(t, "the broken file to be refused", 5*time.Second, func() bool {
		return en.metric("weir_envoy_config_reload_failures_total") == 1
	})
	en.expect(envoyReq("new", "tenant=acme"), 1, "OVER OVER")
	if _, err := node.New(func() node.Config {
		c := node.LocalConfig()
		c.EnvoyConfigDir = en.dir
		return c
	}(), node.Deps{}); err == nil || !strings.Contains(err.Error(), "new.yaml: line 4: invalid rate limit unit 'fortnight'") {
		t.Fatalf("a node started on the broken directory: %v", err)
	}
}

func headerMap(resp *rlsv3.RateLimitResponse) map[string]string {
	h := map[string]string{}
	for _, hv := range resp.GetResponseHeadersToAdd() {
		h[hv.GetKey()] = hv.GetValue()
	}
	return h
}
