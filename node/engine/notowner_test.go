package engine

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/node/placement"
)

// settling is a sender's Router while a join settles: every key is owned
// by "old" until moved is set, then by "new"; both are alive.
type settling struct {
	SingleNode
	moved atomic.Bool
}

func (s *settling) Place(string, string) placement.Placement {
	if s.moved.Load() {
		return placement.Placement{Kind: placement.Forward, Peer: "new", Addr: "new"}
	}
	return placement.Placement{Kind: placement.Forward, Peer: "old", Addr: "old"}
}

func (*settling) Known() int { return 2 }

// disagreeing is the sender's Peers: "old" answers NotOwner, its ring
// having moved the key, and the sender's view moves it as that answer
// arrives; "new" decides at the owner engine. With stay set, the
// sender's view does not move.
type disagreeing struct {
	direct
	router *settling
	stay   bool
	asked  map[string]int
}

func (d *disagreeing) Take(ctx context.Context, peer string, checks []api.Check, id string) ([]api.Result, bool, error) {
	d.asked[peer]++
	if peer == "old" {
		if !d.stay {
			d.router.moved.Store(true)
		}
		return nil, false, ErrNotOwner
	}
	return d.direct.Take(ctx, peer, checks, id)
}

// TestNotOwnerWhileTheViewMovesAsksTheNewOwner: a forward answered
// NotOwner while this node's own view moved the key (a join settling) is
// placed again, once, and decided by the new owner from its bucket, not
// granted from this node's local ceiling while that bucket grants too.
// When the view has not moved, NotOwner still falls back at once.
func TestNotOwnerWhileTheViewMovesAsksTheNewOwner(t *testing.T) {
	for _, stay := range []bool{false, true} {
		clk := newTestClock()
		owner, _ := newOverloadEngine(t, clk, SingleNode{}, nil)
		router := &settling{}
		peers := &disagreeing{direct: direct{owner: owner}, router: router, stay: stay, asked: map[string]int{}}
		sender, _ := newOverloadEngine(t, clk, router, peers)
		resp, err := sender.Take(context.Background(), []api.Check{{Limit: "local", Key: "k", Cost: 1}})
		if err != nil || !resp.Allowed {
			t.Fatalf("stay %v: take: %+v, %v", stay, resp, err)
		}
		src := resp.Results[0].Source
		switch {
		case !stay && (src != api.SourceOwner || peers.asked["new"] != 1 || !owner.HasBucket("local", "k")):
			t.Fatalf("view moved: source %v, asked %v, owner holds the bucket %v; want the new owner to decide it",
				src, peers.asked, owner.HasBucket("local", "k"))
		case stay && (src != api.SourceFallback || peers.asked["old"] != 1 || peers.asked["new"] != 0):
			t.Fatalf("view unchanged: source %v, asked %v; want one forward, then the local ceiling", src, peers.asked)
		}
	}
}
