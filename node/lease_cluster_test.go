package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/ring"
)

// Concurrency limits over the simulated cluster (cluster_sim_test.go).
// "pool" has a queue long enough for every acquirer of the load test to
// park; "short" expires fast; "crash" and "crash-strict" have a takeover
// window (max_lease_ttl) of 3s.
const leaseSimLimits = `version: 1
limits:
  - name: pool
    kind: concurrency
    permits: 8
    lease_ttl: 5s
    queue: { length: 256, max_wait: 20s }
  - name: short
    kind: concurrency
    permits: 1
    lease_ttl: 2s
    queue: { length: 4, max_wait: 10s }
  - name: crash
    kind: concurrency
    permits: 8
    lease_ttl: 1s
    max_lease_ttl: 3s
  - name: crash-strict
    kind: concurrency
    permits: 8
    lease_ttl: 1s
    max_lease_ttl: 3s
    strict: true
`

// newLeaseSimCluster is newSimCluster serving leaseSimLimits; call start
// or add on it as usual. Its forward deadline is a generous 5s: these tests
// assert exact permits without faults, and on a loaded 2-core machine under
// -race a forward can exceed 1s, which the node rightly treats as an
// unreachable owner (a fallback grant, or a release that fails).
func newLeaseSimCluster(t *testing.T) *simCluster {
	t.Helper()
	c := newSimCluster(t)
	c.deadline = 5 * time.Second
	if err := os.WriteFile(c.file, []byte(leaseSimLimits), 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

// keyOwnedBy returns a key of limit that member owner owns in n's view.
func keyOwnedBy(n *Node, limit, owner, prefix string) string {
	for i := 0; ; i++ {
		if k := fmt.Sprintf("%s:%d", prefix, i); ownerOf(n, limit, k) == owner {
			return k
		}
	}
}

// held is an interval during which a lease was surely held: from when its
// grant came back to when its release was sent.
type held struct{ from, to time.Time }

// maxHeld returns the most intervals that overlap at one instant. An
// interval ending exactly when another starts does not overlap it, so the
// count can only overstate nothing.
func maxHeld(spans []held) int {
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, s := range spans {
		edges = append(edges, edge{s.from, +1}, edge{s.to, -1})
	}
	sort.Slice(edges, func(i, j int) bool {
		if !edges[i].at.Equal(edges[j].at) {
			return edges[i].at.Before(edges[j].at)
		}
		return edges[i].delta < edges[j].delta // ends before starts
	})
	cur, peak := 0, 0
	for _, e := range edges {
		cur += e.delta
		peak = max(peak, cur)
	}
	return peak
}

// TestClusterLeasesNeverOverGranted: 200 acquirers spread over 3 nodes
// queue for 8 permits of one key, hold briefly and release. Never more
// than 8 are held at once, and every one of them runs.
func TestClusterLeasesNeverOverGranted(t *testing.T) {
	c := newLeaseSimCluster(t)
	c.start(3)
	nodes := []*Node{c.nodes["n1"], c.nodes["n2"], c.nodes["n3"]}
	const acquirers, permits = 200, 8
	const key = "tenant:load"
	var (
		mu      sync.Mutex
		spans   []held
		tokens  = map[uint64]bool{}
		failed  []string
		sources = map[api.Source]int{}
	)
	var wg sync.WaitGroup
	for i := range acquirers {
		wg.Go(func() {
			n := nodes[i%len(nodes)]
			resp, err := n.Acquire(context.Background(), api.AcquireRequest{
				Limit: "pool", Key: key, Holder: fmt.Sprintf("h%d", i), Wait: 10 * time.Second,
			})
			from := time.Now()
			if err != nil || !resp.Granted {
				mu.Lock()
				failed = append(failed, fmt.Sprintf("acquirer %d: %+v, %v", i, resp, err))
				mu.Unlock()
				return
			}
			time.Sleep(time.Millisecond) // the work done under the permit
			to := time.Now()
			err = n.Release(context.Background(), resp.ID)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = append(failed, fmt.Sprintf("release %d: %v", i, err))
			}
			if tokens[resp.FencingToken] {
				failed = append(failed, fmt.Sprintf("fencing token %d issued twice", resp.FencingToken))
			}
			tokens[resp.FencingToken] = true
			sources[resp.Source]++
			spans = append(spans, held{from, to})
		})
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d of %d acquirers failed; first: %s", len(failed), acquirers, failed[0])
	}
	if len(spans) != acquirers || sources[api.SourceOwner] != acquirers {
		t.Fatalf("%d ran (sources %v), want all %d from the owner", len(spans), sources, acquirers)
	}
	peak := maxHeld(spans)
	if peak > permits {
		t.Fatalf("%d leases held at one instant, the limit has %d permits", peak, permits)
	}
	t.Logf("at most %d of %d permits surely held at once", peak, permits)
	owner := c.nodes[ownerOf(nodes[0], "pool", key)]
	waitFor(t, 5*time.Second, "the owner's lease table to empty", func() bool { return owner.eng.LeasesHeld() == 0 })
}

// TestClusterUnrenewedLeaseGoesToWaiter: a holder renews (through another
// node than the owner) and then stops; the lease expires one lease_ttl
// after its last renewal and the permit goes to a caller parked on a third
// node.
func TestClusterUnrenewedLeaseGoesToWaiter(t *testing.T) {
	c := newLeaseSimCluster(t)
	c.start(3)
	const ttl = 2 * time.Second // short's lease_ttl
	key := keyOwnedBy(c.nodes["n1"], "short", "n1", "tenant:exp")
	n1, n2, n3 := c.nodes["n1"], c.nodes["n2"], c.nodes["n3"]
	a, err := n2.Acquire(context.Background(), api.AcquireRequest{Limit: "short", Key: key, Holder: "a"})
	if err != nil || !a.Granted {
		t.Fatalf("first acquire = %+v, %v", a, err)
	}
	type result struct {
		resp api.AcquireResponse
		err  error
		at   time.Time
	}
	got := make(chan result, 1)
	go func() {
		resp, err := n3.Acquire(context.Background(), api.AcquireRequest{Limit: "short", Key: key, Holder: "b", Wait: 8 * time.Second})
		got <- result{resp, err, time.Now()}
	}()
	waitFor(t, 5*time.Second, "the waiter to park at the owner", func() bool {
		return n1.eng.Queued("short", key) == 1
	})
	var lastRenew time.Time
	for range 3 {
		waitFor(t, 5*time.Second, "a third of the lifetime", func() bool { return time.Since(lastRenew) > ttl/3 })
		lastRenew = time.Now()
		if _, err := n2.Renew(context.Background(), a.ID, 0); err != nil {
			t.Fatalf("renewal: %v", err)
		}
	}
	var b result
	select {
	case b = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter got no answer")
	}
	if b.err != nil || !b.resp.Granted {
		t.Fatalf("waiter = %+v, %v; want the expired lease's permit", b.resp, b.err)
	}
	if d := b.at.Sub(lastRenew); d < ttl {
		t.Fatalf("the waiter was granted %v after the holder's last renewal, before the %v lifetime ran out", d, ttl)
	}
	if b.resp.FencingToken <= a.FencingToken {
		t.Fatalf("waiter's fencing token %d not above the expired holder's %d", b.resp.FencingToken, a.FencingToken)
	}
	_, err = n2.Renew(context.Background(), a.ID, 0)
	if e, ok := errors.AsType[*api.Error](err); !ok || e.Code != api.CodeNotFound {
		t.Fatalf("renewing the expired lease = %v, want CodeNotFound", err)
	}
	if err := n2.Release(context.Background(), a.ID); err != nil {
		t.Fatalf("releasing the expired lease = %v, want nil", err)
	}
	if err := n3.Release(context.Background(), b.resp.ID); err != nil {
		t.Fatal(err)
	}
}

// TestClusterKilledOwnerTakeoverWindow: after a crash without handoff, the
// new owner of the dead member's keys does not know which leases are still
// running. For max_lease_ttl after it saw the failure it grants at most the
// local ceiling permits / known members (at least 1), and nothing at all
// for a strict limit; then full permits again. That is the rule when the
// new owner holds no current replica of the dead owner's leases: here
// replication is off (TestReplicationKilledLeaseOwnerGrantsNone has it on).
func TestClusterKilledOwnerTakeoverWindow(t *testing.T) {
	c := newLeaseSimCluster(t)
	c.noReplication = true
	c.start(3)
	n1 := c.nodes["n1"]
	key := keyOwnedBy(n1, "crash", "n3", "tenant:crash")
	skey := keyOwnedBy(n1, "crash-strict", "n3", "tenant:strict")
	// The dead owner held every permit of key; none is handed over.
	for i := range 8 {
		if resp, err := n1.Acquire(context.Background(), api.AcquireRequest{Limit: "crash", Key: key, TTL: 3 * time.Second}); err != nil || !resp.Granted {
			t.Fatalf("acquire %d at the old owner: %+v, %v", i, resp, err)
		}
	}
	c.kill("n3")
	waitFor(t, 15*time.Second, "n3's keys to move", func() bool {
		for _, k := range []struct{ limit, key string }{{"crash", key}, {"crash-strict", skey}} {
			o := ownerOf(n1, k.limit, k.key)
			if o == "n3" || o != ownerOf(c.nodes["n2"], k.limit, k.key) {
				return false
			}
		}
		return true
	})
	owner := c.nodes[ownerOf(n1, "crash", key)]
	sowner := c.nodes[ownerOf(n1, "crash-strict", skey)]
	other := c.nodes["n1"]
	if owner == other {
		other = c.nodes["n2"]
	}
	failedAt := func(n *Node) (time.Time, bool) {
		for _, f := range clusterOf(n).Failures() {
			if f.Name == "n3" {
				return f.At, true
			}
		}
		return time.Time{}, false
	}
	var at, sat time.Time // when the owners of key and skey noted n3's failure
	waitFor(t, 5*time.Second, "the new owners to record n3's failure", func() bool {
		var ok, sok bool
		at, ok = failedAt(owner)
		sat, sok = failedAt(sowner)
		return ok && sok
	})
	const window = 3 * time.Second // crash's max_lease_ttl
	known := clusterOf(owner).Known()
	if known != 3 {
		t.Fatalf("the new owner knows %d members, want 3 (the dead one stays known)", known)
	}
	ceiling := max(1, 8/known)

	// Inside the window: at most the ceiling, asked at the owner and
	// forwarded from the other survivor. The leases ask for the whole
	// window, so none expires in it.
	var grants []api.AcquireResponse
	var lastReturn time.Time
	for i := range 8 {
		n := owner
		if i%2 == 1 {
			n = other
		}
		resp, err := n.Acquire(context.Background(), api.AcquireRequest{Limit: "crash", Key: key, TTL: window})
		lastReturn = time.Now()
		if err != nil {
			t.Fatalf("acquire in the window: %v", err)
		}
		if resp.Granted {
			if resp.Source != api.SourceOwner {
				t.Fatalf("grant in the window from %v, want the owner", resp.Source)
			}
			grants = append(grants, resp)
		} else if resp.RetryAfter <= 0 {
			t.Fatalf("refusal in the window without a retry hint: %+v", resp)
		}
	}
	sresp, err := other.Acquire(context.Background(), api.AcquireRequest{Limit: "crash-strict", Key: skey})
	if err != nil {
		t.Fatal(err)
	}
	sreturn := time.Now()
	if lastReturn.After(at.Add(window)) || sreturn.After(sat.Add(window)) {
		t.Fatalf("the acquires ended %v after the failure was noted, past the %v window: too slow to observe it", sreturn.Sub(at), window)
	}
	if len(grants) != ceiling {
		t.Fatalf("the new owner granted %d leases in the takeover window, want the ceiling %d (8 permits / %d known)", len(grants), ceiling, known)
	}
	if sresp.Granted || sresp.RetryAfter <= 0 || sresp.RetryAfter > window {
		t.Fatalf("strict limit in the window = %+v, want a refusal with a retry hint within %v", sresp, window)
	}

	// After the window: full permits. The window's grants expire by now
	// unless renewed; keep them, so exactly 8 - ceiling more are granted.
	waitFor(t, 5*time.Second, "the takeover window to end", func() bool {
		for _, g := range grants {
			if _, err := owner.Renew(context.Background(), g.ID, window); err != nil {
				t.Fatalf("renewing a window grant: %v", err)
			}
		}
		return time.Since(at) > window && time.Since(sat) > window
	})
	for _, g := range grants {
		if _, err := owner.Renew(context.Background(), g.ID, window); err != nil {
			t.Fatalf("renewing a window grant: %v", err)
		}
	}
	count := func(n *Node, limit, key string, tries int) int {
		got := 0
		for range tries {
			resp, err := n.Acquire(context.Background(), api.AcquireRequest{Limit: limit, Key: key, TTL: window})
			if err != nil {
				t.Fatalf("acquire after the window: %v", err)
			}
			if resp.Granted {
				got++
			}
		}
		return got
	}
	if got := count(other, "crash", key, 10); got != 8-ceiling {
		t.Fatalf("after the window %d more grants beside the %d held, want %d (8 permits)", got, ceiling, 8-ceiling)
	}
	if got := count(sowner, "crash-strict", skey, 10); got != 8 {
		t.Fatalf("strict limit after the window: %d grants, want 8", got)
	}
	// Both survivors agree on the owner throughout.
	if v := clusterOf(owner).View(); !v.Majority || v.Live != 2 {
		t.Fatalf("the survivors' view: live %d, majority %v", v.Live, v.Majority)
	}
	if m, _ := clusterOf(owner).View().Member("n3"); m.State != ring.Dead {
		t.Fatalf("n3 is %v, want dead", m.State)
	}
}
