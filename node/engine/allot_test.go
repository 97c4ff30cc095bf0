package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/weir-rl/weir/api"
)

// modelHolder follows the allotment protocol as a holder does, with the
// faults a network adds: it spends its tokens only before its deadline
// (TTL after it asked), loses answers, has its asks and returns delivered
// late, and crashes (forgetting what it held).
type modelHolder struct {
	name     string
	tokens   int64
	deadline time.Time
	seq      uint64
}

// live is the tokens the holder may spend at now.
func (h *modelHolder) live(now time.Time) int64 {
	if now.Before(h.deadline) {
		return h.tokens
	}
	return 0
}

// admit is cost admitted at a time, by the owner or a holder.
type admit struct {
	at   time.Time
	cost int64
}

// maxOverWindows checks that over every window [a, b] of the run the
// admitted total is at most capacity + rate·(b − a) and returns the worst
// window's admissions beyond that (0 when exact) and where it was.
func maxOverWindows(as []admit, capacity int64, perSecond float64) (int64, string) {
	var worst int64
	where := ""
	for i := range as {
		var sum int64
		for j := i; j < len(as); j++ {
			sum += as[j].cost
			span := as[j].at.Sub(as[i].at).Seconds()
			if over := sum - capacity - int64(perSecond*span); over > worst {
				worst, where = over, fmt.Sprintf("[%d, %d] over %.3fs", i, j, span)
			}
		}
	}
	return worst, where
}

// TestAllotmentsNeverOverAdmit runs the owner's side against three model
// holders and the owner's own takes, with random steps: asks (some
// answered, some lost, some delivered late with what the holder knew
// then), spending, returns (some delivered late, after a later grant),
// crashes, and a successor that sometimes cannot be told of a grant. Over
// every window the owner and the holders together admit no more than the
// bucket allows: capacity + rate × window.
func TestAllotmentsNeverOverAdmit(t *testing.T) {
	const capacity, rate = 50, 100.0 // allotLimits' "fast"
	for seed := range uint64(30) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			as := runAllotModel(t, seed, 2500)
			if over, where := maxOverWindows(as, capacity, rate); over > 0 {
				t.Fatalf("seed %d: %d admitted beyond the bucket's bound in window %s", seed, over, where)
			}
		})
	}
}

// runAllotModel runs steps random steps of the model and returns what was
// admitted, in time order.
func runAllotModel(t *testing.T, seed uint64, steps int) []admit {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 17))
	clk := newTestClock()
	chg := &syncs{}
	owner := newTestEngine(t, "owner", clk, SingleNode{}, NoPeers{}, chg)
	fast, _ := owner.limits().Lookup("fast")
	ttl := fast.Allotments.TTL
	hs := []*modelHolder{{name: "a"}, {name: "b"}, {name: "c"}}
	var late []func() // asks and returns in flight, delivered at a later step
	var as []admit
	for range steps {
		clk.add(time.Duration(rng.IntN(2000)) * time.Microsecond)
		if rng.IntN(40) == 0 { // a lull: the bucket refills, to full at times, while allotments last
			clk.add(time.Duration(rng.IntN(1000)) * time.Millisecond)
		}
		now := clk.now()
		h := hs[rng.IntN(len(hs))]
		switch op := rng.IntN(100); {
		case op < 25: // the owner's own take
			cost := 1 + rng.Int64N(3)
			if ok, _ := takeOne(t, owner, "fast", "k", cost); ok {
				as = append(as, admit{now, cost})
			}
		case op < 65: // a holder spends
			if cost := 1 + rng.Int64N(3); h.live(now) >= cost {
				h.tokens -= cost
				as = append(as, admit{now, cost})
			}
		case op < 85: // a holder asks
			req := api.AllotRequest{Limit: "fast", Key: "k", Holder: h.name, Want: 1 + rng.Int64N(15), Demand: float64(1 + rng.IntN(50)), Unspent: h.live(now), Seq: h.seq}
			ask := func() (api.AllotResponse, error) { return owner.ServeAllot(ctx, req) }
			fate := rng.IntN(10)
			if fate == 0 { // delivered late: the holder gave up on it
				late = append(late, func() { _, _ = ask() })
			} else {
				chg.fail.Store(fate == 1)
				clk.add(time.Duration(rng.IntN(3)) * time.Millisecond) // in flight
				resp, err := ask()
				chg.fail.Store(false)
				if err != nil || fate == 2 { // refused, or the answer is lost
					continue
				}
				if !clk.now().Before(h.deadline) {
					h.tokens = 0
				}
				h.tokens += resp.Tokens
				h.deadline, h.seq = now.Add(ttl), resp.Seq
			}
		case op < 93: // a holder returns what it has, and forgets it
			req := api.ReturnRequest{Limit: "fast", Key: "k", Holder: h.name, Unspent: h.live(now), Seq: h.seq}
			*h = modelHolder{name: h.name}
			if rng.IntN(3) == 0 {
				late = append(late, func() { _ = owner.ServeReturn(req) })
			} else if err := owner.ServeReturn(req); err != nil {
				t.Fatalf("return: %v", err)
			}
		case op < 95: // a holder crashes: what it held is lost
			*h = modelHolder{name: h.name}
		default: // something in flight arrives
			if len(late) > 0 {
				i := rng.IntN(len(late))
				late[i]()
				late = append(late[:i], late[i+1:]...)
			}
		}
	}
	return as
}

// TestAllotUndoneWhenTheSuccessorCannotBeTold: a grant the successor
// never confirms is not answered, and its tokens are back in the bucket.
func TestAllotUndoneWhenTheSuccessorCannotBeTold(t *testing.T) {
	clk := newTestClock()
	chg := &syncs{}
	owner := newTestEngine(t, "owner", clk, SingleNode{}, NoPeers{}, chg)
	chg.fail.Store(true)
	req := api.AllotRequest{Limit: "hot", Key: "k", Holder: "a", Want: 10, Demand: 100}
	if resp, err := owner.ServeAllot(context.Background(), req); err == nil || resp.Tokens != 0 {
		t.Fatalf("allot with the successor unreachable = %+v, %v; want an error and no tokens", resp, err)
	}
	if chg.calls.Load() != 1 {
		t.Fatalf("%d syncs, want 1", chg.calls.Load())
	}
	// The whole capacity is the owner's again.
	if ok, _ := takeOne(t, owner, "hot", "k", 50); !ok {
		t.Fatal("the undone grant's tokens did not come back")
	}
	chg.fail.Store(false)
	clk.add(time.Second) // 20 tokens
	resp, err := owner.ServeAllot(context.Background(), req)
	if err != nil || resp.Tokens != 10 || resp.Seq == 0 {
		t.Fatalf("allot with the successor reachable = %+v, %v; want 10 tokens", resp, err)
	}
}

// TestAllotReturnUnderAnOldSeqChangesNothing: a return that crossed a
// later grant leaves that grant outstanding, and the matching return
// gives the unspent tokens back.
func TestAllotReturnUnderAnOldSeqChangesNothing(t *testing.T) {
	ctx := context.Background()
	clk := newTestClock()
	owner := newTestEngine(t, "owner", clk, SingleNode{}, NoPeers{}, &syncs{})
	first, err := owner.ServeAllot(ctx, api.AllotRequest{Limit: "hot", Key: "k", Holder: "a", Want: 10, Demand: 100})
	if err != nil || first.Tokens != 10 {
		t.Fatalf("first allot = %+v, %v", first, err)
	}
	second, err := owner.ServeAllot(ctx, api.AllotRequest{Limit: "hot", Key: "k", Holder: "a", Want: 10, Demand: 100, Unspent: 10, Seq: first.Seq})
	if err != nil || second.Tokens != 10 || second.Seq == first.Seq {
		t.Fatalf("refresh = %+v, %v", second, err)
	}
	// The first grant's return arrives late: ignored, 20 stay outstanding.
	if err := owner.ServeReturn(api.ReturnRequest{Limit: "hot", Key: "k", Holder: "a", Unspent: 10, Seq: first.Seq}); err != nil {
		t.Fatal(err)
	}
	if ok, _ := takeOne(t, owner, "hot", "k", 31); ok {
		t.Fatal("the owner took 31 of 30 left: a stale return released the holding")
	}
	if ok, _ := takeOne(t, owner, "hot", "k", 30); !ok {
		t.Fatal("the owner could not take the 30 it has")
	}
	// The holder spent 5 of its 20 and returns 15 under the current seq.
	if err := owner.ServeReturn(api.ReturnRequest{Limit: "hot", Key: "k", Holder: "a", Unspent: 15, Seq: second.Seq}); err != nil {
		t.Fatal(err)
	}
	if ok, _ := takeOne(t, owner, "hot", "k", 16); ok {
		t.Fatal("the owner took 16 after 15 came back")
	}
	if ok, _ := takeOne(t, owner, "hot", "k", 15); !ok {
		t.Fatal("the 15 returned did not come back")
	}
}

// TestAllotExpiryIsSettledAtItsTime: while a holding is outstanding the
// owner refills only up to capacity minus it; once it expires, the
// capacity rises from its expiry on, not from before.
func TestAllotExpiryIsSettledAtItsTime(t *testing.T) {
	clk := newTestClock()
	owner := newTestEngine(t, "owner", clk, SingleNode{}, NoPeers{}, &syncs{})
	if resp, err := owner.ServeAllot(context.Background(), api.AllotRequest{Limit: "hot", Key: "k", Holder: "a", Want: 12, Demand: 100}); err != nil || resp.Tokens != 12 {
		t.Fatalf("allot = %+v, %v", resp, err)
	}
	if ok, _ := takeOne(t, owner, "hot", "k", 38); !ok {
		t.Fatal("the owner could not take its 38")
	}
	// 400ms refill 8 tokens under a capacity of 38; the holding (TTL
	// 500ms) expires at 500ms; at 1s, 0.5s after the expiry, 10 more came
	// under the full capacity: 8 + 2 (to 500ms) + 10 = 20.
	clk.add(time.Second)
	if ok, _ := takeOne(t, owner, "hot", "k", 21); ok {
		t.Fatal("took 21: the expired holding's capacity counted refill from before its expiry")
	}
	if ok, _ := takeOne(t, owner, "hot", "k", 20); !ok {
		t.Fatal("could not take the 20 refilled")
	}
}

// TestAllotLateAskKeepsTheHolding: an ask the holder gave up on, arriving
// after a later grant with what the holder had then (nothing), does not
// shrink the holding the owner records: the holder still has the later
// grant's tokens, so the owner's capacity stays reduced by them.
func TestAllotLateAskKeepsTheHolding(t *testing.T) {
	ctx := context.Background()
	clk := newTestClock()
	owner := newTestEngine(t, "owner", clk, SingleNode{}, NoPeers{}, &syncs{})
	late := api.AllotRequest{Limit: "fast", Key: "k", Holder: "a", Want: 5, Demand: 50} // sent first, with nothing held
	grant, err := owner.ServeAllot(ctx, api.AllotRequest{Limit: "fast", Key: "k", Holder: "a", Want: 10, Demand: 50})
	if err != nil || grant.Tokens != 10 {
		t.Fatalf("allot = %+v, %v", grant, err)
	}
	if ok, _ := takeOne(t, owner, "fast", "k", 40); !ok {
		t.Fatal("the owner could not take its 40")
	}
	if resp, err := owner.ServeAllot(ctx, late); err != nil || resp.Tokens != 0 || resp.RetryAfter <= 0 {
		t.Fatalf("the late ask on an empty bucket = %+v, %v; want a denial", resp, err)
	}
	// 600ms refill the owner's 40 (at 100/s) but not the holder's 10,
	// which it may spend until 1s after it asked.
	clk.add(600 * time.Millisecond)
	if ok, _ := takeOne(t, owner, "fast", "k", 41); ok {
		t.Fatal("the owner took 41: the late ask released the holder's 10")
	}
	if ok, _ := takeOne(t, owner, "fast", "k", 40); !ok {
		t.Fatal("the owner could not take the 40 refilled")
	}
}
