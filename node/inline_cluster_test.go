package node

import (
	"context"
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
