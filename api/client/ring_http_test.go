package client_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/weir-rl/weir/ring/ownership"
)

// GET /v1/ring publishes the same ring as GetRing, with every member's
// public addresses, and a take's body says its ring epoch.
func TestHTTPRingMatchesTheNode(t *testing.T) {
	tc := newTestCluster(t)
	tc.start(3)
	nodes := tc.running()
	n1 := nodes["n1"]
	var ring struct {
		Node    string `json:"node"`
		Epoch   uint64 `json:"epoch"`
		Members []struct {
			Name, State string
			G           string `json:"grpc_addr"`
			H           string `json:"http_addr"`
		} `json:"members"`
		Ring            []string `json:"ring"`
		PartitionOwners []uint32 `json:"partition_owners"`
		Hash            string   `json:"hash"`
		HashTag         string   `json:"hash_tag"`
	}
	getJSON(t, "http://"+n1.HTTPAddr()+"/v1/ring", &ring)
	if ring.Node != "n1" || ring.Epoch == 0 || ring.Hash != "xxhash64" || ring.HashTag != "redis-cluster" || len(ring.PartitionOwners) != ownership.DefaultPartitions {
		t.Fatalf("ring = %+v", ring)
	}
	if len(ring.Members) != 3 {
		t.Fatalf("members %+v", ring.Members)
	}
	for _, m := range ring.Members {
		n := nodes[m.Name]
		if n == nil || m.State != "alive" || m.G != n.GRPCAddr() || m.H != n.HTTPAddr() {
			t.Fatalf("member %+v; want %s alive at grpc %s http %s", m, m.Name, n.GRPCAddr(), n.HTTPAddr())
		}
	}
	table, err := ownership.FromOwners(ring.Ring, ring.PartitionOwners)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys("http", 100) {
		want, _ := n1.Cluster(t.Context(), "wide", k)
		if got, _ := table.Owner(ownership.HashKey("wide", k)); got != want.Owner {
			t.Fatalf("key %s: the published table names %s, the node %s", k, got, want.Owner)
		}
	}
	resp, err := http.Post("http://"+n1.HTTPAddr()+"/v1/take", "application/json",
		strings.NewReader(`{"checks":[{"limit":"wide","key":"k"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		RingEpoch uint64 `json:"ring_epoch"`
	}
	decodeBody(t, resp, &body)
	if body.RingEpoch == 0 {
		t.Fatal("a clustered node's take body has no ring_epoch")
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	decodeBody(t, resp, v)
}

func decodeBody(t *testing.T, resp *http.Response, v any) {
	t.Helper()
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}
