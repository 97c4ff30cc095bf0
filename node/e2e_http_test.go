package node_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weir-rl/weir/node"
)

// The embedded default limits file (version 3) has export: token bucket,
// capacity 6, 2/s; login: GCRA 10/m, burst 5; export-db: 8 permits.

func TestHTTPTakeAllowExactBody(t *testing.T) {
	tn := startNode(t, nil)
	r := tn.post("/v1/take", `{"checks":[{"limit":"export","key":"tenant:acme","cost":1}],"headers":true}`)
	if r.status != http.StatusOK {
		t.Fatalf("status = %d %s, want 200", r.status, r.body)
	}
	// One token spent of 6 at 2/s: full again in 500 ms.
	jsonEqual(t, r.body, `{"allowed":true,"retry_after_ms":0,"rules_version":3,
		"results":[{"limit":"export","allowed":true,"remaining":5,"capacity":6,
		            "retry_after_ms":0,"reset_after_ms":500,"source":"owner"}]}`)
	if got := r.header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type = %q", got)
	}
	if got := r.header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("Cache-Control = %q", got)
	}
	if got := r.header.Get("RateLimit-Policy"); got != `"export";q=6;w=3` {
		t.Errorf("RateLimit-Policy = %q", got)
	}
	if got := r.header.Get("RateLimit"); got != `"export";r=5;t=1` {
		t.Errorf("RateLimit = %q", got)
	}
}

func TestHTTPTakeDeniedAfterCapacity(t *testing.T) {
	tn := startNode(t, nil)
	c := checkJSON{Limit: "export", Key: "tenant:acme", Cost: 1}
	for i := range 6 {
		got := tn.take(c)
		if !got.Allowed || got.Results[0].Remaining != int64(5-i) {
			t.Fatalf("take %d = %+v, want allowed with remaining %d", i+1, got, 5-i)
		}
	}
	r := tn.post("/v1/take", takeBody(c))
	if r.status != http.StatusOK {
		t.Fatalf("a denial is still 200 on /v1/take; got %d", r.status)
	}
	jsonEqual(t, r.body, `{"allowed":false,"retry_after_ms":500,"rules_version":3,
		"results":[{"limit":"export","allowed":false,"remaining":0,"capacity":6,
		            "retry_after_ms":500,"reset_after_ms":3000,"source":"owner"}]}`)
	if got := r.header.Get("Retry-After"); got != "" {
		t.Errorf("a /v1/take denial carries Retry-After %q; only a 429 does", got)
	}
	// The answer is in the body; the fields only when the take asks, and a
	// denied take spends nothing, so asking again reads the same state.
	wantHeaders(t, r.header, map[string]string{"RateLimit": "", "RateLimit-Policy": "", "Cache-Control": "no-store"})
	r = tn.post("/v1/take", `{"checks":[{"limit":"export","key":"tenant:acme","cost":1}],"headers":true}`)
	if got := r.header.Get("RateLimit"); r.status != http.StatusOK || got != `"export";r=0;t=1` {
		t.Errorf("asked for the fields: %d, RateLimit = %q", r.status, got)
	}

	// The clock, not the wall, refills: 500 ms later exactly one token is back.
	tn.clock.Advance(500 * time.Millisecond)
	if got := tn.take(c); !got.Allowed || got.Results[0].Remaining != 0 {
		t.Fatalf("after 500ms: %+v, want allowed with remaining 0", got)
	}
	if got := tn.take(c); got.Allowed || got.RetryAfterMs != 500 {
		t.Fatalf("second take after 500ms: %+v, want denied with retry 500", got)
	}
}

func TestHTTPTakeMultiCheckAllOrNothing(t *testing.T) {
	tn := startNode(t, nil)
	// Drain login for "u" (burst 5).
	for range 5 {
		if got := tn.take(checkJSON{"login", "u", 1}); !got.Allowed {
			t.Fatalf("draining login: %+v", got)
		}
	}
	// The first check would pass alone; the last is denied: nothing is spent.
	got := tn.take(checkJSON{"export", "u", 3}, checkJSON{"login", "u", 1})
	if got.Allowed {
		t.Fatalf("multi-check with a denied last check was allowed: %+v", got)
	}
	if len(got.Results) != 2 || got.Results[0].Limit != "export" || got.Results[1].Limit != "login" {
		t.Fatalf("results not one per check in request order: %+v", got.Results)
	}
	if got.Results[1].Allowed {
		t.Fatalf("login result = %+v, want denied", got.Results[1])
	}
	// export:u must still be full: a cost-1 take leaves 5, not 2.
	after := tn.take(checkJSON{"export", "u", 1})
	if !after.Allowed || after.Results[0].Remaining != 5 {
		t.Fatalf("export after the denied multi-check = %+v, want remaining 5 (nothing spent)", after.Results[0])
	}
}

func TestHTTPTakeRetryAfterIsMaxOverDenied(t *testing.T) {
	tn := startNode(t, nil)
	for range 6 {
		tn.take(checkJSON{"export", "v", 1})
	}
	for range 5 {
		tn.take(checkJSON{"login", "v", 1})
	}
	// export frees a token in 500 ms; login (10/m) in 6 s.
	got := tn.take(checkJSON{"export", "v", 1}, checkJSON{"login", "v", 1})
	if got.Allowed {
		t.Fatalf("allowed: %+v", got)
	}
	if got.Results[0].RetryAfterMs != 500 || got.Results[1].RetryAfterMs != 6000 {
		t.Fatalf("per-check retry = %d, %d; want 500, 6000", got.Results[0].RetryAfterMs, got.Results[1].RetryAfterMs)
	}
	if got.RetryAfterMs != 6000 {
		t.Fatalf("retry_after_ms = %d, want 6000 (the max over denied checks)", got.RetryAfterMs)
	}
	// Order must not matter.
	got = tn.take(checkJSON{"login", "v", 1}, checkJSON{"export", "v", 1})
	if got.RetryAfterMs != 6000 {
		t.Fatalf("reversed: retry_after_ms = %d, want 6000", got.RetryAfterMs)
	}
}

func TestHTTPCheckForwardAuth(t *testing.T) {
	tn := startNode(t, withLegacyHeaders)
	const key = "tenant:secret-key-7f3a"
	path := "/v1/check?limit=export&key=" + key + "&cost=1"

	r := tn.do(http.MethodGet, path, "")
	if r.status != http.StatusOK {
		t.Fatalf("first check = %d %s, want 200", r.status, r.body)
	}
	wantHeaders(t, r.header, map[string]string{
		"RateLimit-Policy":      `"export";q=6;w=3`,
		"RateLimit":             `"export";r=5;t=1`,
		"X-RateLimit-Limit":     "6",
		"X-RateLimit-Remaining": "5",
		"X-RateLimit-Reset":     "1",
		"Cache-Control":         "no-store",
		"Retry-After":           "",
	})
	jsonEqual(t, r.body, `{"limit":"export","allowed":true,"remaining":5,"capacity":6,
		"retry_after_ms":0,"reset_after_ms":500,"source":"owner"}`)

	for range 5 {
		if r := tn.do(http.MethodGet, path, ""); r.status != http.StatusOK {
			t.Fatalf("check = %d, want 200", r.status)
		}
	}
	r = tn.do(http.MethodGet, path, "")
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("seventh check = %d %s, want 429", r.status, r.body)
	}
	wantHeaders(t, r.header, map[string]string{
		"Retry-After":           "1",
		"Cache-Control":         "no-store",
		"Content-Type":          "application/json",
		"RateLimit-Policy":      `"export";q=6;w=3`,
		"RateLimit":             `"export";r=0;t=1`,
		"X-RateLimit-Limit":     "6",
		"X-RateLimit-Remaining": "0",
		"X-RateLimit-Reset":     "1",
	})
	jsonEqual(t, r.body, `{"error":"rate_limit_exceeded","limit":"export","retry_after_ms":500}`)
	if strings.Contains(r.body, key) {
		t.Fatalf("429 body echoes the key: %s", r.body)
	}
	for name, vals := range r.header {
		for _, v := range vals {
			if strings.Contains(v, key) {
				t.Fatalf("header %s echoes the key: %q", name, v)
			}
		}
	}

	// Retry-After rounds up: a cost of 3 on an empty bucket needs 1.5 s.
	r = tn.do(http.MethodGet, "/v1/check?limit=export&key="+key+"&cost=3", "")
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("cost 3 on empty = %d, want 429", r.status)
	}
	wantHeaders(t, r.header, map[string]string{
		"Retry-After":       "2",
		"RateLimit":         `"export";r=0;t=2`,
		"X-RateLimit-Reset": "2",
	})
	jsonEqual(t, r.body, `{"error":"rate_limit_exceeded","limit":"export","retry_after_ms":1500}`)

	// Bad input on /v1/check is a 400, not a decision.
	r = tn.do(http.MethodGet, "/v1/check?limit=export&key=k&cost=0", "")
	if r.status != http.StatusBadRequest || !strings.Contains(r.body, `"error":"invalid_request"`) {
		t.Fatalf("cost=0 = %d %s, want 400 invalid_request", r.status, r.body)
	}
}

// withLegacyHeaders turns the legacy X-RateLimit trio on.
func withLegacyHeaders(c *node.Config) { c.HTTP.LegacyHeaders = true }

// A node as configured by default sends no legacy trio.
func TestHTTPLegacyHeadersOffByDefault(t *testing.T) {
	tn := startNode(t, nil)
	r := tn.do(http.MethodGet, "/v1/check?limit=export&key=k", "")
	if r.status != http.StatusOK {
		t.Fatalf("status %d", r.status)
	}
	wantHeaders(t, r.header, map[string]string{
		"RateLimit":         `"export";r=5;t=1`,
		"X-RateLimit-Limit": "",
	})
}

// wantHeaders checks exact header values; "" means absent.
func wantHeaders(t *testing.T, h http.Header, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
}

// TestHTTPTakeEvidence checks the evidence a take carries when asked: the
// deciding node, its clock, and one instance while only takes touch the
// bucket. (Without "evidence": true the body is exactly docs/architecture.md §5.1's, which
// TestHTTPTakeAllowExactBody checks.)
func TestHTTPTakeEvidence(t *testing.T) {
	tn := startNode(t, nil)
	type reply struct {
		Results []struct {
			Evidence *struct {
				Decider     string `json:"decider"`
				DecidedAtNs int64  `json:"decided_at_ns"`
				Instance    string `json:"instance"`
			} `json:"evidence"`
		} `json:"results"`
	}
	var evs []reply
	for range 2 {
		r := tn.post("/v1/take", `{"checks":[{"limit":"export","key":"tenant:ev","cost":1}],"evidence":true}`)
		var rep reply
		if err := json.Unmarshal([]byte(r.body), &rep); err != nil || len(rep.Results) != 1 || rep.Results[0].Evidence == nil {
			t.Fatalf("take %d: %s (%v): want one result with evidence", len(evs), r.body, err)
		}
		evs = append(evs, rep)
	}
	a, b := evs[0].Results[0].Evidence, evs[1].Results[0].Evidence
	if a.Decider == "" || !strings.HasPrefix(a.Instance, a.Decider+"/") {
		t.Errorf("evidence %+v: want a decider and an instance that starts with it", *a)
	}
	if b.Instance != a.Instance || b.Decider != a.Decider {
		t.Errorf("two takes: %+v then %+v, want one instance", *a, *b)
	}
	if a.DecidedAtNs <= 0 || b.DecidedAtNs < a.DecidedAtNs {
		t.Errorf("decided at %d then %d: want a positive, non-decreasing clock", a.DecidedAtNs, b.DecidedAtNs)
	}
}
