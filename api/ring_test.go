package api

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/api/weirv1"
	"github.com/weir-rl/weir/ring/ownership"
)

func TestGRPCRequestIDReachesTheDecider(t *testing.T) {
	f := &fakeDecider{}
	var got []string
	f.takeFn = func(ctx context.Context, checks []Check) (TakeResponse, error) {
		got = append(got, RequestID(ctx))
		return TakeResponse{Allowed: true, RingEpoch: 9, Forwarded: true, Results: []Result{exportAllowed()}}, nil
	}
	c := newGRPC(t, f)
	resp, err := c.Take(t.Context(), &weirv1.TakeRequest{Checks: []*weirv1.Check{{Limit: "export", Key: "k"}}, RequestId: []byte("abc")})
	if err != nil || resp.GetRingEpoch() != 9 || !resp.GetForwarded() {
		t.Fatalf("take = %v, %v; want ring_epoch 9, forwarded", resp, err)
	}
	if _, err := c.Take(t.Context(), &weirv1.TakeRequest{Checks: []*weirv1.Check{{Limit: "export", Key: "k"}}}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Take(t.Context(), &weirv1.TakeRequest{Checks: []*weirv1.Check{{Limit: "export", Key: "k"}}, RequestId: []byte(strings.Repeat("x", MaxRequestIDBytes+1))})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("oversized request id: %v; want InvalidArgument", err)
	}
	if len(got) != 2 || got[0] != "abc" || got[1] != "" {
		t.Fatalf("the decider saw request ids %q; want [abc \"\"] (the oversized one never reached it)", got)
	}
}

func TestGRPCGetRing(t *testing.T) {
	f := &fakeDecider{}
	table := ownership.Build([]string{"n1", "n2"}, ownership.DefaultParams())
	f.clusterFn = func(string, string) (ClusterInfo, error) {
		return ClusterInfo{Node: "n1", Epoch: 4, Ring: RingInfo{
			Members: []RingMember{{Name: "n1", GRPCAddr: "a:1", HTTPAddr: "a:2", State: "alive"}, {Name: "n2", State: "dead"}},
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

// TestHTTPRing pins GET /v1/ring's body: weir.v1.RingResponse's fields in
// JSON, "ring" an empty list (not null) for a node with no ring.
func TestHTTPRing(t *testing.T) {
	table, err := ownership.FromOwners([]string{"n1", "n2"}, []uint32{0, 1, 1, 0})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeDecider{}
	f.clusterFn = func(string, string) (ClusterInfo, error) {
		return ClusterInfo{Node: "n1", Epoch: 4, Ring: RingInfo{
			Members: []RingMember{{Name: "n1", GRPCAddr: "a:1", HTTPAddr: "a:2", State: "alive"}, {Name: "n2", State: "dead"}},
			Table:   table, Majority: true,
		}}, nil
	}
	s := newTestServer(t, f, DefaultHTTPConfig())
	wantStatus(t, s.get(t, "/v1/ring"), 200, `{"node":"n1","epoch":4,"members":[`+
		`{"name":"n1","grpc_addr":"a:1","http_addr":"a:2","state":"alive"},{"name":"n2","grpc_addr":"","http_addr":"","state":"dead"}],`+
		`"ring":["n1","n2"],"partition_owners":[0,1,1,0],"hash":"xxhash64","hash_tag":"redis-cluster","replication":40,"load":1.25,"majority":true}`)
	f.clusterFn = func(string, string) (ClusterInfo, error) { return ClusterInfo{Node: "solo"}, nil }
	wantStatus(t, s.get(t, "/v1/ring"), 200, `{"node":"solo","epoch":0,"members":[],"ring":[],"partition_owners":[],"hash":"xxhash64","hash_tag":"redis-cluster","replication":40,"load":1.25,"majority":false}`)
}
