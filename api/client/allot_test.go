package client_test

import (
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/api/client"
)

// These tests run clients with allotments against real nodes (cluster_test.go):
// the "allotted" limit holds 1000 tokens and refills 1 an hour, so every
// token a test sees admitted was in the bucket when it began.

// allotOpts are client options with allotments on at a low threshold.
func allotOpts() client.Options {
	return client.Options{Allot: client.AllotOptions{On: true, Threshold: 10}}
}

// tally counts answers by outcome and source.
type tally struct {
	allowed, denied, failed, fromAllotment atomic.Int64
}

func (tl *tally) add(resp api.TakeResponse, err error) {
	switch {
	case err != nil:
		tl.failed.Add(1)
		return
	case resp.Allowed:
		tl.allowed.Add(1)
	default:
		tl.denied.Add(1)
	}
	if resp.Results[0].Source == api.SourceAllotment {
		tl.fromAllotment.Add(1)
	}
}

// Three clients with allotments, each dialled through another member, and
// one plain client spend one key concurrently: together they admit exactly
// the bucket (never more: the owner debits every allotment first), most
// answers come from allotments, and the key over its limit is denied
// locally.
func TestClientAllotmentsAreExact(t *testing.T) {
	tc := newTestCluster(t)
	tc.start(3)
	nodes := tc.running()
	plain := dial(t, nodes["n1"], client.Options{})
	tc.waitSettled(plain)
	var holders []*client.Client
	for _, n := range []string{"n1", "n2", "n3"} {
		holders = append(holders, dial(t, nodes[n], allotOpts()))
	}
	const key = "hot"
	var tl tally
	// Demand shows in a client's meter once a window has passed, so the
	// holders first take until each has decided a take from an allotment
	// (the owner's answer to its first ask); how many takes that needs
	// depends on how fast the node answers, not on allotments.
	for _, c := range holders {
		for n := 0; c.Stats().Allotted == 0; n++ {
			if n == 1_000_000 {
				t.Fatal("a holder decided nothing from an allotment in a million takes")
			}
			tl.add(c.Take(t.Context(), api.Check{Limit: "allotted", Key: key}))
		}
	}
	var before uint64
	for _, c := range holders {
		before += c.Stats().Allotted
	}
	var wg sync.WaitGroup
	for _, c := range append(holders, plain) {
		for range 4 {
			wg.Go(func() {
				for range 800 {
					tl.add(c.Take(t.Context(), api.Check{Limit: "allotted", Key: key}))
				}
			})
		}
	}
	wg.Wait()
	total := tl.allowed.Load() + tl.denied.Load() + tl.failed.Load()
	t.Logf("allowed %d, denied %d, failed %d, from allotments %d of %d", tl.allowed.Load(), tl.denied.Load(), tl.failed.Load(), tl.fromAllotment.Load(), total)
	if tl.failed.Load() != 0 || tl.allowed.Load() > 1000 {
		t.Fatalf("allowed %d (bucket 1000), failed %d", tl.allowed.Load(), tl.failed.Load())
	}
	// Tokens still held by the clients are not yet spent; every take beyond
	// the first 1000 is denied, so what the clients hold at the end is what
	// the bucket has left, returned on Close.
	var asks, allotted uint64
	for _, c := range holders {
		asks += c.Stats().AllotAsks
		allotted += c.Stats().Allotted
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := plain.Take(t.Context(), api.Check{Limit: "allotted", Key: key, Cost: 1})
	if err != nil {
		t.Fatal(err)
	}
	left := int64(0)
	if resp.Allowed {
		left = resp.Results[0].Remaining + 1
	}
	if got := tl.allowed.Load() + left; got != 1000 {
		t.Fatalf("admitted %d + left in the bucket after Close %d = %d, want the bucket's 1000", tl.allowed.Load(), left, got)
	}
	// The plain client's takes always go to the owner: "most" is of the
	// holders' own concurrent takes (3 clients × 4 callers × 800).
	const holderTakes = 3 * 4 * 800
	if asks == 0 || allotted-before < holderTakes/2 {
		t.Fatalf("%d asks, %d of the holders' %d concurrent takes decided from allotments; want most", asks, allotted-before, holderTakes)
	}
}

// Close gives back what the client holds: the owner's bucket shows the
// returned tokens, and a client that holds nothing asks for nothing more.
func TestClientAllotmentsReturnedOnClose(t *testing.T) {
	tc := newTestCluster(t)
	tc.start(1)
	n := tc.running()["n1"]
	c := dial(t, n, allotOpts())
	spent := 0
	waitUntil(t, 10*time.Second, "a take decided from an allotment", func() bool {
		resp, err := c.Take(t.Context(), api.Check{Limit: "allotted", Key: "k"})
		if err != nil || !resp.Allowed {
			t.Fatalf("take %d: %+v, %v", spent, resp, err)
		}
		spent++
		return resp.Results[0].Source == api.SourceAllotment
	})
	st := c.Stats()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if c.Stats().AllotReturns == st.AllotReturns {
		t.Fatalf("Close returned nothing: %+v", c.Stats())
	}
	plain := dial(t, n, client.Options{})
	resp, err := plain.Take(t.Context(), api.Check{Limit: "allotted", Key: "k"})
	if err != nil || !resp.Allowed {
		t.Fatalf("take after Close: %+v, %v", resp, err)
	}
	if want := int64(1000 - spent - 1); resp.Results[0].Remaining != want {
		t.Fatalf("after %d takes and Close the bucket has %d left, want %d (the unspent allotment back)", spent, resp.Results[0].Remaining, want)
	}
}

// A limit without allotments is decided by its owner: the refused ask
// turns allotments of the limit off for a while rather than ask per take.
func TestClientAllotmentsRefusedFallsBackToOwner(t *testing.T) {
	tc := newTestCluster(t)
	tc.start(1)
	c := dial(t, tc.running()["n1"], allotOpts())
	take := func(i int) {
		resp, err := c.Take(t.Context(), api.Check{Limit: "exact", Key: "k"})
		if err != nil || !resp.Allowed || resp.Results[0].Source != api.SourceOwner {
			t.Fatalf("take %d: %+v, %v", i, resp, err)
		}
	}
	i := 0
	// The demand shows once a meter window (100 ms) of takes has ended.
	waitUntil(t, 5*time.Second, "the refused ask", func() bool {
		i++
		take(i)
		return c.Stats().AllotFailures > 0
	})
	for range 400 {
		i++
		take(i)
	}
	if st := c.Stats(); st.AllotAsks != 1 || st.AllotFailures != 1 || st.Allotted != 0 {
		t.Fatalf("stats %+v: want one refused ask and nothing allotted", st)
	}
}

func TestAllotOptionsValidate(t *testing.T) {
	for _, o := range []client.AllotOptions{
		{On: true, Threshold: math.NaN()},
		{On: true, Threshold: -1},
		{On: true, Threshold: math.Inf(1)},
		{On: true, Horizon: time.Microsecond},
		{On: true, Horizon: time.Minute},
		{On: true, MaxKeys: -1},
		{On: true, Holder: string(make([]byte, 513))},
	} {
		if err := (client.Options{Allot: o}).Validate(); err == nil {
			t.Errorf("%+v: valid, want an error", o)
		}
	}
	if err := (client.Options{Allot: client.AllotOptions{On: true, Horizon: 10 * time.Millisecond}}).Validate(); err != nil {
		t.Error(err)
	}
}
