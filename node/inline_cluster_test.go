package node

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-rl/weir/api"
)

// TestClusterInlineLimitsForwarded: inline checks sent to every node of a
// cluster are decided by the key's owner with the caller's parameters
// (the forward carries them): 300 concurrent takes against an inline
// capacity of 30 admit exactly 30, all by the owner.
func TestClusterInlineLimitsForwarded(t *testing.T) {
	c := newSimCluster(t)
	if err := os.WriteFile(c.file, []byte(simLimits+"inline_limits: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.deadline = 5 * time.Second // exactness without faults: no forward may time out
	c.start(3)
	var nodes []*Node
	for _, name := range c.names() {
		nodes = append(nodes, c.nodes[name])
	}
	in := &api.InlineLimit{Algorithm: "gcra", Burst: 30, Rate: "1/1h"}
	var owner, fallback, errs atomic.Int64
	var wg sync.WaitGroup
	for i := range 300 {
		wg.Go(func() {
			resp, err := nodes[i%3].Take(context.Background(), []api.Check{{Limit: "cl.throttle", Key: "tenant:inline", Cost: 1, Inline: in}})
			switch {
			case err != nil:
				errs.Add(1)
			case resp.Allowed && resp.Results[0].Source == api.SourceOwner:
				owner.Add(1)
			case resp.Allowed:
				fallback.Add(1)
			}
		})
	}
	wg.Wait()
	if owner.Load() != 30 || fallback.Load() != 0 || errs.Load() != 0 {
		t.Fatalf("admitted %d by the owner, %d by fallback, %d errors; want exactly 30 by the owner",
			owner.Load(), fallback.Load(), errs.Load())
	}
	// The owner validates too: a forward of an invalid inline limit is
	// refused with the owner's reason, not decided.
	bad := []api.Check{{Limit: "cl.throttle", Key: "tenant:inline", Cost: 1, Inline: &api.InlineLimit{Algorithm: "gcra", Burst: 30}}}
	for _, n := range nodes {
		if _, err := n.Take(context.Background(), bad); err == nil {
			t.Fatalf("%s decided an inline limit without a rate", n.cfg.NodeName)
		}
	}
}

// TestClusterInlineBucketsHandedOverAndReplicated: an inline limit's
// buckets travel like a named limit's, with their definition: spent keys
// whose owner changes on a join are handed to the new owner, which denies
// them; the new owner's successor keeps their replica, and when the new
// owner is killed the member that takes a key over from it denies it too.
// Without the definition the receiver dropped the state and started each
// key full. A peek (cost 0) forwarded to an owner answers the state and
// creates nothing.
func TestClusterInlineBucketsHandedOverAndReplicated(t *testing.T) {
	c := newSimCluster(t)
	if err := os.WriteFile(c.file, []byte(simLimits+"inline_limits: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.deadline = 5 * time.Second // exactness without faults: no forward may time out
	c.start(3)
	ctx := context.Background()
	in := &api.InlineLimit{Capacity: 5, Rate: "1/1h"}
	take := func(n *Node, key string, cost int64) api.TakeResponse {
		t.Helper()
		resp, err := n.Take(ctx, []api.Check{{Limit: "cl.throttle", Key: key, Cost: cost, Inline: in}})
		if err != nil {
			t.Fatalf("take %s at %s: %v", key, n.cfg.NodeName, err)
		}
		return resp
	}
	var keys []string
	for i := range 24 {
		k := fmt.Sprintf("inl:%d", i)
		keys = append(keys, k)
		if r := take(c.nodes["n1"], k, 5); !r.Allowed || r.Results[0].Source != api.SourceOwner {
			t.Fatalf("spending %s: %+v", k, r)
		}
	}
	// A peek through a non-owner answers the owner's state, spends
	// nothing and creates nothing.
	peekKey := keyOwnedBy(c.nodes["n1"], "cl.throttle", "n2", "peek")
	if r := take(c.nodes["n1"], peekKey, 0); !r.Allowed || r.Results[0].Remaining != 5 || !r.Forwarded {
		t.Fatalf("peek of an untouched key: %+v", r)
	}
	if c.nodes["n2"].eng.HasBucket("cl.throttle", peekKey) {
		t.Fatal("a peek created a bucket at the owner")
	}
	if r := take(c.nodes["n3"], keys[0], 0); !r.Allowed || r.Results[0].Remaining != 0 {
		t.Fatalf("peek of a spent key: %+v", r)
	}

	c.add("n4", "10.0.0.4", "10.0.0.1", "")
	c.waitConverged(4)
	n4 := c.nodes["n4"]
	var moved []string
	for _, k := range keys {
		if ownerOf(c.nodes["n1"], "cl.throttle", k) == "n4" {
			moved = append(moved, k)
		}
	}
	if len(moved) == 0 {
		t.Fatal("the join moved no key to n4: the test proves nothing")
	}
	for _, k := range moved {
		if r := take(n4, k, 1); r.Allowed || r.Results[0].Source != api.SourceOwner {
			t.Fatalf("key %s handed to n4: %+v, want denied by its owner", k, r)
		}
	}
	// Replication: n4's successor for the key keeps its spent replica.
	key := moved[0]
	succ := successorOf(n4, "cl.throttle", key)
	if succ == "" || succ == "n4" {
		t.Fatalf("no successor for %s: %q", key, succ)
	}
	waitFor(t, 10*time.Second, "the successor's replica of the spent inline bucket", func() bool {
		e, ok, _ := clusterOf(c.nodes[succ]).Replica(time.Now(), "cl.throttle", key)
		return ok && e.Snapshot.Count == 0 && e.Limit.Capacity == 5
	})
	c.kill("n4")
	waitFor(t, 20*time.Second, "a survivor to decide n4's key as its owner", func() bool {
		r := take(c.nodes[succ], key, 1)
		if r.Results[0].Source != api.SourceOwner {
			return false // a local ceiling's, while n4 is not yet declared dead
		}
		if r.Allowed {
			t.Fatalf("the key taken over from n4 was allowed by its new owner: %+v", r)
		}
		return true
	})
}
