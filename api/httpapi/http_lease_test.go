package httpapi

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/internal/apitest"
)

func TestLeases(t *testing.T) {
	s := newTestServer(t, &apitest.Decider{}, DefaultConfig())

	r := s.post(t, "/v1/leases", `{"limit":"export-db","key":"tenant:acme","ttl_ms":30000,"wait_ms":250,"holder":"worker-3"}`)
	wantStatus(t, r, 201, `{"id":"l-1","fencing_token":17,"ttl_ms":30000}`)
	wantHeaders(t, r, map[string]string{
		"Location":         "/v1/leases/l-1",
		"RateLimit-Policy": `"export-db";q=8;qu="concurrent-requests"`,
		"RateLimit":        "", "Retry-After": "",
	})
	want := api.AcquireRequest{Limit: "export-db", Key: "tenant:acme", Holder: "worker-3", TTL: 30 * time.Second, Wait: 250 * time.Millisecond}
	if got := s.f.Acquires[0]; got != want {
		t.Fatalf("Acquire got %+v, want %+v", got, want)
	}

	wantStatus(t, s.post(t, "/v1/leases/l-1/renew", `{"ttl_ms":10000}`), 200, `{"ttl_ms":10000}`)
	wantStatus(t, s.post(t, "/v1/leases/l-1/renew", ``), 200, `{"ttl_ms":30000}`)
	if got := s.f.Renews; len(got) != 2 || got[0] != (apitest.RenewCall{ID: "l-1", TTL: 10 * time.Second}) || got[1] != (apitest.RenewCall{ID: "l-1", TTL: 0}) {
		t.Fatalf("Renew got %+v", got)
	}

	r = s.do(t, http.MethodDelete, "/v1/leases/l-1", nil)
	wantStatus(t, r, 204, "")
	r = s.do(t, http.MethodDelete, "/v1/leases/l-1", nil)
	wantStatus(t, r, 204, "")
	if got := s.f.Releases; len(got) != 2 || got[0] != "l-1" {
		t.Fatalf("Release got %q", got)
	}
}

func TestLeaseRefused(t *testing.T) {
	f := &apitest.Decider{AcquireFn: func(api.AcquireRequest) (api.AcquireResponse, error) {
		return api.AcquireResponse{Granted: false, Permits: 8, RetryAfter: 1200 * time.Millisecond}, nil
	}}
	s := newTestServer(t, f, legacyConfig())
	r := s.post(t, "/v1/leases", `{"limit":"export-db","key":"tenant:secret"}`)
	wantStatus(t, r, 429, `{"error":"concurrency_limit_exceeded","limit":"export-db","retry_after_ms":1200}`)
	wantHeaders(t, r, map[string]string{
		"RateLimit-Policy":      `"export-db";q=8;qu="concurrent-requests"`,
		"RateLimit":             `"export-db";r=0;t=2`,
		"Retry-After":           "2",
		"X-RateLimit-Limit":     "8",
		"X-RateLimit-Remaining": "0",
		"X-RateLimit-Reset":     "2",
		"Location":              "",
	})
}

func TestLeaseErrors(t *testing.T) {
	f := &apitest.Decider{RenewFn: func(string, time.Duration) (time.Duration, error) {
		return 0, api.Errorf(api.CodeNotFound, "lease expired or unknown")
	}}
	s := newTestServer(t, f, DefaultConfig())
	wantStatus(t, s.post(t, "/v1/leases/gone/renew", `{}`), 404, `{"error":"not_found","detail":"lease expired or unknown"}`)
	calls := s.f.Calls()

	for _, tc := range []struct{ path, body, detail string }{
		{"/v1/leases", `{"limit":"export-db","key":"k","ttl_ms":-1}`, "ttl_ms must not be negative"},
		{"/v1/leases", `{"limit":"export-db","key":"k","wait_ms":-1}`, "wait_ms must not be negative"},
		{"/v1/leases", `{"limit":"export-db","key":"k","ttl_ms":9223372036855}`, "ttl_ms is too large"},
		{"/v1/leases", `{"limit":"export-db","key":"k","ttl_ms":1.5}`, "ttl_ms: want an integer, got number 1.5"},
		{"/v1/leases", `{"limit":"export-db","key":""}`, "key is empty"},
		{"/v1/leases", `{"limit":"export-db","key":"` + strings.Repeat("k", 513) + `"}`, "key is 513 bytes, over the 512-byte maximum"},
		{"/v1/leases", `{"limit":"export-db","key":"k","holder":"` + strings.Repeat("h", 513) + `"}`, "holder is 513 bytes, over the 512-byte maximum"},
		{"/v1/leases", `{"limit":"export-db","key":"k","ttl":5}`, `unknown field "ttl"`},
		{"/v1/leases", `{"limit":"export-db","key":"k","wait_ms":5,"wait_ms":9}`, `field "wait_ms" is given twice`},
		{"/v1/leases", `{"limit":"export-db","Key":"k"}`, `unknown field "Key" (field names are matched exactly, in lower case)`},
		{"/v1/leases/l-1/renew", `{"ttl_ms":-5}`, "ttl_ms must not be negative"},
		{"/v1/leases/l-1/renew", `{"ttl_ms":"5"}`, "ttl_ms: want an integer, got string"},
		{"/v1/leases/" + strings.Repeat("x", 2049) + "/renew", ``, "lease id is 2049 bytes, over the 2048-byte maximum"},
		{"/v1/leases/%FF/renew", ``, "lease id is not valid UTF-8"},
	} {
		wantStatus(t, s.post(t, tc.path, tc.body), 400, `{"error":"invalid_request","detail":`+jsonQuote(tc.detail)+`}`)
	}
	wantStatus(t, s.do(t, http.MethodDelete, "/v1/leases/"+strings.Repeat("x", 2049), nil), 400,
		`{"error":"invalid_request","detail":"lease id is 2049 bytes, over the 2048-byte maximum"}`)
	if n := s.f.Calls(); n != calls {
		t.Fatalf("Decider called %d times for bad input", n-calls)
	}
}

// TestLeaseHugeWait: every wait_ms validation accepts is served: the
// largest (just under time.Duration's overflow in milliseconds) is clamped
// to api.MaxLeaseWait, the ceiling of any limit's queue.max_wait, and the
// queued answer's write deadline stays in the future, so the caller gets
// the lease it was granted.
func TestLeaseHugeWait(t *testing.T) {
	s := newTestServer(t, &apitest.Decider{}, DefaultConfig())
	for _, ms := range []string{"9223372036854", "9223372006855", "3600001"} {
		r := s.post(t, "/v1/leases", `{"limit":"export-db","key":"tenant:acme","wait_ms":`+ms+`}`)
		wantStatus(t, r, 201, `{"id":"l-1","fencing_token":17,"ttl_ms":30000}`)
		if got := s.f.Acquires[len(s.f.Acquires)-1].Wait; got != api.MaxLeaseWait {
			t.Fatalf("wait_ms %s reached the Decider as %v, want %v", ms, got, api.MaxLeaseWait)
		}
	}
	wantStatus(t, s.post(t, "/v1/leases", `{"limit":"export-db","key":"tenant:acme","wait_ms":9223372036855}`), 400,
		`{"error":"invalid_request","detail":"wait_ms is too large"}`)
}
