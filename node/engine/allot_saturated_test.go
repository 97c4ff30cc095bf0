package engine

import (
	"testing"
	"time"

	"github.com/weir-rl/weir/api"
)

// TestAllotSaturatedKeyIsSharedAndLocal: one key with demand ten times its
// rate at the owner and at two holders alike. Together they admit no more
// than the bucket allows and nearly all of it; each holder gets a fair
// part (the owner's own takes do not starve them); once settled, the
// holders answer from their allotments (tokens or a denial kept or still
// in force while they ask again) instead of forwarding.
func TestAllotSaturatedKeyIsSharedAndLocal(t *testing.T) {
	clk := newTestClock()
	owner := newTestEngine(t, "owner", clk, SingleNode{}, NoPeers{}, &syncs{})
	var holders []*Engine
	var links []*direct
	for _, name := range []string{"h1", "h2"} {
		d := &direct{owner: owner}
		holders = append(holders, newTestEngine(t, name, clk, remote{}, d, &syncs{}))
		links = append(links, d)
	}
	const (
		step    = time.Millisecond
		settle  = time.Second
		total   = 10 * time.Second
		rate    = 100.0 // "fast": 50 tokens, 100/s
		capa    = 50
		perStep = 1 // each node takes once per step: 1000/s against 100/s
	)
	admitted := map[string]int{}
	var asked, local int
	forwardsAtSettle := int64(0)
	for el := time.Duration(0); el < total; el += step {
		if el == settle {
			for _, d := range links {
				forwardsAtSettle += d.takes.Load()
			}
		}
		for range perStep {
			if ok, _ := takeOne(t, owner, "fast", "k", 1); ok {
				admitted["owner"]++
			}
			for _, h := range holders {
				ok, src := takeOne(t, h, "fast", "k", 1)
				if ok {
					admitted[h.holder]++
				}
				if el >= settle {
					asked++
					if src == api.SourceAllotment {
						local++
					}
				}
			}
		}
		// Asks are answered every 5 ms: a round trip to the owner on a
		// loaded machine, during which a holder's takes must not all be
		// forwarded.
		if el%(5*step) == 0 {
			for _, h := range holders {
				driveAsks(h)
			}
		}
		clk.add(step)
	}
	sum := admitted["owner"] + admitted[holders[0].holder] + admitted[holders[1].holder]
	bound := capa + int(rate*total.Seconds())
	var forwards int64
	for _, d := range links {
		forwards += d.takes.Load()
	}
	forwards -= forwardsAtSettle
	t.Logf("admitted %v (sum %d, bound %d); holders after settling: %d of %d answered locally, %d forwarded",
		admitted, sum, bound, local, asked, forwards)
	if sum > bound || float64(sum) < 0.95*float64(bound) {
		t.Fatalf("admitted %d, want at most %d and at least 95%% of it", sum, bound)
	}
	// Equal demand: a third each, give or take the rounding of small
	// claims; the owner's takes and the holders' must not starve either.
	for _, who := range []string{"owner", holders[0].holder, holders[1].holder} {
		if got := admitted[who]; float64(got) < 0.2*float64(sum) {
			t.Errorf("%s admitted %d of %d: starved", who, got, sum)
		}
	}
	if float64(local) < 0.8*float64(asked) || float64(forwards) >= 0.01*float64(asked) {
		t.Errorf("holders answered %d of %d locally and forwarded %d: want ≥ 80%% local, < 1%% forwarded", local, asked, forwards)
	}
}
