package httpapi

import (
	"testing"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/internal/apitest"
	"github.com/weir-rl/weir/ring/ownership"
)

// TestHTTPRing pins GET /v1/ring's body: weir.v1.RingResponse's fields in
// JSON, "ring" an empty list (not null) for a node with no ring.
func TestHTTPRing(t *testing.T) {
	table, err := ownership.FromOwners([]string{"n1", "n2"}, []uint32{0, 1, 1, 0})
	if err != nil {
		t.Fatal(err)
	}
	f := &apitest.Decider{}
	f.ClusterFn = func(string, string) (api.ClusterInfo, error) {
		return api.ClusterInfo{Node: "n1", Epoch: 4, Ring: api.RingInfo{
			Members: []api.RingMember{{Name: "n1", GRPCAddr: "a:1", HTTPAddr: "a:2", State: "alive"}, {Name: "n2", State: "dead"}},
			Table:   table, Majority: true,
		}}, nil
	}
	s := newTestServer(t, f, DefaultConfig())
	wantStatus(t, s.get(t, "/v1/ring"), 200, `{"node":"n1","epoch":4,"members":[`+
		`{"name":"n1","grpc_addr":"a:1","http_addr":"a:2","state":"alive"},{"name":"n2","grpc_addr":"","http_addr":"","state":"dead"}],`+
		`"ring":["n1","n2"],"partition_owners":[0,1,1,0],"hash":"xxhash64","hash_tag":"redis-cluster","replication":40,"load":1.25,"majority":true}`)
	f.ClusterFn = func(string, string) (api.ClusterInfo, error) { return api.ClusterInfo{Node: "solo"}, nil }
	wantStatus(t, s.get(t, "/v1/ring"), 200, `{"node":"solo","epoch":0,"members":[],"ring":[],"partition_owners":[],"hash":"xxhash64","hash_tag":"redis-cluster","replication":40,"load":1.25,"majority":false}`)
}
