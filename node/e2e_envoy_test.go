package node_test

import (
	"context"
	"testing"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestEnvoyRateLimitServiceOnTheNode asks a real node through Envoy's rate
// limit API on its gRPC port: the export bucket is the same one the HTTP
// API spends, and an unknown limit is an error, never a silent OK.
func TestEnvoyRateLimitServiceOnTheNode(t *testing.T) {
	tn := startNode(t, nil)
	rls := rlsv3.NewRateLimitServiceClient(tn.conn)
	req := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{{
		Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "generic_key", Value: "export"}, {Key: "tenant", Value: "acme"}},
	}}}
	for i := range 6 {
		resp, err := rls.ShouldRateLimit(context.Background(), req)
		if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
			t.Fatalf("take %d: %v, %v", i+1, resp.GetOverallCode(), err)
		}
		if got := resp.GetStatuses()[0].GetLimitRemaining(); got != uint32(5-i) {
			t.Fatalf("take %d: remaining %d, want %d", i+1, got, 5-i)
		}
	}
	resp, err := rls.ShouldRateLimit(context.Background(), req)
	if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("seventh: %v, %v; want OVER_LIMIT", resp.GetOverallCode(), err)
	}
	// The HTTP API sees the same bucket, under the escaped key.
	if got := tn.take(checkJSON{Limit: "export", Key: "tenant=acme", Cost: 1}); got.Allowed {
		t.Fatalf("HTTP take on the drained bucket was allowed: %+v", got)
	}
	bad := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{{
		Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "generic_key", Value: "nope"}},
	}}}
	if _, err := rls.ShouldRateLimit(context.Background(), bad); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("unknown limit: %v, want InvalidArgument", err)
	}
}
