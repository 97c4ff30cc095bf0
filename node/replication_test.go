package node

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/node/placement"
	"github.com/weir-rl/weir/ring"
)

// successorOf names the member that keeps the replica of (limit, key) in
// node n's view, n being its owner.
func successorOf(n *Node, limit, key string) string {
	return clusterOf(n).Successor(limit, key)
}

// holdsReplica reports whether n keeps a replica of bucket (limit, key).
func holdsReplica(n *Node, limit, key string) bool {
	_, ok, _ := clusterOf(n).Replica(time.Now(), limit, key)
	return ok
}

// kill cuts a member off without a goodbye (no handoff, no leave) and
// stops it; to the others it crashed. The stop gets ShutdownTimeout in
// all: cut off, the member's handoff and leave could only wait out their
// own bound (3×LeaveTimeout) for peers it cannot reach, while the test
// watches the survivors' clocks.
func (c *simCluster) kill(name string) {
	c.net.Isolate(c.hosts[name])
	n := c.nodes[name]
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ShutdownTimeout)
	defer cancel()
	_ = n.Shutdown(ctx)
	delete(c.nodes, name)
}

// TestReplicationKilledOwnerUnderLoad: an owner spends a bucket under
// load and is killed while the load goes on. The successor takes the key
// over from its replica, so replaying every admitted take through an
// ideal bucket (capacity 60, no refill to speak of) the excess stays
// within the debits of the owner's last replication interval plus the
// survivors' fallback shares. Without replication the successor starts
// the key full and admits 60 more.
func TestReplicationKilledOwnerUnderLoad(t *testing.T) {
	c := newSimCluster(t)
	c.deadline = 200 * time.Millisecond
	c.noReplication = os.Getenv("WEIR_TEST_NO_REPLICATION") == "1" // to see it fail
	c.start(3)
	n1 := c.nodes["n1"]
	key := keyOwnedBy(n1, "hot", "n3", "crash")
	succ := successorOf(c.nodes["n3"], "hot", key)
	if succ == "" || succ == "n3" {
		t.Fatalf("no successor for n3's key: %q", succ)
	}

	var owner, fallback atomic.Int64
	// ownerAt records, per owner decision, when its answer came back, to
	// count the debits of the owner's last interval before the kill.
	var mu sync.Mutex
	var ownerAt []time.Time
	take := func(n *Node) {
		resp, err := n.Take(context.Background(), []api.Check{{Limit: "hot", Key: key, Cost: 1}})
		if err != nil || !resp.Allowed {
			return
		}
		if resp.Results[0].Source == api.SourceFallback {
			fallback.Add(1)
			return
		}
		owner.Add(1)
		mu.Lock()
		ownerAt = append(ownerAt, time.Now())
		mu.Unlock()
	}
	// Load from every node, spending the bucket as it goes. The killed
	// node's clients die with it.
	stop, stop3 := make(chan struct{}), make(chan struct{})
	var wg, wg3 sync.WaitGroup
	for _, name := range []string{"n1", "n2", "n3"} {
		n := c.nodes[name]
		mine, group := stop, &wg
		if name == "n3" {
			mine, group = stop3, &wg3
		}
		group.Add(1)
		go func() {
			defer group.Done()
			for {
				select {
				case <-mine:
					return
				default:
				}
				take(n)
				time.Sleep(5 * time.Millisecond) // pacing the load, not waiting for an effect
			}
		}()
	}
	// Under load until the bucket is spent (and then some denials).
	waitFor(t, 10*time.Second, "the load to spend the bucket", func() bool { return owner.Load() >= 60 })
	// The kill lands while takes are denied, once the successor's replica
	// has caught up (so the last interval held no debit).
	waitFor(t, 5*time.Second, "the successor's replica to show the bucket spent", func() bool {
		if c.noReplication {
			return true // nothing to wait for: the successor keeps no replica
		}
		e, ok, _ := clusterOf(c.nodes[succ]).Replica(time.Now(), "hot", key)
		return ok && e.Snapshot.Count == 0
	})
	close(stop3)
	wg3.Wait()
	killed := time.Now()
	c.kill("n3")
	survivors := []*Node{c.nodes["n1"], c.nodes["n2"]}
	waitFor(t, 20*time.Second, "a survivor to decide n3's key as its owner", func() bool {
		resp, err := survivors[0].Take(context.Background(), []api.Check{{Limit: "hot", Key: key, Cost: 1}})
		if err == nil && resp.Allowed {
			if resp.Results[0].Source == api.SourceFallback {
				fallback.Add(1)
			} else {
				owner.Add(1)
			}
		}
		return err == nil && resp.Results[0].Source == api.SourceOwner
	})
	// Keep the load on the new owner a while longer.
	time.Sleep(500 * time.Millisecond) // letting the load run, not waiting for an effect
	close(stop)
	wg.Wait()

	interval := LocalConfig().Replication.Interval
	mu.Lock()
	lastInterval := 0
	for _, at := range ownerAt {
		// The debits the successor may not have seen: those of the last
		// interval before the kill, with a margin for the batch in flight.
		if at.After(killed.Add(-3*interval)) && !at.After(killed) {
			lastInterval++
		}
	}
	mu.Unlock()
	shares := 2 * (60 / 3) // each survivor's local ceiling while the crash is detected
	excess := int(owner.Load()+fallback.Load()) - 60
	t.Logf("admitted %d by owners, %d from ceilings; %d in the last interval before the kill", owner.Load(), fallback.Load(), lastInterval)
	if excess > lastInterval+shares {
		t.Fatalf("excess %d over capacity 60, want at most %d (last interval) + %d (fallback shares)", excess, lastInterval, shares)
	}
	if got := owner.Load(); got > int64(60+lastInterval) {
		t.Fatalf("owners admitted %d, want at most 60 + %d: the new owner started from a full bucket", got, lastInterval)
	}
	adopted := 0.0
	for _, n := range survivors {
		adopted += counterValue(t, n, "weir_replica_adopted_total", "bucket")
	}
	if adopted < 1 {
		t.Fatal("no survivor adopted a replica")
	}
}

// TestReplicationKilledLeaseOwnerGrantsNone: an owner holding every permit
// of a key is killed. Its successor takes the key over knowing which
// leases run (the replica), so it grants none until they are released or
// expire; without replication it would grant permits/N at once.
func TestReplicationKilledLeaseOwnerGrantsNone(t *testing.T) {
	c := newLeaseSimCluster(t)
	c.noReplication = os.Getenv("WEIR_TEST_NO_REPLICATION") == "1" // to see it fail
	c.start(3)
	n1 := c.nodes["n1"]
	key := keyOwnedBy(n1, "crash", "n3", "tenant:crash")
	succ := successorOf(c.nodes["n3"], "crash", key)
	for i := range 8 {
		if resp, err := n1.Acquire(context.Background(), api.AcquireRequest{Limit: "crash", Key: key, TTL: 3 * time.Second}); err != nil || !resp.Granted {
			t.Fatalf("acquire %d at the owner: %+v, %v", i, resp, err)
		}
	}
	held := time.Now()
	waitFor(t, 5*time.Second, "the successor's replica of the 8 leases", func() bool {
		if c.noReplication {
			return true // replication off: nothing to wait for
		}
		_, _, leases := clusterOf(c.nodes[succ]).Replica(time.Now(), "crash", key)
		return leases == 8
	})
	c.kill("n3")
	newOwner := c.nodes[succ]
	waitFor(t, 15*time.Second, "the successor to own n3's key", func() bool {
		return ownerOf(newOwner, "crash", key) == succ
	})
	// Ask the new owner until the 3 s leases run out: no grant from the
	// owner while they may still run.
	grants := 0
	for time.Since(held) < 2500*time.Millisecond {
		resp, err := newOwner.Acquire(context.Background(), api.AcquireRequest{Limit: "crash", Key: key, TTL: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Granted && resp.Source == api.SourceOwner {
			grants++
			t.Logf("granted at %v after the leases were taken", time.Since(held))
		}
		time.Sleep(50 * time.Millisecond) // pacing the acquires, not waiting for an effect
	}
	if grants != 0 {
		t.Fatalf("the new owner granted %d leases while the dead owner's 8 may still run", grants)
	}
	if counterValue(t, newOwner, "weir_replica_adopted_total", "lease") < 1 {
		t.Fatal("the new owner adopted no lease replica")
	}
	// Once they have expired, permits are granted again.
	waitFor(t, 5*time.Second, "a grant after the dead owner's leases expired", func() bool {
		resp, err := newOwner.Acquire(context.Background(), api.AcquireRequest{Limit: "crash", Key: key, TTL: time.Second})
		return err == nil && resp.Granted
	})
}

// TestReplicaNeverDecidesWhileOwnerAnswers: the successor holds a replica
// of a key, yet a take it is asked for goes to the owner, which decides
// it, and the replica is not adopted.
func TestReplicaNeverDecidesWhileOwnerAnswers(t *testing.T) {
	c := newSimCluster(t)
	c.start(3)
	n1 := c.nodes["n1"]
	key := keyOwnedBy(n1, "hot", "n3", "live")
	succ := c.nodes[successorOf(c.nodes["n3"], "hot", key)]
	if owner, _ := takeMany(t, []*Node{c.nodes["n3"]}, "hot", key, 10); owner != 10 {
		t.Fatalf("owner admitted %d of 10", owner)
	}
	waitFor(t, 5*time.Second, "the successor's replica", func() bool { return holdsReplica(succ, "hot", key) })
	for range 5 {
		resp, err := succ.Take(context.Background(), []api.Check{{Limit: "hot", Key: key, Cost: 1}})
		if err != nil || !resp.Allowed {
			t.Fatalf("take at the successor: %+v, %v", resp, err)
		}
		if r := resp.Results[0]; r.Source != api.SourceOwner {
			t.Fatalf("take at the successor decided by %v, want the owner", r.Source)
		}
	}
	if p := clusterOf(succ).Place("hot", key); p.Kind != placement.Forward || p.Peer != "n3" {
		t.Fatalf("the successor places the key %+v, want a forward to n3", p)
	}
	if got := counterValue(t, succ, "weir_replica_adopted_total", "bucket"); got != 0 {
		t.Fatalf("the successor adopted %v replicas while the owner answers", got)
	}
	if succ.eng.HasBucket("hot", key) {
		t.Fatal("the successor holds an owner bucket for a key another member owns")
	}
	// And the owner's bucket has every take: 60 - 15.
	resp, err := c.nodes["n3"].Take(context.Background(), []api.Check{{Limit: "hot", Key: key, Cost: 1}})
	if err != nil || resp.Results[0].Remaining != 60-16 {
		t.Fatalf("owner bucket after 15 takes and this one: %+v, %v; want 44 remaining", resp, err)
	}
}

// TestReplicationSendsOnlyBucketsInDebt: a bucket that has refilled by
// the flush after its take is not sent (its successor's replica, if any,
// refills by itself), while one still in debt is.
func TestReplicationSendsOnlyBucketsInDebt(t *testing.T) {
	c := newSimCluster(t)
	c.start(3)
	n1, n3 := c.nodes["n1"], c.nodes["n3"]
	sent := func() float64 { return counterValue(t, n3, "weir_replication_sent_entries_total", "bucket") }
	// A first key in debt, so the ring's resync and this key's batch are
	// behind us before counting.
	warm := keyOwnedBy(n1, "hot", "n3", "warm")
	takeMany(t, []*Node{n3}, "hot", warm, 1)
	waitFor(t, 5*time.Second, "the warm-up key's replica", func() bool {
		return holdsReplica(c.nodes[successorOf(n3, "hot", warm)], "hot", warm) && sent() >= 1
	})
	before := sent()
	quick := keyOwnedBy(n1, "quick", "n3", "quick")
	if owner, _ := takeMany(t, []*Node{n3}, "quick", quick, 5); owner != 5 {
		t.Fatalf("owner admitted %d of 5 quick takes", owner)
	}
	debt := keyOwnedBy(n1, "hot", "n3", "debt")
	takeMany(t, []*Node{n3}, "hot", debt, 1)
	waitFor(t, 5*time.Second, "the replica of the key in debt", func() bool {
		return holdsReplica(c.nodes[successorOf(n3, "hot", debt)], "hot", debt) && sent() > before
	})
	// The quick key was changed before the key in debt, so a flush that
	// sent the one had the other too.
	if got := sent() - before; got != 1 {
		t.Fatalf("sent %v bucket entries for one key in debt and one refilled, want 1", got)
	}
	if holdsReplica(c.nodes[successorOf(n3, "quick", quick)], "quick", quick) {
		t.Fatal("the successor keeps a replica of a refilled bucket")
	}
}

// TestReplicasMoveWithJoinAndLeave: when a member joins, the successor of
// some keys changes; the new successor gets their replica and the old one
// drops it. When it leaves, the replicas move back.
func TestReplicasMoveWithJoinAndLeave(t *testing.T) {
	c := newSimCluster(t)
	c.start(3)
	// Spend one token on many keys, so some change successor on a join.
	var keys []string
	for i := range 60 {
		k := "move:" + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + string(rune('a'+i/26))
		keys = append(keys, k)
		if _, err := c.nodes["n1"].Take(context.Background(), []api.Check{{Limit: "hot", Key: k, Cost: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	placed := func() bool {
		for _, k := range keys {
			o := c.nodes[ownerOf(c.nodes["n1"], "hot", k)]
			s := successorOf(o, "hot", k)
			for name, n := range c.nodes {
				if n == o {
					continue
				}
				if holdsReplica(n, "hot", k) != (name == s) {
					return false
				}
			}
		}
		return true
	}
	waitFor(t, 10*time.Second, "each key's replica at its successor only", placed)
	c.add("n4", "10.0.0.4", "10.0.0.1", "")
	c.waitConverged(4)
	moved := 0
	for _, k := range keys {
		if o := ownerOf(c.nodes["n1"], "hot", k); o == "n4" || successorOf(c.nodes[o], "hot", k) == "n4" {
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("the join moved no key's owner or successor: the test proves nothing")
	}
	waitFor(t, 10*time.Second, "replicas at the successors of the 4-node ring", placed)
	n4 := c.nodes["n4"]
	if err := n4.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	delete(c.nodes, "n4")
	// Gone: left, or, when its leave broadcast did not go out in time (a
	// loaded -race run; Shutdown then only warns), declared dead by
	// failure detection. Either way the ring drops it and the replicas
	// must move back, which is what this test is about.
	waitFor(t, 15*time.Second, "n4 gone from every view", func() bool {
		for _, n := range c.nodes {
			if m, ok := clusterOf(n).View().Member("n4"); ok && m.State != ring.Left && m.State != ring.Dead {
				return false
			}
		}
		return true
	})
	waitFor(t, 10*time.Second, "replicas at the successors of the 3-node ring again", placed)
}

// counterValue reads a counter of n's registry with the given "kind"
// label (0 when absent).
func counterValue(t *testing.T, n *Node, name, kind string) float64 {
	t.Helper()
	mfs, err := n.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == kind {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestLoneNodeDebtReachesItsFirstSuccessor: a node alone records no
// changes for replication (no key has a successor), and the keys it put
// in debt then reach their successor once a second member joins.
func TestLoneNodeDebtReachesItsFirstSuccessor(t *testing.T) {
	c := newSimCluster(t)
	c.start(1)
	n1 := c.nodes["n1"]
	var keys []string
	for i := range 40 {
		k := fmt.Sprintf("alone:%d", i)
		keys = append(keys, k)
		if _, err := n1.Take(context.Background(), []api.Check{{Limit: "hot", Key: k, Cost: 5}}); err != nil {
			t.Fatal(err)
		}
	}
	c.add("n2", "10.0.0.2", "10.0.0.1", "")
	c.waitConverged(2)
	var stayed []string
	for _, k := range keys {
		if ownerOf(n1, "hot", k) == "n1" {
			stayed = append(stayed, k)
		}
	}
	if len(stayed) == 0 {
		t.Fatal("every key moved to n2: the test proves nothing")
	}
	n2 := c.nodes["n2"]
	waitFor(t, 10*time.Second, "a replica at n2 of each key n1 kept", func() bool {
		for _, k := range stayed {
			if !holdsReplica(n2, "hot", k) {
				return false
			}
		}
		return true
	})
}
