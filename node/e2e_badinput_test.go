package node_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/api/weirv1"
)

// TestHTTPBadInputChangesNothing sends every kind of bad input for one key
// and checks each is a 400 invalid_request with a detail, and that none of
// them created or spent a bucket.
func TestHTTPBadInputChangesNothing(t *testing.T) {
	tn := startNode(t, nil)
	const key = "tenant:bad-input-key"
	long := strings.Repeat("k", 513)
	cases := []struct {
		name, path, body string
	}{
		{"malformed json", "/v1/take", `{"checks":[{"limit":"export","key":"` + key + `"`},
		{"not an object", "/v1/take", `[1,2,3]`},
		{"unknown limit", "/v1/take", `{"checks":[{"limit":"nope","key":"` + key + `","cost":1}]}`},
		{"cost 0", "/v1/take", `{"checks":[{"limit":"export","key":"` + key + `","cost":0}]}`},
		{"cost negative", "/v1/take", `{"checks":[{"limit":"export","key":"` + key + `","cost":-1}]}`},
		{"cost above capacity", "/v1/take", `{"checks":[{"limit":"export","key":"` + key + `","cost":7}]}`},
		{"cost 1.5", "/v1/take", `{"checks":[{"limit":"export","key":"` + key + `","cost":1.5}]}`},
		{"cost string", "/v1/take", `{"checks":[{"limit":"export","key":"` + key + `","cost":"1"}]}`},
		{"empty key", "/v1/take", `{"checks":[{"limit":"export","key":"","cost":1}]}`},
		{"empty check list", "/v1/take", `{"checks":[]}`},
		{"key of 513 bytes", "/v1/take", `{"checks":[{"limit":"export","key":"` + long + `","cost":1}]}`},
		{"take on a concurrency limit", "/v1/take", `{"checks":[{"limit":"export-db","key":"` + key + `","cost":1}]}`},
		{"unknown field", "/v1/take", `{"checks":[{"limit":"export","key":"` + key + `","cots":1}]}`},
		{"valid then invalid check", "/v1/take", `{"checks":[{"limit":"export","key":"` + key + `","cost":1},{"limit":"nope","key":"` + key + `","cost":1}]}`},
		{"valid then over capacity", "/v1/take", `{"checks":[{"limit":"export","key":"` + key + `","cost":1},{"limit":"login","key":"` + key + `","cost":6}]}`},
		{"lease on a rate limit", "/v1/leases", `{"limit":"export","key":"` + key + `"}`},
		{"lease negative ttl", "/v1/leases", `{"limit":"export-db","key":"` + key + `","ttl_ms":-1}`},
		{"lease unknown limit", "/v1/leases", `{"limit":"nope","key":"` + key + `"}`},
	}
	for _, c := range cases {
		r := tn.post(c.path, c.body)
		if r.status != http.StatusBadRequest {
			t.Errorf("%s: status %d %s, want 400", c.name, r.status, r.body)
			continue
		}
		var e struct {
			Error  string `json:"error"`
			Detail string `json:"detail"`
		}
		decodeStrict(t, r.body, &e)
		if e.Error != "invalid_request" || e.Detail == "" {
			t.Errorf("%s: body %s, want invalid_request with a detail", c.name, r.body)
		}
		if strings.Contains(r.body, key) || strings.Contains(r.body, long) {
			t.Errorf("%s: error body echoes the key: %s", c.name, r.body)
		}
	}
	// /v1/check with bad query values.
	for _, q := range []string{
		"limit=export&key=" + key + "&cost=0",
		"limit=export&key=" + key + "&cost=1.5",
		"limit=export&key=" + key + "&cost=7",
		"limit=nope&key=" + key,
		"limit=export-db&key=" + key,
		"limit=export&key=",
	} {
		if r := tn.do(http.MethodGet, "/v1/check?"+q, ""); r.status != http.StatusBadRequest {
			t.Errorf("GET /v1/check?%s = %d %s, want 400", q, r.status, r.body)
		}
	}

	// Over 1 MiB: 413, read no further.
	big := `{"checks":[{"limit":"export","key":"` + key + `","cost":1}],"pad":"` + strings.Repeat("x", 1<<20) + `"}`
	r := tn.post("/v1/take", big)
	if r.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("1 MiB body = %d, want 413", r.status)
	}
	jsonEqual(t, r.body, `{"error":"request_too_large"}`)

	// No state: no bucket was created, and the key is full.
	if v, ok := metricValue(tn.metrics(), "weir_buckets"); !ok || v != 0 {
		t.Fatalf("weir_buckets = %v (present %v) after bad input only, want 0", v, ok)
	}
	if v := tn.metric(`weir_leases_held`); v != 0 {
		t.Fatalf("weir_leases_held = %v after bad input only, want 0", v)
	}
	got := tn.take(checkJSON{"export", key, 1})
	if !got.Allowed || got.Results[0].Remaining != 5 {
		t.Fatalf("first valid take = %+v, want remaining 5", got.Results[0])
	}
	got = tn.take(checkJSON{"login", key, 1})
	if !got.Allowed || got.Results[0].Remaining != 4 {
		t.Fatalf("first valid login take = %+v, want remaining 4", got.Results[0])
	}
	if v := tn.metric("weir_buckets"); v != 2 {
		t.Fatalf("weir_buckets = %v after two valid takes, want 2", v)
	}
}

func TestGRPCBadInputIsInvalidArgument(t *testing.T) {
	tn := startNode(t, nil)
	ctx := context.Background()
	const key = "tenant:grpc-bad"
	long := strings.Repeat("k", 513)
	cases := []struct {
		name   string
		checks []*weirv1.Check
	}{
		{"unknown limit", []*weirv1.Check{{Limit: "nope", Key: key, Cost: 1}}},
		{"negative cost", []*weirv1.Check{{Limit: "export", Key: key, Cost: -1}}},
		{"cost above capacity", []*weirv1.Check{{Limit: "export", Key: key, Cost: 7}}},
		{"empty key", []*weirv1.Check{{Limit: "export", Key: "", Cost: 1}}},
		{"key of 513 bytes", []*weirv1.Check{{Limit: "export", Key: long, Cost: 1}}},
		{"empty check list", nil},
		{"concurrency limit", []*weirv1.Check{{Limit: "export-db", Key: key, Cost: 1}}},
		{"valid then invalid", []*weirv1.Check{{Limit: "export", Key: key, Cost: 1}, {Limit: "nope", Key: key, Cost: 1}}},
	}
	for _, c := range cases {
		_, err := tn.grpc.Take(ctx, &weirv1.TakeRequest{Checks: c.checks})
		st, _ := status.FromError(err)
		if st.Code() != codes.InvalidArgument || st.Message() == "" {
			t.Errorf("%s: %v, want InvalidArgument with a detail", c.name, err)
		}
		if strings.Contains(st.Message(), key) {
			t.Errorf("%s: detail echoes the key: %q", c.name, st.Message())
		}
	}
	_, err := tn.grpc.Acquire(ctx, &weirv1.AcquireRequest{Limit: "export", Key: key})
	if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument {
		t.Errorf("lease on a rate limit: %v, want InvalidArgument", err)
	}
	if v := tn.metric("weir_buckets"); v != 0 {
		t.Fatalf("weir_buckets = %v after bad input only, want 0", v)
	}
	resp, err := tn.grpc.Take(ctx, &weirv1.TakeRequest{Checks: []*weirv1.Check{{Limit: "export", Key: key}}})
	if err != nil || !resp.GetAllowed() || resp.GetResults()[0].GetRemaining() != 5 {
		t.Fatalf("first valid take (cost 0 = 1) = %v, %v; want allowed, remaining 5", resp, err)
	}
}

// TestHTTPBadInputDetailNamesField checks that details are useful: they
// name the problem, so a caller can fix the request.
func TestHTTPBadInputDetailNamesField(t *testing.T) {
	tn := startNode(t, nil)
	for body, want := range map[string]string{
		`{"checks":[{"limit":"nope","key":"k","cost":1}]}`:      `nope`,
		`{"checks":[{"limit":"export","key":"k","cost":7}]}`:    `capacity`,
		`{"checks":[{"limit":"export-db","key":"k","cost":1}]}`: `concurrency`,
		`{"checks":[]}`: `empty`,
	} {
		r := tn.post("/v1/take", body)
		var e struct{ Detail string }
		_ = json.Unmarshal([]byte(r.body), &e)
		if r.status != http.StatusBadRequest || !strings.Contains(e.Detail, want) {
			t.Errorf("%s: %d %s, want 400 with a detail mentioning %q", body, r.status, r.body, want)
		}
	}
}
