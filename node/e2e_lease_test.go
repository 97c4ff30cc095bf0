package node_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/api/weirv1"
)

type leaseJSON struct {
	ID           string `json:"id"`
	FencingToken uint64 `json:"fencing_token"`
	TTLMs        int64  `json:"ttl_ms"`
}

// acquire posts a lease request and requires a 201.
func (tn *testNode) acquire(body string) leaseJSON {
	tn.t.Helper()
	r := tn.post("/v1/leases", body)
	if r.status != http.StatusCreated {
		tn.t.Fatalf("POST /v1/leases %s = %d %s, want 201", body, r.status, r.body)
	}
	if got := r.header.Get("RateLimit-Policy"); got != `"export-db";q=8;qu="concurrent-requests"` {
		tn.t.Errorf("grant RateLimit-Policy = %q", got)
	}
	var l leaseJSON
	decodeStrict(tn.t, r.body, &l)
	if l.ID == "" {
		tn.t.Fatalf("grant without an id: %s", r.body)
	}
	if got, want := r.header.Get("Location"), "/v1/leases/"+url.PathEscape(l.ID); got != want {
		tn.t.Errorf("Location = %q, want %q", got, want)
	}
	return l
}

func TestHTTPLeasesLifecycle(t *testing.T) {
	tn := startNode(t, withLegacyHeaders)
	body := `{"limit":"export-db","key":"tenant:acme","ttl_ms":30000,"wait_ms":0}`
	var held []leaseJSON
	for i := range 8 {
		l := tn.acquire(body)
		if l.TTLMs != 30000 {
			t.Fatalf("lease %d ttl_ms = %d, want 30000", i, l.TTLMs)
		}
		if i > 0 && l.FencingToken <= held[i-1].FencingToken {
			t.Fatalf("fencing token %d after %d: not strictly increasing", l.FencingToken, held[i-1].FencingToken)
		}
		held = append(held, l)
	}

	// The ninth is refused: no permit frees before the first lease's 30 s.
	r := tn.post("/v1/leases", body)
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("ninth lease = %d %s, want 429", r.status, r.body)
	}
	wantHeaders(t, r.header, map[string]string{
		"RateLimit-Policy":      `"export-db";q=8;qu="concurrent-requests"`,
		"RateLimit":             `"export-db";r=0;t=30`,
		"Retry-After":           "30",
		"X-RateLimit-Limit":     "8",
		"X-RateLimit-Remaining": "0",
		"X-RateLimit-Reset":     "30",
		"Cache-Control":         "no-store",
	})
	jsonEqual(t, r.body, `{"error":"concurrency_limit_exceeded","limit":"export-db","retry_after_ms":30000}`)

	// Renew: explicit TTL, then the limit's default.
	r = tn.post("/v1/leases/"+url.PathEscape(held[0].ID)+"/renew", `{"ttl_ms":10000}`)
	if r.status != http.StatusOK {
		t.Fatalf("renew = %d %s", r.status, r.body)
	}
	jsonEqual(t, r.body, `{"ttl_ms":10000}`)
	r = tn.post("/v1/leases/"+url.PathEscape(held[1].ID)+"/renew", "")
	if r.status != http.StatusOK {
		t.Fatalf("renew without a body = %d %s", r.status, r.body)
	}
	jsonEqual(t, r.body, `{"ttl_ms":30000}`)

	// Release twice: 204 both times; the released id no longer renews.
	for i := range 2 {
		r = tn.do(http.MethodDelete, "/v1/leases/"+url.PathEscape(held[2].ID), "")
		if r.status != http.StatusNoContent || r.body != "" {
			t.Fatalf("DELETE #%d = %d %q, want 204 and no body", i+1, r.status, r.body)
		}
	}
	r = tn.post("/v1/leases/"+url.PathEscape(held[2].ID)+"/renew", "")
	if r.status != http.StatusNotFound {
		t.Fatalf("renew of a released lease = %d %s, want 404", r.status, r.body)
	}
	r = tn.post("/v1/leases/unknown-id/renew", "")
	if r.status != http.StatusNotFound {
		t.Fatalf("renew of an unknown id = %d %s, want 404", r.status, r.body)
	}

	// The freed permit goes to the next caller, with a larger token.
	l := tn.acquire(body)
	if l.FencingToken <= held[7].FencingToken {
		t.Fatalf("token after release %d <= %d", l.FencingToken, held[7].FencingToken)
	}
	if v := tn.metric(`weir_leases_held`); v != 8 {
		t.Fatalf("weir_leases_held = %v, want 8", v)
	}
	// Keys are independent.
	tn.acquire(`{"limit":"export-db","key":"tenant:other"}`)
}

func TestHTTPLeaseWaiterGetsReleasedPermit(t *testing.T) {
	tn := startNode(t, nil)
	body := `{"limit":"export-db","key":"w"}`
	var held []leaseJSON
	for range 8 {
		held = append(held, tn.acquire(body))
	}
	type result struct {
		r   response
		err error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := tn.hc.Post(tn.base+"/v1/leases", "application/json",
			stringsReader(`{"limit":"export-db","key":"w","wait_ms":5000}`))
		if err != nil {
			done <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := readAll(resp)
		done <- result{r: response{status: resp.StatusCode, header: resp.Header, body: b}, err: err}
	}()
	waitFor(t, "the acquire to park", 10*time.Second, func() bool {
		return tn.metric(`weir_lease_events_total{event="queued",limit="export-db"}`) == 1
	})
	select {
	case res := <-done:
		t.Fatalf("the parked acquire answered before any release: %+v", res)
	default:
	}
	r := tn.do(http.MethodDelete, "/v1/leases/"+url.PathEscape(held[3].ID), "")
	if r.status != http.StatusNoContent {
		t.Fatalf("release = %d", r.status)
	}
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	if res.r.status != http.StatusCreated {
		t.Fatalf("waiter = %d %s, want 201", res.r.status, res.r.body)
	}
	var l leaseJSON
	decodeStrict(t, res.r.body, &l)
	if l.FencingToken <= held[7].FencingToken || l.TTLMs != 30000 {
		t.Fatalf("waiter lease = %+v, want a token above %d and ttl 30000", l, held[7].FencingToken)
	}
}

func TestHTTPLeaseExpiresOnTheClock(t *testing.T) {
	tn := startNode(t, nil)
	body := `{"limit":"export-db","key":"e","ttl_ms":1000}`
	var held []leaseJSON
	for range 8 {
		held = append(held, tn.acquire(body))
	}
	if r := tn.post("/v1/leases", body); r.status != http.StatusTooManyRequests {
		t.Fatalf("ninth = %d, want 429", r.status)
	}
	tn.clock.Advance(999 * time.Millisecond)
	r := tn.post("/v1/leases/"+url.PathEscape(held[0].ID)+"/renew", `{"ttl_ms":1000}`)
	if r.status != http.StatusOK {
		t.Fatalf("renew before expiry = %d %s, want 200", r.status, r.body)
	}
	// held[1..7] expire at epoch+1s; held[0] now at epoch+1.999s.
	tn.clock.Advance(2 * time.Millisecond)
	r = tn.post("/v1/leases/"+url.PathEscape(held[1].ID)+"/renew", "")
	if r.status != http.StatusNotFound {
		t.Fatalf("renew after expiry = %d %s, want 404", r.status, r.body)
	}
	jsonEqual(t, r.body, `{"error":"not_found","detail":"lease not found: expired, released or never granted"}`)
	if v := tn.metric(`weir_lease_events_total{event="expired",limit="export-db"}`); v != 7 {
		t.Fatalf("expired events = %v, want 7", v)
	}
	if v := tn.metric(`weir_leases_held`); v != 1 {
		t.Fatalf("weir_leases_held = %v, want 1", v)
	}
	// Seven permits are free again.
	for range 7 {
		tn.acquire(body)
	}
	if r := tn.post("/v1/leases", body); r.status != http.StatusTooManyRequests {
		t.Fatalf("after refilling the permits = %d, want 429", r.status)
	}
}

func TestGRPCLeases(t *testing.T) {
	tn := startNode(t, nil)
	ctx := context.Background()
	var last uint64
	var ids []string
	for i := range 8 {
		resp, err := tn.grpc.Acquire(ctx, &weirv1.AcquireRequest{Limit: "export-db", Key: "g", Holder: "worker-1"})
		if err != nil {
			t.Fatal(err)
		}
		if !resp.GetGranted() || resp.GetId() == "" || resp.GetTtlMs() != 30000 || resp.GetPermits() != 8 ||
			resp.GetRulesVersion() != 3 || resp.GetSource() != weirv1.Source_SOURCE_OWNER {
			t.Fatalf("acquire %d = %v", i, resp)
		}
		if resp.GetFencingToken() <= last {
			t.Fatalf("fencing %d after %d", resp.GetFencingToken(), last)
		}
		last = resp.GetFencingToken()
		ids = append(ids, resp.GetId())
	}
	resp, err := tn.grpc.Acquire(ctx, &weirv1.AcquireRequest{Limit: "export-db", Key: "g"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetGranted() || resp.GetRetryAfterMs() != 30000 || resp.GetPermits() != 8 || resp.GetId() != "" {
		t.Fatalf("ninth = %v, want refused with retry 30000", resp)
	}
	rr, err := tn.grpc.Renew(ctx, &weirv1.RenewRequest{Id: ids[0], TtlMs: 5000})
	if err != nil || rr.GetTtlMs() != 5000 {
		t.Fatalf("renew = %v, %v; want ttl 5000", rr, err)
	}
	for range 2 {
		if _, err := tn.grpc.Release(ctx, &weirv1.ReleaseRequest{Id: ids[0]}); err != nil {
			t.Fatalf("release: %v", err)
		}
	}
	_, err = tn.grpc.Renew(ctx, &weirv1.RenewRequest{Id: ids[0]})
	if st, _ := status.FromError(err); st.Code() != codes.NotFound {
		t.Fatalf("renew after release: %v, want NotFound", err)
	}
	// A lease taken over gRPC is released over HTTP: one table.
	if r := tn.do(http.MethodDelete, "/v1/leases/"+url.PathEscape(ids[1]), ""); r.status != http.StatusNoContent {
		t.Fatalf("HTTP release of a gRPC lease = %d", r.status)
	}
	if v := tn.metric(`weir_leases_held`); v != 6 {
		t.Fatalf("weir_leases_held = %v, want 6", v)
	}
}

func TestGRPCLeaseWaiter(t *testing.T) {
	tn := startNode(t, nil)
	ctx := context.Background()
	var ids []string
	for range 8 {
		resp, err := tn.grpc.Acquire(ctx, &weirv1.AcquireRequest{Limit: "export-db", Key: "gw"})
		if err != nil || !resp.GetGranted() {
			t.Fatalf("acquire: %v %v", resp, err)
		}
		ids = append(ids, resp.GetId())
	}
	type result struct {
		resp *weirv1.AcquireResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := tn.grpc.Acquire(ctx, &weirv1.AcquireRequest{Limit: "export-db", Key: "gw", WaitMs: 5000})
		done <- result{resp, err}
	}()
	waitFor(t, "the acquire to park", 10*time.Second, func() bool {
		return tn.metric(`weir_lease_events_total{event="queued",limit="export-db"}`) == 1
	})
	if _, err := tn.grpc.Release(ctx, &weirv1.ReleaseRequest{Id: ids[5]}); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil || !res.resp.GetGranted() {
		t.Fatalf("waiter = %v, %v; want granted", res.resp, res.err)
	}
}
