package node_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/api/weirv1"
	"github.com/weir-rl/weir/node"
)

const inlineLimits = `version: 4
limits:
  - name: export
    capacity: 6
    rate: 2/s
inline_limits: true
`

// TestInlineLimitsHTTP: an inline limit in a JSON take is decided like a
// file limit, validated with the file's messages, and counted under the
// label "inline".
func TestInlineLimitsHTTP(t *testing.T) {
	tn := startNode(t, func(c *node.Config) { c.LimitsPath = writeLimits(t, inlineLimits) })
	take := `{"checks":[{"limit":"per-user","key":"u1","inline":{"capacity":3,"rate":"1/h"}}]}`
	for i := range 4 {
		r := tn.post("/v1/take", take)
		var got takeJSON
		decodeStrict(t, r.body, &got)
		if r.status != 200 || got.Allowed != (i < 3) || got.Results[0].Limit != "per-user" || got.Results[0].Capacity != 3 {
			t.Fatalf("take %d: %d %s", i, r.status, r.body)
		}
	}
	// The same name with other parameters is the same bucket (as
	// CL.THROTTLE's): a larger capacity keeps its tokens (none) and
	// mints nothing.
	r := tn.post("/v1/take", `{"checks":[{"limit":"per-user","key":"u1","inline":{"capacity":5,"rate":"1/h"}}]}`)
	var got takeJSON
	decodeStrict(t, r.body, &got)
	if got.Allowed || got.Results[0].Remaining != 0 || got.Results[0].Capacity != 5 {
		t.Fatalf("after raising the capacity to 5: %s, want denied, 0 of 5 remaining", r.body)
	}
	if v := tn.metric(`weir_decisions_total{limit="inline",outcome="allowed",source="owner"}`); v != 3 {
		t.Errorf("inline allowed decisions counted %v, want 3 under limit=\"inline\"", v)
	}
	if strings.Contains(tn.metrics(), `limit="per-user"`) {
		t.Error("an inline limit's own name became a metric label")
	}
	bad := []struct{ body, detail string }{
		{
			`{"checks":[{"limit":"x","key":"k","inline":{"algorithm":"gcra","capacity":5,"rate":"1/s"}}]}`,
			`checks[0]: inline limit: limit \"x\": gcra needs \"burst\"; limit \"x\": field \"capacity\" does not apply to algorithm gcra (it takes \"rate\", \"burst\")`,
		},
		{`{"checks":[{"limit":"x","key":"k","inline":{"capacity":5}}]}`, `checks[0]: inline limit: limit \"x\": token_bucket needs \"rate\"`},
		{`{"checks":[{"limit":"x","key":"k","inline":{"capacity":5,"rate":"5/0s"}}]}`, `checks[0]: inline limit: limit \"x\": rate \"5/0s\": period must be between 1ms and 366d`},
		{`{"checks":[{"limit":"x y","key":"k","inline":{"capacity":5,"rate":"1/s"}}]}`, `checks[0]: inline limit: \"name\" \"x y\" may contain only letters, digits, '.', '_' and '-'`},
		{`{"checks":[{"limit":"export","key":"k","inline":{"capacity":5,"rate":"1/s"}}]}`, `checks[0]: limit \"export\" is defined in the limits file: send it without inline parameters`},
		{`{"checks":[{"limit":"x","key":"k","inline":{"algorithm":"leaky","limit":5}}]}`, `checks[0]: inline limit: limit \"x\": unknown algorithm \"leaky\" (want token_bucket, gcra, sliding_window or fixed_window)`},
		{`{"checks":[{"limit":"x","key":"k","cost":6,"inline":{"capacity":5,"rate":"1/s"}}]}`, `checks[0]: cost 6 exceeds capacity 5 of limit \"x\"`},
		{`{"checks":[{"limit":"x","key":"k","inline":{"capacity":5,"rate":"` + strings.Repeat("1", 33) + `"}}]}`, `checks[0].inline.rate is 33 bytes, over the 32-byte maximum`},
		{`{"checks":[` + strings.Repeat(`{"limit":"x","key":"k","inline":{"capacity":5,"rate":"1/s"}},`, 16) + `{"limit":"x","key":"k","inline":{"capacity":5,"rate":"1/s"}}]}`, `more than 16 checks carry an inline limit`},
	}
	for _, b := range bad {
		r := tn.post("/v1/take", b.body)
		if r.status != 400 || !strings.Contains(r.body, `"detail":"`+b.detail+`"`) {
			t.Errorf("%s:\n got %d %s\nwant detail %s", b.body, r.status, r.body, b.detail)
		}
	}
}

// TestInlineLimitsGRPC: the same through gRPC's Check.inline.
func TestInlineLimitsGRPC(t *testing.T) {
	tn := startNode(t, func(c *node.Config) { c.LimitsPath = writeLimits(t, inlineLimits) })
	ctx := context.Background()
	req := &weirv1.TakeRequest{Checks: []*weirv1.Check{{
		Limit: "w", Key: "k", Cost: 2,
		Inline: &weirv1.InlineLimit{Algorithm: "sliding_window", Limit: 3, Window: "1m"},
	}}}
	resp, err := tn.grpc.Take(ctx, req)
	if err != nil || !resp.GetAllowed() || resp.GetResults()[0].GetRemaining() != 1 {
		t.Fatalf("inline take = %v, %v", resp, err)
	}
	if resp, err := tn.grpc.Take(ctx, req); err != nil || resp.GetAllowed() {
		t.Fatalf("second inline take of 2 from 3 = %v, %v; want denied", resp, err)
	}
	req.Checks[0].Inline.Window = "month"
	_, err = tn.grpc.Take(ctx, req)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), `"window"`) {
		t.Fatalf("sliding_window with a calendar window: %v, want InvalidArgument about the window", err)
	}
}

// TestInlineLimitsDisabled: with inline_limits: false an inline limit is
// invalid on HTTP and gRPC, with the reason.
func TestInlineLimitsDisabled(t *testing.T) {
	tn := startNode(t, func(c *node.Config) {
		c.LimitsPath = writeLimits(t, strings.Replace(inlineLimits, "inline_limits: true", "inline_limits: false", 1))
	})
	r := tn.post("/v1/take", `{"checks":[{"limit":"x","key":"k","inline":{"capacity":3,"rate":"1/s"}}]}`)
	const detail = "checks[0]: inline limits are disabled: the limits file sets inline_limits: false"
	if r.status != 400 || !strings.Contains(r.body, detail) {
		t.Fatalf("HTTP: %d %s", r.status, r.body)
	}
	_, err := tn.grpc.Take(context.Background(), &weirv1.TakeRequest{Checks: []*weirv1.Check{{
		Limit: "x", Key: "k",
		Inline: &weirv1.InlineLimit{Capacity: 3, Rate: "1/s"},
	}}})
	if status.Code(err) != codes.InvalidArgument || status.Convert(err).Message() != detail {
		t.Fatalf("gRPC: %v", err)
	}
}
