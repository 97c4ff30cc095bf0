package node

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/ring"
)

// Allotments on the simulated network: real nodes, real gRPC between
// them, faults injected by the network. The limit "allot" (simLimits)
// holds 200 tokens and refills nothing during a test, so whatever the
// faults, the owner and every holder together must never admit more than
// 200 (answers decided from an owner's bucket or from an allotment; a
// fallback ceiling's answers are the failure policy's, bounded
// elsewhere).

const allotCapacity = 200

// tally counts admitted takes by source.
type tally struct {
	mu sync.Mutex
	n  map[api.Source]int
}

func newTally() *tally { return &tally{n: map[api.Source]int{}} }

// take takes one token of "allot" key at n, counts it when admitted, and
// returns the result.
func (ta *tally) take(t *testing.T, n *Node, key string) api.Result {
	t.Helper()
	resp, err := n.Take(context.Background(), []api.Check{{Limit: "allot", Key: key, Cost: 1}})
	if err != nil {
		return api.Result{}
	}
	r := resp.Results[0]
	if resp.Allowed {
		ta.mu.Lock()
		ta.n[r.Source]++
		ta.mu.Unlock()
	}
	return r
}

// exact is what the owners' buckets and the allotments admitted.
func (ta *tally) exact() int {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	return ta.n[api.SourceOwner] + ta.n[api.SourceAllotment]
}

func (ta *tally) String() string {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	return fmt.Sprintf("owner %d, allotment %d, fallback %d", ta.n[api.SourceOwner], ta.n[api.SourceAllotment], ta.n[api.SourceFallback])
}

// allotKey finds a key of "allot" that owner owns and, when successor is
// set, that successor takes over if owner fails.
func allotKey(t *testing.T, c *simCluster, owner, successor string) string {
	t.Helper()
	v := clusterOf(c.nodes[owner]).View()
	for i := range 10_000 {
		k := fmt.Sprintf("tenant:%d", i)
		hk := ring.HashKey("allot", k)
		if m, _ := v.Owner(hk); m.Name != owner {
			continue
		}
		if m, _ := v.Without(owner).Owner(hk); successor == "" || m.Name == successor {
			return k
		}
	}
	t.Fatalf("no key owned by %s with successor %q", owner, successor)
	return ""
}

// warm takes key at holder, one take every 2ms (over the threshold of
// 10/s), until a take is decided from an allotment.
func (ta *tally) warm(t *testing.T, holder *Node, key string) {
	t.Helper()
	waitFor(t, 10*time.Second, "an answer from an allotment", func() bool {
		for range 10 {
			if ta.take(t, holder, key).Source == api.SourceAllotment {
				return true
			}
			time.Sleep(2 * time.Millisecond) // pacing the load: 500/s
		}
		return false
	})
}

// drain takes key at each node, counting what it admits, until a take
// there is denied by the bucket: by the owner, or at a holder from the
// owner's denial it keeps. A holder whose demand stays over the threshold
// (drain takes every 10ms) and that holds the key when the bucket runs
// dry spends what it holds, asks again, is denied and denies from then
// on by itself (Source allotment), asking the owner again each
// retry-after but forwarding it no take: an owner's denial may never
// come to it. A fallback's denial (the owner unreachable) does not end
// the drain.
func (ta *tally) drain(t *testing.T, key string, nodes ...*Node) {
	t.Helper()
	for _, n := range nodes {
		waitFor(t, 10*time.Second, "a denial from the bucket at "+n.cfg.NodeName, func() bool {
			r := ta.take(t, n, key)
			return !r.Allowed && (r.Source == api.SourceOwner || r.Source == api.SourceAllotment)
		})
	}
}

// waitHoldingsExpired waits until no member reports a live holding of
// "allot" key (the hot-keys report lists a holding until its owner drops
// it, with its time left): whatever was left outstanding has expired.
func waitHoldingsExpired(t *testing.T, n *Node, key string) {
	t.Helper()
	waitFor(t, 10*time.Second, "the key's holdings to expire", func() bool {
		hot, err := n.Hot(context.Background(), "allot", api.MaxHotN)
		if err != nil {
			return false
		}
		for _, a := range hot.Allotments {
			if a.Key == key && a.ExpiresInMs > 0 {
				return false
			}
		}
		return true
	})
}

// TestAllotHolderCrash: a holder that crashes strands at most its
// allotment: the owner gets the capacity back when the allotment expires,
// and nothing is admitted twice.
func TestAllotHolderCrash(t *testing.T) {
	c := newSimCluster(t)
	c.start(3)
	key := allotKey(t, c, "n1", "")
	ta := newTally()
	ta.warm(t, c.nodes["n2"], key)
	c.kill("n2") // its returns and its leave reach nobody
	waitHoldingsExpired(t, c.nodes["n1"], key)
	ta.drain(t, key, c.nodes["n1"], c.nodes["n3"])
	maxAllotment := allotCapacity / 4
	if got := ta.exact(); got > allotCapacity || got < allotCapacity-maxAllotment {
		t.Fatalf("admitted %d (%v); want at most %d and at least %d (a crashed holder strands at most one allotment)", got, ta, allotCapacity, allotCapacity-maxAllotment)
	}
}

// TestAllotOwnerCrashSuccessorKnowsTheGrant: the owner tells the key's
// successor of every grant before answering it, so when the owner
// crashes, the successor decides from a bucket that counts the holder's
// allotment, even with the periodic stream at its slowest (1s).
func TestAllotOwnerCrashSuccessorKnowsTheGrant(t *testing.T) {
	c := newSimCluster(t)
	c.replInterval = time.Second
	c.start(3)
	key := allotKey(t, c, "n1", "n3")
	ta := newTally()
	n2, n3 := c.nodes["n2"], c.nodes["n3"]
	ta.warm(t, n2, key)
	for range 100 { // more grants, the last within a second of the crash
		ta.take(t, n2, key)
		time.Sleep(time.Millisecond) // pacing the load
	}
	c.kill("n1")
	// The holder spends what it holds, the successor takes over.
	waitFor(t, 15*time.Second, "n3 to decide the key as its owner", func() bool {
		ta.take(t, n2, key)
		return ta.take(t, n3, key).Source == api.SourceOwner
	})
	waitHoldingsExpired(t, n3, key)
	ta.drain(t, key, n3, n2)
	if got := ta.exact(); got > allotCapacity {
		t.Fatalf("admitted %d (%v) of %d: the successor did not count the allotment", got, ta, allotCapacity)
	}
}

// TestAllotPartitionedHolderStopsAtExpiry: a holder cut off from the
// owner decides from its allotment only until the allotment's TTL after
// its last ask, then no longer, though tokens are left; the owner
// meanwhile decides the rest.
func TestAllotPartitionedHolderStopsAtExpiry(t *testing.T) {
	c := newSimCluster(t)
	c.start(3)
	key := allotKey(t, c, "n1", "")
	ta := newTally()
	n1, n2 := c.nodes["n1"], c.nodes["n2"]
	ta.warm(t, n2, key) // at 100/s or more: allotments of 40 tokens or more
	c.net.Cut(c.hosts["n1"], c.hosts["n2"])
	cut := time.Now()
	// At 12.5/s, above the threshold, 40 tokens would last two seconds
	// past the TTL.
	var last time.Time
	local := 0
	for time.Since(cut) < 2*time.Second {
		if r := ta.take(t, n2, key); r.Allowed && r.Source == api.SourceAllotment {
			last = time.Now()
			local++
		}
		ta.take(t, n1, key)
		time.Sleep(80 * time.Millisecond) // pacing the load: 12.5/s
	}
	const ttl = time.Second
	t.Logf("%d answers from the allotment after the cut, the last %v after it", local, last.Sub(cut))
	if local == 0 {
		t.Fatal("the cut-off holder never answered from its allotment")
	}
	if last.Sub(cut) > ttl+100*time.Millisecond {
		t.Fatalf("the cut-off holder answered from its allotment %v after the cut; its TTL is %v", last.Sub(cut), ttl)
	}
	c.net.Heal()
	time.Sleep(ttl + 200*time.Millisecond)
	ta.drain(t, key, n1)
	if got := ta.exact(); got > allotCapacity {
		t.Fatalf("admitted %d (%v) of %d", got, ta, allotCapacity)
	}
}

// TestAllotFollowsItsKey: when the owner leaves, its holdings go with the
// key to the new owner (handed over: replication is off, so the new owner
// has no replica of them), which takes the holder's refreshes as its own.
func TestAllotFollowsItsKey(t *testing.T) {
	c := newSimCluster(t)
	c.noReplication = true
	c.start(3)
	key := allotKey(t, c, "n1", "n3")
	ta := newTally()
	n1, n2, n3 := c.nodes["n1"], c.nodes["n2"], c.nodes["n3"]
	ta.warm(t, n2, key)
	// The holder pauses (for less than its idle time, 1s, so it keeps its
	// allotment): the holding the owner hands over is the one recorded now.
	pick := func(l, k string) bool { return l == "allot" && k == key }
	held := n1.eng.ExportHoldings(time.Now(), pick, false)
	if len(held) != 1 || held[0].Holder != "n2" {
		t.Fatalf("the owner's holdings of the key: %+v; want n2's", held)
	}
	start := time.Now()
	if err := n1.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	delete(c.nodes, "n1")
	got := n3.eng.ExportHoldings(time.Now(), pick, false)
	if time.Since(start) > 800*time.Millisecond {
		t.Fatalf("the leave took %v, past the holder's idle time (1s) less a margin: it may have returned its allotment meanwhile", time.Since(start))
	}
	if len(got) != 1 || got[0].Holder != "n2" || got[0].Seq != held[0].Seq || got[0].Tokens != held[0].Tokens {
		t.Fatalf("the new owner's holdings after the leave: %+v; want the one handed over, %+v", got, held)
	}
	c.waitConverged(2)
	left := time.Now()
	// Past the TTL of anything granted before the leave, the holder still
	// decides from allotments: refreshed by the new owner.
	for time.Since(left) < 1500*time.Millisecond {
		ta.take(t, n2, key)
		time.Sleep(2 * time.Millisecond) // pacing the load
	}
	if r := ta.take(t, n2, key); r.Source != api.SourceAllotment {
		t.Fatalf("after the leave: %+v; want answers from an allotment the new owner refreshed", r)
	}
	ta.drain(t, key, n3)
	if got := ta.exact(); got > allotCapacity {
		t.Fatalf("admitted %d (%v) of %d", got, ta, allotCapacity)
	}
}

// TestAllotReturnRacingRefresh: a client holder returns its allotment and
// refreshes it at once, over and over, through a node that forwards both
// to the owner. Whichever arrives first, the owner never counts fewer
// tokens outstanding than the client may still spend (a return that
// dropped the refreshed holding would let the bucket refill under the
// client's feet), and nothing is admitted twice.
func TestAllotReturnRacingRefresh(t *testing.T) {
	c := newSimCluster(t)
	c.start(3)
	key := allotKey(t, c, "n1", "")
	n1, n2 := c.nodes["n1"], c.nodes["n2"]
	ctx := context.Background()
	req := api.AllotRequest{Limit: "allot", Key: key, Holder: "cli", Want: 8, Demand: 100}
	var have int64
	var seq uint64
	spent := 0
	for range 30 {
		req.Unspent, req.Seq = have, seq
		resp, err := n2.Allot(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		have, seq = have+resp.Tokens, resp.Seq
		if have > 0 {
			have--
			spent++
		}
		// Return everything, and refresh, at once.
		var wg sync.WaitGroup
		var refreshed api.AllotResponse
		wg.Go(func() {
			_ = n2.Return(ctx, api.ReturnRequest{Limit: "allot", Key: key, Holder: "cli", Unspent: have, Seq: seq})
		})
		r := req
		r.Unspent, r.Seq = have, seq
		wg.Go(func() { refreshed, _ = n2.Allot(ctx, r) })
		wg.Wait()
		// The returned tokens are gone; the refresh's grant is usable, and
		// the owner counts it outstanding.
		have, seq = refreshed.Tokens, refreshed.Seq
		var outstanding int64
		for _, h := range n1.eng.ExportHoldings(time.Now(), func(l, k string) bool { return l == "allot" && k == key }, false) {
			if h.Holder == "client:cli" {
				outstanding += h.Tokens
			}
		}
		if outstanding < have {
			t.Fatalf("the owner counts %d tokens outstanding; the client holds %d", outstanding, have)
		}
	}
	_ = n2.Return(ctx, api.ReturnRequest{Limit: "allot", Key: key, Holder: "cli", Unspent: have, Seq: seq})
	waitHoldingsExpired(t, n1, key)
	ta := newTally()
	ta.drain(t, key, n1)
	if got := ta.exact() + spent; got > allotCapacity {
		t.Fatalf("the owner admitted %d after the client spent %d: %d of %d", ta.exact(), spent, got, allotCapacity)
	}
	if spent == 0 {
		t.Fatal("the client spent nothing: no allotment was granted")
	}
}

// TestAllotHoldersShownToOperators: the hot-keys report (GET
// /v1/cluster/hot, the status page) lists a key's holders as its owner
// records them, asked of any member.
func TestAllotHoldersShownToOperators(t *testing.T) {
	c := newSimCluster(t)
	c.start(3)
	key := allotKey(t, c, "n1", "")
	ta := newTally()
	ta.warm(t, c.nodes["n2"], key)
	hot, err := c.nodes["n3"].Hot(context.Background(), "allot", 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range hot.Allotments {
		if a.Limit == "allot" && a.Key == key && a.Owner == "n1" && a.Holder == "n2" && a.Tokens > 0 && a.ExpiresInMs > 0 {
			return
		}
	}
	t.Fatalf("the report lists allotments %+v, want n2 holding %q of n1", hot.Allotments, key)
}
