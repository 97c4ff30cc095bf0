package grpcapi

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/api/weirv1"
	"github.com/weir-rl/weir/internal/apitest"
	"github.com/weir-rl/weir/ring/ownership"
)

func TestGRPCRequestIDReachesTheDecider(t *testing.T) {
	f := &apitest.Decider{}
	var got []string
	f.TakeFn = func(ctx context.Context, checks []api.Check) (api.TakeResponse, error) {
		got = append(got, api.RequestID(ctx))
		return api.TakeResponse{Allowed: true, RingEpoch: 9, Forwarded: true, Results: []api.Result{apitest.ExportAllowed()}}, nil
	}
	c := newGRPC(t, f)
	resp, err := c.Take(t.Context(), &weirv1.TakeRequest{Checks: []*weirv1.Check{{Limit: "export", Key: "k"}}, RequestId: []byte("abc")})
	if err != nil || resp.GetRingEpoch() != 9 || !resp.GetForwarded() {
		t.Fatalf("take = %v, %v; want ring_epoch 9, forwarded", resp, err)
	}
	if _, err := c.Take(t.Context(), &weirv1.TakeRequest{Checks: []*weirv1.Check{{Limit: "export", Key: "k"}}}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Take(t.Context(), &weirv1.TakeRequest{Checks: []*weirv1.Check{{Limit: "export", Key: "k"}}, RequestId: []byte(strings.Repeat("x", api.MaxRequestIDBytes+1))})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("oversized request id: %v; want InvalidArgument", err)
	}
	if len(got) != 2 || got[0] != "abc" || got[1] != "" {
		t.Fatalf("the decider saw request ids %q; want [abc \"\"] (the oversized one never reached it)", got)
	}
}

func TestGRPCGetRing(t *testing.T) {
	f := &apitest.Decider{}
	table := ownership.Build([]string{"n1", "n2"}, ownership.DefaultParams())
	f.ClusterFn = func(string, string) (api.ClusterInfo, error) {
		return api.ClusterInfo{Node: "n1", Epoch: 4, Ring: api.RingInfo{
			Members: []api.RingMember{{Name: "n1", GRPCAddr: "a:1", HTTPAddr: "a:2", State: "alive"}, {Name: "n2", State: "dead"}},
			Table:   table, Majority: true,
		}}, nil
	}
	resp, err := newGRPC(t, f).GetRing(t.Context(), &weirv1.GetRingRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetNode() != "n1" || resp.GetEpoch() != 4 || !resp.GetMajority() || resp.GetHash() != ownership.Hash || resp.GetHashTag() != ownership.HashTagRule ||
		len(resp.GetMembers()) != 2 || resp.GetMembers()[0].GetGrpcAddr() != "a:1" || resp.GetMembers()[0].GetHttpAddr() != "a:2" || resp.GetMembers()[1].GetState() != "dead" {
		t.Fatalf("GetRing = %v", resp)
	}
	back, err := ownership.FromOwners(resp.GetRing(), resp.GetPartitionOwners())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "{t}c", "d"} {
		hk := ownership.HashKey("export", k)
		want, _ := table.Owner(hk)
		if got, _ := back.Owner(hk); got != want {
			t.Fatalf("key %q: published table names %s, the node's %s", k, got, want)
		}
	}
}
