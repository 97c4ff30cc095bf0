package engine

import (
	"context"
	"testing"
	"time"

	"github.com/weir-rl/weir/allot"
	"github.com/weir-rl/weir/api"
)

// holderPair is an owner and a holder engine on one clock, the holder's
// steps sent to the owner by direct calls.
type holderPair struct {
	clk    *testClock
	owner  *Engine
	holder *Engine
	peers  *direct
}

func newHolderPair(t *testing.T) *holderPair {
	t.Helper()
	clk := newTestClock()
	owner := newTestEngine(t, "owner", clk, SingleNode{}, NoPeers{}, &syncs{})
	d := &direct{owner: owner}
	holder := newTestEngine(t, "holder", clk, remote{}, d, NoChanges{})
	return &holderPair{clk: clk, owner: owner, holder: holder, peers: d}
}

// warm sends n takes of limit's key k through the holder, one every 5ms
// (200/s, over the limit's threshold of 10/s), and drives the asks they
// queue. It returns how many were allowed, by source.
func (p *holderPair) warm(t *testing.T, limit string, n int) map[api.Source]int {
	t.Helper()
	got := map[api.Source]int{}
	for range n {
		p.clk.add(5 * time.Millisecond)
		if ok, src := takeOne(t, p.holder, limit, "k", 1); ok {
			got[src]++
		}
		driveAsks(p.holder)
	}
	return got
}

// TestHolderDecidesFromItsAllotment: once its demand passes the
// threshold, the holder asks for an allotment and decides the key's takes
// from it without forwarding them, refreshing it as it runs low.
func TestHolderDecidesFromItsAllotment(t *testing.T) {
	p := newHolderPair(t)
	got := p.warm(t, "slow", 30)
	if got[api.SourceOwner] == 0 || got[api.SourceAllotment] == 0 {
		t.Fatalf("sources %v: want forwards first, then answers from an allotment", got)
	}
	if p.peers.allots.Load() == 0 {
		t.Fatal("no allotment asked")
	}
	forwards := p.peers.takes.Load()
	got = p.warm(t, "slow", 20) // the bucket's last 20 tokens
	if got[api.SourceAllotment] != 20 || p.peers.takes.Load() != forwards {
		t.Fatalf("settled: sources %v, %d more forwards; want all 20 from the allotment, none forwarded", got, p.peers.takes.Load()-forwards)
	}
}

// TestHolderKeepsTheOwnersDenial: when the owner's bucket is empty, the
// holder's ask is denied, and the holder denies the key's takes itself
// until the owner's retry-after, asking the owner nothing meanwhile.
func TestHolderKeepsTheOwnersDenial(t *testing.T) {
	p := newHolderPair(t)
	p.warm(t, "slow", 30)
	// The owner spends everything it has left.
	for {
		if ok, _ := takeOne(t, p.owner, "slow", "k", 1); !ok {
			break
		}
	}
	// The holder spends its allotment, then is refused a new one.
	var retry time.Duration
	for range 100 {
		p.clk.add(time.Millisecond)
		resp, err := p.holder.Take(context.Background(), []api.Check{{Limit: "slow", Key: "k", Cost: 1}})
		if err != nil {
			t.Fatal(err)
		}
		driveAsks(p.holder)
		if r := resp.Results[0]; !r.Allowed && r.Source == api.SourceAllotment {
			retry = r.RetryAfter
			break
		}
	}
	if retry < 100*time.Millisecond {
		t.Fatalf("the holder kept no denial of the owner's (retry-after %v)", retry)
	}
	forwards, asks := p.peers.takes.Load(), p.peers.allots.Load()
	for range 10 {
		p.clk.add(retry / 20)
		resp, err := p.holder.Take(context.Background(), []api.Check{{Limit: "slow", Key: "k", Cost: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if r := resp.Results[0]; r.Allowed || r.Source != api.SourceAllotment || r.RetryAfter <= 0 {
			t.Fatalf("a take while the owner's denial holds = %+v; want denied from the allotment with a retry-after", r)
		}
		driveAsks(p.holder)
	}
	if p.peers.takes.Load() != forwards || p.peers.allots.Load() != asks {
		t.Fatalf("%d forwards and %d asks during the denial; want none", p.peers.takes.Load()-forwards, p.peers.allots.Load()-asks)
	}
}

// TestHolderUndoesAnAllottedStep: a request whose later step is denied
// gives the allotment's tokens back, and ReturnAll gives the owner every
// unspent token back.
func TestHolderUndoesAnAllottedStep(t *testing.T) {
	p := newHolderPair(t)
	p.warm(t, "hot", 30)
	before := p.unspent(t)
	if before == 0 {
		t.Fatal("nothing held after warming up")
	}
	// "plain" is placed at another peer (remote.Place), so the request is
	// two steps; spend it empty at the owner first.
	if ok, _ := takeOne(t, p.owner, "plain", "z", 50); !ok {
		t.Fatal("could not empty plain")
	}
	resp, err := p.holder.Take(context.Background(), []api.Check{{Limit: "hot", Key: "k", Cost: 1}, {Limit: "plain", Key: "z", Cost: 1}})
	if err != nil || resp.Allowed {
		t.Fatalf("take = %+v, %v; want denied by plain", resp, err)
	}
	if after := p.unspent(t); after != before {
		t.Fatalf("unspent %d after the undone step, want %d", after, before)
	}
	// Everything back: the owner can take its whole capacity again once
	// what it spent itself has refilled.
	p.holder.ReturnAll(context.Background())
	if p.unspent(t) != 0 {
		t.Fatal("tokens held after ReturnAll")
	}
	p.clk.add(5 * time.Second)
	if ok, _ := takeOne(t, p.owner, "hot", "k", 50); !ok {
		t.Fatal("the owner could not take its whole capacity after the return")
	}
}

// unspent is the holder's unspent tokens of "hot" k.
func (p *holderPair) unspent(t *testing.T) int64 {
	t.Helper()
	k := allot.Key{Limit: "hot", Key: "k"}
	sh := p.holder.purses.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.p.Tokens(p.clk.now(), k)
}
