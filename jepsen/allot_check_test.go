package jepsen

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-rl/weir/node/limits"
)

func take(node, src string, res Outcome, call, cost int64) Op {
	return Op{Node: node, Limit: "l", Key: "k", Cost: cost, Call: call, Return: call + 1000, Result: res, Source: src}
}

// Before the fault, what the bucket itself decided, at its owner or from
// an allotment of it, must fit B + r·T exactly: a local ceiling's
// allowance must not cover an allotment's over-admission.
func TestCheckBucketCountsAllotmentsAsDecided(t *testing.T) {
	b := Bucket{Capacity: 10, Rate: 1}
	phases := []Phase{{"before", 0, 10 * sec}, {"during", 10 * sec, 10 * sec}, {"after", 10 * sec, 10*sec + 1}}
	bd := FaultBound(None, OwnedElsewhere, 3)
	ops := []Op{
		take("n1", "owner", Allowed, 0, 8),
		take("n3", "fallback", Allowed, 0, 1),
	}
	if bc := checkBucket(BucketID{"l", "k"}, ops, b, "n1", OwnedElsewhere, bd, nil, phases); !bc.Pass {
		t.Fatalf("owner 8 + ceiling 1 of B = 10 failed: %+v", bc)
	}
	// An allotment that admits 4 more: the ceiling's allowance (a share
	// of 3) would cover the total of 13, but owner and allotment together
	// admitted 12 > 10.
	ops = append(ops, take("n2", SourceAllotment, Allowed, 0, 4))
	bc := checkBucket(BucketID{"l", "k"}, ops, b, "n1", OwnedElsewhere, bd, nil, phases)
	if bc.Pass || bc.OwnerBefore.Excess < 1.9 {
		t.Fatalf("owner 8 + allotment 4 of B = 10 passed: excess before %v (owner and allotment %v), allowance %v",
			bc.Before.Excess, bc.OwnerBefore.Excess, bc.Allowance)
	}
	if bc.Allotted != 1 {
		t.Fatalf("allotted %d, want 1", bc.Allotted)
	}
}

// An allotment line tells local ceilings' grants from the bucket's own
// over-admission: a killed owner's key over B + r·T only through its
// local ceilings reads an excess without them of 0, and one over it from
// the owner and its allotments does not.
func TestCheckAllotExcessWithoutLocalCeilings(t *testing.T) {
	b := Bucket{Capacity: 10, Rate: 1}
	ops := []Op{take("n1", "owner", Allowed, 0, 6), take("n2", SourceAllotment, Allowed, 0, 4)}
	fallback := append(ops, take("n3", "fallback", Allowed, 0, 5))
	ac := CheckAllot(BucketID{"l", "k"}, fallback, b, "n1", 0)
	if ac.Excess.Excess < 4.9 || ac.Decided.Excess > 1e-6 {
		t.Fatalf("10 decided and 5 by a local ceiling of B = 10: excess %v, without local ceilings %v; want about 5 and 0",
			ac.Excess.Excess, ac.Decided.Excess)
	}
	if s := ac.String(); !strings.Contains(s, "0.0 without local ceilings") {
		t.Fatalf("the line does not tell them apart: %s", s)
	}
	over := append(ops, take("n2", SourceAllotment, Allowed, 0, 3))
	if ac := CheckAllot(BucketID{"l", "k"}, over, b, "n1", 0); ac.Decided.Excess < 2.9 {
		t.Fatalf("13 decided of B = 10: excess without local ceilings %v, want about 3", ac.Decided.Excess)
	}
}

func TestCheckAllot(t *testing.T) {
	b := Bucket{Capacity: 10, Rate: 10}
	from := sec
	ops := []Op{
		// Before From: counted for utilisation only.
		take("n2", "owner", Allowed, 0, 5),
		{Node: "n2", Limit: "l", Key: "k", Cost: 1, Call: 100, Return: 200, Result: Allowed, Source: "owner", Decider: "n1"},
		// From on: at the owner, two answers of its own.
		take("n1", "owner", Allowed, from, 1),
		take("n1", "owner", Denied, from, 1),
		// At non-owners: 5 from an allotment (one denial), 1 forwarded,
		// 1 from a local ceiling (a failed forward), 1 timeout.
		take("n2", SourceAllotment, Allowed, from, 1),
		take("n2", SourceAllotment, Allowed, from, 1),
		take("n3", SourceAllotment, Allowed, from, 1),
		take("n3", SourceAllotment, Allowed, from, 1),
		take("n3", SourceAllotment, Denied, from, 1),
		{Node: "n2", Limit: "l", Key: "k", Cost: 1, Call: from, Return: 2 * sec, Result: Denied, Source: "owner", Decider: "n1"},
		take("n3", "fallback", Allowed, from, 1),
		{Node: "n2", Limit: "l", Key: "k", Cost: 1, Call: from, Return: 2 * sec, Result: Timeout},
	}
	ac := CheckAllot(BucketID{"l", "k"}, ops, b, "n1", from)
	want := AllotCheck{
		ID: BucketID{"l", "k"}, Owner: "n1", From: from,
		Admitted: 5 + 1 + 1 + 4 + 1, Span: 2 * time.Second, Ideal: 10 + 10*2,
		NonOwner: 7, FromAllotment: 5, Requests: 10, Forwarded: 2,
	}
	ac.Excess = Window{}
	if ac.Admitted != want.Admitted || ac.Span != want.Span || ac.Ideal != want.Ideal ||
		ac.NonOwner != want.NonOwner || ac.FromAllotment != want.FromAllotment ||
		ac.Requests != want.Requests || ac.Forwarded != want.Forwarded {
		t.Fatalf("got %+v\nwant %+v", ac, want)
	}
	if got := ac.Failures(); len(got) != 3 {
		// 12/30 admitted, 5/7 from an allotment, 2/10 forwarded: all three miss.
		t.Fatalf("failures %q, want three", got)
	}
	good := AllotCheck{ID: BucketID{"l", "k"}, Utilisation: 0.96, NonOwner: 10, FromAllotment: 8, AllotShare: 0.8, Requests: 100, Forwarded: 4, ForwardShare: 0.04}
	if got := good.Failures(); len(got) != 0 {
		t.Fatalf("targets met, yet failures %q", got)
	}
	good.Excess = Window{Admitted: 31, Ideal: 30, Excess: 1}
	if got := good.Failures(); len(got) != 1 || !strings.Contains(got[0], "1.0 over") {
		t.Fatalf("an excess with no fault: failures %q", got)
	}
}

// The limits file the harness writes must be one Weir accepts, with the
// allotment fields it asked for.
func TestWriteLimitsAllotments(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limits.yaml")
	sc := AllotScenario(DefaultScenario())
	if err := writeLimits(path, sc.Conc, sc.Hot, sc.Cold); err != nil {
		t.Fatal(err)
	}
	f, err := limits.Load(path)
	if err != nil {
		data, _ := os.ReadFile(path)
		t.Fatalf("weir refuses the harness's limits file: %v\n%s", err, data)
	}
	hot, ok := f.Lookup(sc.Hot.Name)
	if !ok {
		t.Fatal("hot limit missing")
	}
	a := hot.Allotments
	if !a.Auto || a.Threshold != 10 || a.Horizon != 50*time.Millisecond || a.TTL != time.Second {
		t.Fatalf("hot allotments %+v, want auto, 10/s, 50ms, 1s", a)
	}
	if cold, _ := f.Lookup(sc.Cold.Name); cold.Allotments.Auto {
		t.Fatal("cold limit allots")
	}
}

// The buckets of a limit with allotments are not replayed: grants debit
// the owner's bucket outside the history.
func TestCheckLinearSkipsAllottingLimits(t *testing.T) {
	sc := AllotScenario(DefaultScenario())
	owner := func(call, remaining int64) Op {
		return Op{
			Limit: sc.Hot.Name, Key: "hot-0", Cost: 1, Call: call, Return: call + 1000, Result: Allowed, Source: "owner",
			Decider: "n1", Instance: "r/1", DecidedAt: call, Remaining: remaining,
		}
	}
	// Two takes 1 µs apart that left 150 and then 100 tokens: a grant of
	// 49 between them, which no history shows.
	ops := []Op{owner(0, 150), owner(1000, 100)}
	var res Result
	checkLinear(&res, sc, ops)
	if len(res.Linear) != 0 || !slices.Equal(res.LinearSkipped, []string{sc.Hot.Name}) {
		t.Fatalf("linear %+v, skipped %v", res.Linear, res.LinearSkipped)
	}
	sc.Hot.Allot = nil
	res = Result{}
	checkLinear(&res, sc, ops)
	if len(res.Linear) != 1 || res.Linear[0].Pass {
		t.Fatalf("without allotments the unseen debit must fail the instance: %+v", res.Linear)
	}
}

// Round-robin callers ask every node in turn.
func TestRunClientsRoundRobin(t *testing.T) {
	nodes := map[string]string{}
	var hits [3]atomic.Int64
	for i := range 3 {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits[i].Add(1)
			fmt.Fprint(w, `{"allowed":true,"results":[{"source":"allotment","remaining":3}]}`)
		}))
		defer srv.Close()
		nodes[Name(i+1)] = srv.URL
	}
	wl := Workload{
		HotLimit: "hot", ColdLimit: "cold", HotKeys: []string{"hot-0"}, ColdKeys: []string{"cold-0"},
		WorkersPerNode: 2, RatePerWorker: 200, HotShare: 1, Deadline: time.Second, Seed: 1,
		RoundRobin: true, UnitCost: true,
	}
	rec := NewRecorder()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { RunClients(ctx, nodes, wl, rec); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for len(rec.Ops()) < 60 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // polling the recorder, not waiting for it
	}
	cancel()
	<-done
	ops := rec.Ops()
	if len(ops) < 60 {
		t.Fatalf("only %d ops in 10 s", len(ops))
	}
	byClient := map[int][]Op{}
	for _, o := range ops {
		byClient[o.Client] = append(byClient[o.Client], o)
		if o.Cost != 1 || o.Source != SourceAllotment || o.Result != Allowed {
			t.Fatalf("op %+v: want cost 1, allowed from an allotment", o)
		}
	}
	if len(byClient) != 6 {
		t.Fatalf("%d callers, want 6", len(byClient))
	}
	for c, cops := range byClient {
		slices.SortFunc(cops, func(a, b Op) int { return int(a.ID - b.ID) })
		for j := 1; j < len(cops); j++ {
			prev, _ := strings.CutPrefix(cops[j-1].Node, "n")
			cur, _ := strings.CutPrefix(cops[j].Node, "n")
			if want := fmt.Sprint(int(prev[0]-'0')%3 + 1); cur != want {
				t.Fatalf("caller %d asked %s after %s, want n%s", c, cops[j].Node, cops[j-1].Node, want)
			}
		}
	}
	for i := range hits {
		if hits[i].Load() == 0 {
			t.Fatalf("node %d never asked", i+1)
		}
	}
}
