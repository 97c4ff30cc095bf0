package node

import (
	"context"
	"errors"
	"math"
	"strconv"
	"testing"

	"github.com/weir-rl/weir/api"
)

// TestClusterHotMergesEveryMember asks one node for the hot keys of a
// 3-node cluster whose traffic arrived at all three: the merged costs and
// denials are exact where every member reported the key, bounded where one
// cut it, and every member is listed as merged.
func TestClusterHotMergesEveryMember(t *testing.T) {
	c := newSimCluster(t)
	c.start(3)
	ctx := context.Background()
	take := func(n *Node, key string, times int) {
		for range times {
			if _, err := n.Take(ctx, []api.Check{{Limit: "hot", Key: key, Cost: 1}}); err != nil {
				t.Fatalf("take %s: %v", key, err)
			}
		}
	}
	n1, n2, n3 := c.nodes["n1"], c.nodes["n2"], c.nodes["n3"]
	take(n1, "tenant:big", 40) // capacity 60: 70 asked, 10 denied
	take(n2, "tenant:big", 20)
	take(n3, "tenant:big", 10)
	take(n2, "tenant:mid", 5)
	take(n3, "tenant:mid", 2)
	for i := range 20 {
		take(n1, "tenant:tail"+strconv.Itoa(i), 1)
	}
	got, err := n2.Hot(ctx, "hot", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Nodes) != 3 || len(got.Missing) != 0 {
		t.Errorf("merged %v, missing %v; want all three merged", got.Nodes, got.Missing)
	}
	// n1 sends only its top 2 (big and one tail key of cost 1), so a key it
	// left out may weigh up to 1 there: mid is 7 or 8, reported as 8 ± 1.
	want := []api.HotKey{{Key: "tenant:big", Cost: 70, Denied: 10}, {Key: "tenant:mid", Cost: 8, Error: 1}}
	if len(got.Limits) != 1 || got.Limits[0].Limit != "hot" || len(got.Limits[0].Keys) != 2 ||
		got.Limits[0].Keys[0] != want[0] || got.Limits[0].Keys[1] != want[1] {
		t.Errorf("Hot = %+v, want limit hot with %+v", got.Limits, want)
	}

	st, err := n3.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var allowed, denied uint64
	share := 0.0
	for _, m := range st.Members {
		if !m.Reachable || m.State != "alive" || m.LimitsVersion != 1 {
			t.Errorf("member %+v: want alive, reachable, limits version 1", m)
		}
		allowed += m.Allowed
		denied += m.Denied
		share += m.RingShare
	}
	if len(st.Members) != 3 || allowed != 60+7+20 || denied != 10 {
		t.Errorf("stats over %d members: %d allowed, %d denied; want 3 members, 87 and 10", len(st.Members), allowed, denied)
	}
	if math.Abs(share-1) > 1e-9 {
		t.Errorf("ring shares sum to %f", share)
	}
}

func TestHotRejectsBadInput(t *testing.T) {
	c := newSimCluster(t)
	n := c.add("n1", "10.0.0.1", "", "")
	for _, tc := range []struct {
		limit string
		n     int
	}{{"nope", 5}, {"hot", 0}, {"hot", api.MaxHotN + 1}} {
		_, err := n.Hot(context.Background(), tc.limit, tc.n)
		var e *api.Error
		if !errors.As(err, &e) || e.Code != api.CodeInvalid {
			t.Errorf("Hot(%q, %d) = %v, want CodeInvalid", tc.limit, tc.n, err)
		}
	}
}
