package httpapi

import (
	"testing"
	"time"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/internal/apitest"
)

// TestHTTPEvidenceOnlyWhenAsked: the docs/architecture.md §5.1 body unless the request
// says "evidence": true.
func TestHTTPEvidenceOnlyWhenAsked(t *testing.T) {
	s := newTestServer(t, apitest.EvidenceDecider(), Config{})
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
	f := &apitest.Decider{AcquireFn: func(req api.AcquireRequest) (api.AcquireResponse, error) {
		if req.Key == "full" {
			return api.AcquireResponse{Permits: 8, RetryAfter: time.Second, Source: api.SourceFallback}, nil
		}
		return api.AcquireResponse{Granted: true, ID: "l-1", FencingToken: 17, TTL: 30 * time.Second, Permits: 8, Source: api.SourceFallback}, nil
	}}
	s := newTestServer(t, f, Config{})
	wantStatus(t, s.post(t, "/v1/leases", `{"limit":"export-db","key":"k"}`), 201, `{"id":"l-1","fencing_token":17,"ttl_ms":30000}`)
	wantStatus(t, s.post(t, "/v1/leases", `{"limit":"export-db","key":"k","evidence":true}`), 201,
		`{"id":"l-1","fencing_token":17,"ttl_ms":30000,"source":"fallback"}`)
	wantStatus(t, s.post(t, "/v1/leases", `{"limit":"export-db","key":"full"}`), 429,
		`{"error":"concurrency_limit_exceeded","limit":"export-db","retry_after_ms":1000}`)
	wantStatus(t, s.post(t, "/v1/leases", `{"limit":"export-db","key":"full","evidence":true}`), 429,
		`{"error":"concurrency_limit_exceeded","limit":"export-db","retry_after_ms":1000,"source":"fallback"}`)
}
