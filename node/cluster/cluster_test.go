package cluster

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/internal/leakcheck"
	"github.com/weir-rl/weir/lease"
	"github.com/weir-rl/weir/node/engine"
	"github.com/weir-rl/weir/node/limits"
	"github.com/weir-rl/weir/ring"
	"github.com/weir-rl/weir/ring/gossip"
	"github.com/weir-rl/weir/transport"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// testLimits: a bucket that barely refills and a concurrency limit.
const testLimits = `version: 1
limits:
  - name: hot
    capacity: 60
    rate: 1/h
  - name: db
    kind: concurrency
    permits: 6
    lease_ttl: 2s
`

// member is a cluster member with a real engine, not started: no gossip,
// no peer service. Its ring is itself alone, so it decides every key here.
func member(t testing.TB) (*Cluster, *engine.Engine) {
	t.Helper()
	return memberOn(t, time.Now)
}

// memberOn is member on clock.
func memberOn(t testing.TB, clock func() time.Time) (*Cluster, *engine.Engine) {
	t.Helper()
	f, err := limits.Parse([]byte(testLimits), "test")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	rc := gossip.LocalConfig()
	c, err := New(Config{
		Self: "n1", Ring: rc, Forward: transport.LocalConfig(), PeerAddr: "127.0.0.1:0",
		HandoffWindow: 2 * time.Second, TakeoverDelay: time.Second, LeaveTimeout: time.Second,
		Replication: DefaultReplicationConfig(),
	}, Deps{Registry: reg, Clock: clock, Limits: func() *limits.File { return f }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.pool.Close(); _ = c.ring.Close() })
	eng, err := engine.New(engine.Config{
		Name: "n1", Store: bucket.LocalConfig(), FallbackStore: bucket.LocalConfig(), Leases: lease.LocalConfig(), MaxKeyBytes: 512,
	}, engine.Deps{Limits: func() *limits.File { return f }, Clock: clock, Registry: reg, Router: c, Peers: c, Changes: c})
	if err != nil {
		t.Fatal(err)
	}
	c.run = Serve{Owner: eng, Holdings: eng}
	return c, eng
}

// TestMovedMarksExpireAndAreSwept: a mark routes its key away for
// HandoffWindow only, and marks nobody asks about again are swept.
func TestMovedMarksExpireAndAreSwept(t *testing.T) {
	now := time.Unix(1000, 0)
	c := &Cluster{cfg: Config{HandoffWindow: time.Second}, moved: map[keyID]moved{}, now: func() time.Time { return now }}
	c.markMoved("hot", "a", "n2", handed{})
	if to, ok := c.movedTo("hot", "a"); !ok || to != "n2" {
		t.Fatalf("movedTo = %q, %v", to, ok)
	}
	if _, ok := c.movedTo("hot", "b"); ok {
		t.Fatal("an unmarked key is moved")
	}
	now = now.Add(2 * time.Second)
	c.markMoved("hot", "b", "n3", handed{}) // sweeps a, which expired
	if len(c.moved) != 1 || c.movedN.Load() != 1 {
		t.Fatalf("after the sweep %d marks (count %d), want 1", len(c.moved), c.movedN.Load())
	}
	now = now.Add(2 * time.Second)
	if _, ok := c.movedTo("hot", "b"); ok || c.movedN.Load() != 0 {
		t.Fatal("an expired mark still routes its key away")
	}
}

// TestFailedLeasePushKeepsLeases: leases a push to their new owner cannot
// deliver (its peer port refuses) go back into the table, so the new
// owner's pull still finds them; dropped, a rejoined owner would grant the
// key's permits a second time.
func TestFailedLeasePushKeepsLeases(t *testing.T) {
	c, eng := member(t)
	self, ok := c.View().Member("n1")
	if !ok {
		t.Fatal("n1 is not in its own view")
	}
	// A member whose peer address refuses connections.
	dead := closedAddr(t)
	v := ring.NewView(99, "n1", []ring.Member{self, {Name: "n9", Addr: "127.0.0.1:1", Meta: ring.Meta{GRPCAddr: dead}, State: ring.Alive}})
	var key string
	for i := 0; key == ""; i++ {
		if k := fmt.Sprintf("moved-%d", i); ownedBy(v, "db", k, "n9") {
			key = k
		}
	}
	for _, h := range []string{"a", "b"} {
		if resp, err := eng.Acquire(context.Background(), api.AcquireRequest{Limit: "db", Key: key, Holder: h}); err != nil || !resp.Granted {
			t.Fatalf("acquire %s: %+v, %v", h, resp, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.pushMoved(ctx, v, false)
	held := eng.ExportLeases(time.Now(), func(l, k string) bool { return l == "db" && k == key }, false)
	if len(held.Leases) != 2 {
		t.Fatalf("after a failed push the table holds %d of the key's 2 leases", len(held.Leases))
	}
}

// TestLatePushLeavesRefilledBuckets: after the new owner's pull window a
// push sends only a bucket still in debt (it caps what the new owner
// admits); one refilled by now is left out, so the retries end. Within the
// window every bucket goes. The new owner's peer port refuses, so a push
// that sends anything fails.
func TestLatePushLeavesRefilledBuckets(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	now := t0
	c, eng := memberOn(t, func() time.Time { return now })
	self, ok := c.View().Member("n1")
	if !ok {
		t.Fatal("n1 is not in its own view")
	}
	v := ring.NewView(99, "n1", []ring.Member{self, {Name: "n9", Addr: "127.0.0.1:1", Meta: ring.Meta{GRPCAddr: closedAddr(t)}, State: ring.Alive}})
	var key string
	for i := 0; key == ""; i++ {
		if k := fmt.Sprintf("late-%d", i); ownedBy(v, "hot", k, "n9") {
			key = k
		}
	}
	if resp, err := eng.Take(context.Background(), []api.Check{{Limit: "hot", Key: key, Cost: 1}}); err != nil || !resp.Allowed {
		t.Fatalf("take: %+v, %v", resp, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, tc := range []struct {
		after      time.Duration // since the take; "hot" refills a token an hour
		late, sent bool
	}{
		{time.Minute, true, true},    // in debt: sent, and the refused push fails
		{2 * time.Hour, true, false}, // refilled: nothing to send
		{2 * time.Hour, false, true}, // within the window everything goes
	} {
		now = t0.Add(tc.after)
		if failed := c.pushMoved(ctx, v, tc.late); failed != tc.sent {
			t.Errorf("%v after the take, late %v: push failed = %v, want %v", tc.after, tc.late, failed, tc.sent)
		}
	}
}

// ownedBy reports whether member owns (limit, key) in v.
func ownedBy(v *ring.View, limit, key, member string) bool {
	m, ok := v.Owner(ring.HashKey(limit, key))
	return ok && m.Name == member
}

// closedAddr returns a loopback address that refuses connections.
func closedAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	return addr
}

// BenchmarkReplicaApply measures the successor's side of a replication
// batch of 256 packed bucket entries in debt, over 100,000 keys, a batch
// every 10 ms (25,600 entries a second): with transport's
// BenchmarkReplicate, what one replicated key costs. With a second of
// debt every batch is full again before anything reads it; with an hour
// every entry is merged into the replica store once its batch has waited
// the log's horizon (the first pass inserts the keys, later ones merge
// into them); "hot" is an hour of debt for one key of each batch, the
// same key in every batch, and a second for the rest.
func BenchmarkReplicaApply(b *testing.B) {
	for _, bc := range []struct {
		name      string
		debt, hot time.Duration
	}{{"debt=1s", time.Second, time.Second}, {"debt=1h", time.Hour, time.Hour}, {"hot", time.Second, time.Hour}} {
		b.Run(bc.name, func(b *testing.B) { benchmarkReplicaApply(b, bc.debt, bc.hot) })
	}
}

func benchmarkReplicaApply(b *testing.B, debt, hot time.Duration) {
	f, err := limits.Parse([]byte(testLimits), "bench")
	if err != nil {
		b.Fatal(err)
	}
	rs := newReplicas(DefaultReplicationConfig())
	rs.m = newReplMetrics(prometheus.NewRegistry(), rs.len)
	const n, keys = 256, 100_000
	batches := make([]transport.Replica, keys/n)
	for i := range batches {
		entries := []bucket.Entry{{Name: "hot", Key: "the-hot-key", Snapshot: bucket.Snapshot{Count: 41, Since: time.Millisecond, UntilFull: hot}}}
		for j := 1; j < n; j++ {
			entries = append(entries, bucket.Entry{
				Name: "hot", Key: fmt.Sprintf("tenant:%06d", i*n+j),
				Snapshot: bucket.Snapshot{Count: 41, Since: time.Millisecond, UntilFull: debt},
			})
		}
		batches[i].Packed = transport.PackedOf(entries) // as a successor receives them
	}
	now := time.Unix(1_000_000, 0)
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		_ = rs.apply(now, f, "n1", batches[i%len(batches)])
		now = now.Add(10 * time.Millisecond)
		i++
	}
	if rs.len() == 0 {
		b.Fatal("the replica store holds nothing")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
}

// TestRepeatedPullGetsTheHandedState: a member that pulls a key again,
// holding no state for it (its first reply was lost: the request that
// started the pull gave up after this node had extracted the bucket), gets
// the extracted state again, not nothing, from which it would start the
// key from a fresh bucket and admit its capacity a second time. Another
// member gets nothing: the key is not decided there.
func TestRepeatedPullGetsTheHandedState(t *testing.T) {
	c, eng := member(t)
	for range 50 {
		if resp, err := eng.Take(context.Background(), []api.Check{{Limit: "hot", Key: "a", Cost: 1}}); err != nil || !resp.Allowed {
			t.Fatalf("take: %+v, %v", resp, err)
		}
	}
	pull := transport.Request{Op: transport.OpPull, Checks: []api.Check{{Limit: "hot", Key: "a"}}}
	first := c.servePull("n4", pull)
	if len(first.State.Buckets) != 1 || first.State.Buckets[0].Snapshot.Count != 10 {
		t.Fatalf("first pull handed %+v, want the bucket with 10 of 60 tokens left", first.State.Buckets)
	}
	if eng.HasBucket("hot", "a") {
		t.Fatal("the pulled bucket is still here")
	}
	again := c.servePull("n4", pull) // the first reply never arrived
	if len(again.State.Buckets) != 1 || again.State.Buckets[0].Snapshot.Count != 10 {
		t.Fatalf("the repeated pull handed %+v, want the same bucket, 10 tokens left", again.State.Buckets)
	}
	if to, ok := c.movedTo("hot", "a"); !ok || to != "n4" {
		t.Fatalf("movedTo = %q, %v; want n4", to, ok)
	}
	if other := c.servePull("n5", pull); len(other.State.Buckets) != 0 {
		t.Fatalf("a pull by another member handed %+v", other.State.Buckets)
	}
}
