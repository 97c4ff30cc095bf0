package api

import (
	"context"
	"testing"
	"time"
)

// evidenceDecider answers every take with one result that carries
// evidence.
func evidenceDecider() *fakeDecider {
	return &fakeDecider{takeFn: func(_ context.Context, checks []Check) (TakeResponse, error) {
		r := exportAllowed()
		r.Evidence = Evidence{Run: "n2/ab12", DecidedAt: time.Unix(0, 1_700_000_000_123_456_789), Bucket: 0x30007}
		return TakeResponse{Allowed: true, RulesVersion: 3, Results: []Result{r}}, nil
	}}
}

func TestEvidenceNames(t *testing.T) {
	ev := Evidence{Run: "node/a/b/ff", Bucket: 0x1a}
	if got := ev.Decider(); got != "node/a/b" {
		t.Errorf("Decider = %q", got)
	}
	if got := ev.Instance(); got != "node/a/b/ff/1a" {
		t.Errorf("Instance = %q", got)
	}
	ev.Fallback = true
	if got := ev.Instance(); got != "node/a/b/ff/f1a" {
		t.Errorf("fallback Instance = %q", got)
	}
	if got := (Evidence{}).Instance(); got != "" {
		t.Errorf("no evidence: Instance = %q", got)
	}
}

// TestHTTPEvidenceOnlyWhenAsked: the docs/architecture.md §5.1 body unless the request
// says "evidence": true.
func TestHTTPEvidenceOnlyWhenAsked(t *testing.T) {
	s := newTestServer(t, evidenceDecider(), HTTPConfig{})
	plain := `{"allowed":true,"retry_after_ms":0,"rules_version":3,"results":[{"limit":"export","allowed":true,"remaining":5,"capacity":6,"retry_after_ms":0,"reset_after_ms":500,"source":"owner"}]}`
	wantStatus(t, s.post(t, "/v1/take", `{"checks":[{"limit":"export","key":"k"}]}`), 200, plain)
	wantStatus(t, s.post(t, "/v1/take", `{"checks":[{"limit":"export","key":"k"}],"evidence":false}`), 200, plain)
	wantStatus(t, s.post(t, "/v1/take", `{"checks":[{"limit":"export","key":"k"}],"evidence":true}`), 200,
		`{"allowed":true,"retry_after_ms":0,"rules_version":3,"results":[{"limit":"export","allowed":true,"remaining":5,"capacity":6,"retry_after_ms":0,"reset_after_ms":500,"source":"owner",`+
			`"evidence":{"decider":"n2","decided_at_ns":1700000000123456789,"instance":"n2/ab12/30007"}}]}`)
}

// TestHTTPLeaseSourceOnlyWhenAsked: a lease answer names its source (owner
// or a local ceiling) only when the request asks for evidence.
func TestHTTPLeaseSourceOnlyWhenAsked(t *testing.T) {
	f := &fakeDecider{acquireFn: func(req AcquireRequest) (AcquireResponse, error) {
		if req.Key == "full" {
			return AcquireResponse{Permits: 8, RetryAfter: time.Second, Source: SourceFallback}, nil
		}
		return AcquireResponse{Granted: true, ID: "l-1", FencingToken: 17, TTL: 30 * time.Second, Permits: 8, Source: SourceFallback}, nil
	}}
	s := newTestServer(t, f, HTTPConfig{})
	wantStatus(t, s.post(t, "/v1/leases", `{"limit":"export-db","key":"k"}`), 201, `{"id":"l-1","fencing_token":17,"ttl_ms":30000}`)
	wantStatus(t, s.post(t, "/v1/leases", `{"limit":"export-db","key":"k","evidence":true}`), 201,
		`{"id":"l-1","fencing_token":17,"ttl_ms":30000,"source":"fallback"}`)
	wantStatus(t, s.post(t, "/v1/leases", `{"limit":"export-db","key":"full"}`), 429,
		`{"error":"concurrency_limit_exceeded","limit":"export-db","retry_after_ms":1000}`)
	wantStatus(t, s.post(t, "/v1/leases", `{"limit":"export-db","key":"full","evidence":true}`), 429,
		`{"error":"concurrency_limit_exceeded","limit":"export-db","retry_after_ms":1000,"source":"fallback"}`)
}
