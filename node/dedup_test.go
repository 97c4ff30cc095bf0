package node

import (
	"context"
	"errors"
	"testing"

	"github.com/weir-rl/weir/api"
)

// A retried take (same request id) is answered with its first decision by
// the owner, whichever member the retry enters through, and spends nothing.
func TestClusterTakeRequestIDIsDecidedOnce(t *testing.T) {
	c := newSimCluster(t)
	c.start(3)
	n1, n3 := c.nodes["n1"], c.nodes["n3"]
	key := keyOwnedBy(n1, "hot", "n3", "dedup")
	ctx := api.WithRequestID(context.Background(), "req-1")
	take := func(n *Node, ctx context.Context) api.TakeResponse {
		t.Helper()
		resp, err := n.Take(ctx, []api.Check{{Limit: "hot", Key: key, Cost: 5}})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	first := take(n1, ctx) // forwarded to n3
	if !first.Allowed || first.Results[0].Remaining != 55 || !first.Forwarded || first.RingEpoch == 0 {
		t.Fatalf("first take = %+v; want allowed at the owner with 55 left, forwarded, with an epoch", first)
	}
	for _, n := range []*Node{n1, n3} { // the retry through n1 again, and straight to the owner
		if again := take(n, ctx); !again.Allowed || again.Results[0].Remaining != 55 {
			t.Fatalf("retry through %s = %+v; want the first decision again (55 left)", n.cfg.NodeName, again)
		}
	}
	if next := take(n3, context.Background()); next.Results[0].Remaining != 50 || next.Forwarded {
		t.Fatalf("a take without an id = %+v; want 50 left: the retries spent nothing", next)
	}
	_, err := n3.Take(ctx, []api.Check{{Limit: "hot", Key: key, Cost: 1}})
	var apiErr *api.Error
	if !errors.As(err, &apiErr) || apiErr.Code != api.CodeInvalid {
		t.Fatalf("an id reused for another take: %v; want CodeInvalid", err)
	}
	// A take over two owners is not deduplicated: replaying one group while
	// refunding another could mint tokens.
	other := keyOwnedBy(n1, "hot", "n2", "dedup-other")
	multi := []api.Check{{Limit: "hot", Key: key, Cost: 1}, {Limit: "hot", Key: other, Cost: 1}}
	mctx := api.WithRequestID(context.Background(), "req-multi")
	a, _ := n1.Take(mctx, multi)
	b, _ := n1.Take(mctx, multi)
	if a.Results[0].Remaining != 49 || b.Results[0].Remaining != 48 {
		t.Fatalf("multi-owner takes left %d then %d; want 49, 48 (each decided)", a.Results[0].Remaining, b.Results[0].Remaining)
	}
}
