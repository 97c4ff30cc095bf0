package client_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/api/client"
)

// The tests here run against real nodes in process, started by the
// harness in cluster_harness_test.go (testCluster).

func TestDialRoutesEveryTakeToItsOwner(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) { testDialRoutes(t, tr.opt) })
	}
}

func testDialRoutes(t *testing.T, tr client.Transport) {
	tc := newTestCluster(t)
	tc.start(3)
	n1 := tc.running()["n1"]
	c := dial(t, n1, client.Options{Transport: tr})
	defer checkTransport(t, c, tr)
	ks := keys("route", 300)
	if !agrees(c, n1, "wide", ks) {
		t.Fatal("the client's owners differ from the node's")
	}
	// A false suspicion on a loaded machine changes a member's view and
	// may route a key through a forward; a pass whose answers carry more
	// than one ring epoch is run again once settled, three times at most.
	var before float64
	for attempt := 1; ; attempt++ {
		tc.waitSettled(c)
		before = tc.forwards()
		owners := map[string]int{}
		epochs := map[uint64]bool{}
		var bad string
		for _, k := range ks {
			resp, err := c.Take(t.Context(), api.Check{Limit: "wide", Key: k, Cost: 1})
			if err != nil {
				t.Fatalf("take %s: %v", k, err)
			}
			epochs[resp.RingEpoch] = true
			if bad == "" && (!resp.Allowed || resp.Forwarded || resp.Results[0].Source != api.SourceOwner || resp.RingEpoch == 0) {
				bad = fmt.Sprintf("take %s = %+v; want allowed, decided by its owner, not forwarded, with an epoch", k, resp)
			}
			o, _ := c.Owner("wide", k)
			owners[o]++
		}
		after := tc.forwards()
		if len(epochs) > 1 && attempt < 3 {
			continue // the ring moved under the pass
		}
		if bad != "" {
			t.Fatal(bad)
		}
		if len(owners) != 3 {
			t.Fatalf("keys went to %v; want all three members", owners)
		}
		if after != before {
			t.Fatalf("members forwarded %v batches during routed takes; want none", after-before)
		}
		break
	}
	// A multi-check over one hash tag goes to the tag's owner as one step.
	resp, err := c.Take(t.Context(), api.Check{Limit: "wide", Key: "{t1}a"}, api.Check{Limit: "exact", Key: "{t1}b"})
	if err != nil || !resp.Allowed || resp.Forwarded {
		t.Fatalf("hash-tagged multi-check = %+v, %v; want allowed at the owner", resp, err)
	}
	if after := tc.forwards(); after != before {
		t.Fatal("a hash-tagged multi-check was forwarded")
	}
}

// TestClientConvergesAfterJoinLeaveKill runs a join, a graceful leave and
// a kill under four callers, over both transports. No take may fail,
// except that during the kill a take sent while a killed owner's peers
// still forward to it fails limiter_overloaded after the forward deadline
// (node behaviour). The RESP path's own part of a kill, a connection
// breaking under a take, is TestLeanConnKilledMidTake's; what a leave
// hands over, TestLeaveWithOpenStreamKeepsDebt's.
func TestClientConvergesAfterJoinLeaveKill(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) { testConverges(t, tr.opt) })
	}
}

func testConverges(t *testing.T, tr client.Transport) {
	tc := newTestCluster(t)
	tc.start(3)
	n1 := tc.running()["n1"]
	c := dial(t, n1, client.Options{MinRefreshInterval: 20 * time.Millisecond, Transport: tr})
	ks := keys("conv", 200)

	// Callers keep taking throughout; none may fail, except that while a
	// killed owner is still held alive by gossip a take forwarded to it
	// is answered limiter_overloaded (the node's rule for a live owner that
	// does not answer in time), admitting nothing.
	var failures, overloaded atomic.Int64
	var overloadOK atomic.Bool
	var firstErr atomic.Value
	var taken atomic.Int64
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := g; ctx.Err() == nil; i += 4 {
				_, err := c.Take(ctx, api.Check{Limit: "wide", Key: ks[i%len(ks)], Cost: 1})
				if apiErr, ok := errors.AsType[*api.Error](err); ok && apiErr.Code == api.CodeOverloaded && overloadOK.Load() {
					overloaded.Add(1)
				} else if err != nil && ctx.Err() == nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
				taken.Add(1)
			}
		})
	}
	defer func() {
		stop()
		wg.Wait()
	}()
	// converged checks the client after a change made when it had installed
	// before rings.
	converged := func(what string, before uint64) {
		t.Helper()
		tc.waitConverged()
		waitUntil(t, 20*time.Second, "the client to converge after "+what, func() bool {
			return agrees(c, n1, "wide", ks)
		})
		// Routed by the new ring, takes are decided where they are sent.
		waitUntil(t, 10*time.Second, "unforwarded takes after "+what, func() bool {
			for _, k := range ks[:50] {
				resp, err := c.Take(t.Context(), api.Check{Limit: "wide", Key: k, Cost: 1})
				if err != nil || resp.Forwarded {
					return false
				}
			}
			return true
		})
		if n := failures.Load(); n > 0 {
			t.Fatalf("%d takes failed by %s (first: %v)", n, what, firstErr.Load())
		}
		st := c.Stats()
		if st.RingUpdates == before {
			t.Fatalf("the client converged after %s without fetching a ring", what)
		}
		t.Logf("after %s: %+v", what, st)
	}

	rings := c.Stats().RingUpdates
	tc.add("n4", "10.0.0.4", "10.0.0.1")
	converged("a join", rings)
	if o := ownersOf(c, ks); o["n4"] == 0 {
		t.Fatalf("after the join the client routes nothing to n4: %v", o)
	}
	rings = c.Stats().RingUpdates
	tc.leave("n2")
	converged("a leave", rings)
	checkTransport(t, c, tr)
	rings = c.Stats().RingUpdates
	overloadOK.Store(true)
	tc.kill("n3")
	converged("a kill", rings)
	t.Logf("takes answered limiter_overloaded while n3 was dead but not yet suspect: %d", overloaded.Load())
	if o := ownersOf(c, ks); o["n2"]+o["n3"] != 0 || len(o) != 2 {
		t.Fatalf("after a leave and a kill the client routes to %v; want n1 and n4 only", o)
	}
	if taken.Load() < 100 {
		t.Fatalf("only %d takes ran during the changes", taken.Load())
	}
}

func ownersOf(c *client.Client, ks []string) map[string]int {
	out := map[string]int{}
	for _, k := range ks {
		o, _ := c.Owner("wide", k)
		out[o]++
	}
	return out
}

func TestClientConcurrentTakesAreExact(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) { testConcurrentTakes(t, tr.opt) })
	}
}

func testConcurrentTakes(t *testing.T, tr client.Transport) {
	tc := newTestCluster(t)
	tc.start(3)
	c := dial(t, tc.running()["n2"], client.Options{Transport: tr})
	defer checkTransport(t, c, tr)
	// Settled: a new owner's first take within the handoff window pulls the
	// bucket from the previous owner, and a pull that times out on a loaded
	// machine is decided from a local ceiling; that is the node's rule for
	// a moving ring, not the client path measured here.
	tc.waitSettled(c)
	const callers = 1200
	var allowed, denied, failed, fallback, forwarded atomic.Int64
	var wg sync.WaitGroup
	startGate := make(chan struct{})
	for range callers {
		wg.Go(func() {
			<-startGate
			resp, err := c.Take(t.Context(), api.Check{Limit: "exact", Key: "one-bucket", Cost: 1})
			switch {
			case err != nil:
				failed.Add(1)
			case resp.Allowed:
				allowed.Add(1)
			default:
				denied.Add(1)
			}
			if err == nil && resp.Results[0].Source == api.SourceFallback {
				fallback.Add(1)
			}
			if err == nil && resp.Forwarded {
				forwarded.Add(1)
			}
		})
	}
	close(startGate)
	wg.Wait()
	if allowed.Load() != 1000 || denied.Load() != 200 || failed.Load() != 0 {
		t.Fatalf("allowed %d, denied %d, failed %d of %d (%d from local ceilings, %d forwarded); want exactly 1000 allowed, 200 denied",
			allowed.Load(), denied.Load(), failed.Load(), callers, fallback.Load(), forwarded.Load())
	}
}

// A check with an inline limit reaches the node with its parameters (it
// was once sent as a named limit, which the node does not know).
func TestClientSendsInlineLimits(t *testing.T) {
	tc := newTestCluster(t)
	tc.start(1)
	c := dial(t, tc.running()["n1"], client.Options{})
	in := &api.InlineLimit{Capacity: 2, Rate: "1/h"}
	var got []bool
	for range 3 {
		resp, err := c.Take(t.Context(), api.Check{Limit: "per-user", Key: "u1", Inline: in})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, resp.Allowed)
	}
	if got[0] != true || got[1] != true || got[2] != false {
		t.Fatalf("allowed %v, want [true true false] (capacity 2)", got)
	}
}
