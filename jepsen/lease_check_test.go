package jepsen

import (
	"strings"
	"testing"
	"time"
)

const ms = int64(1e6)

// grant is a granted acquire of key k by client c at [call, ret] (ms).
func grant(id string, call, ret int64, ttlMs int64, token uint64) Op {
	return Op{
		Kind: KindAcquire, Limit: "conc", Key: "k", Node: "n1", LeaseID: id,
		Call: call * ms, Return: ret * ms, TTLms: ttlMs, Fencing: token, Result: Allowed,
	}
}

func release(id string, call int64) Op {
	return Op{Kind: KindRelease, Limit: "conc", Key: "k", LeaseID: id, Call: call * ms, Return: (call + 1) * ms, Result: Allowed}
}

func renew(id string, call int64, ttlMs int64, r Outcome) Op {
	return Op{Kind: KindRenew, Limit: "conc", Key: "k", LeaseID: id, Call: call * ms, Return: (call + 1) * ms, TTLms: ttlMs, Result: r}
}

func TestHeldIntervals(t *testing.T) {
	ops := []Op{
		grant("a", 0, 10, 100, 1), // released at 50: [10, 50]
		release("a", 50),          //
		grant("b", 0, 10, 100, 2), // never released: [10, 100]
		grant("c", 0, 10, 100, 3), // renewed at 80 for 100: [10, 180]
		renew("c", 80, 100, Allowed),
		release("c", 200),
		grant("e", 0, 10, 100, 5), // renewed, then lost at 150: [10, 150]
		renew("e", 60, 100, Allowed),
		renew("e", 150, 500, Denied), // a lost renew extends nothing and ends it
		release("e", 300),
		grant("d", 0, 200, 100, 4), // returned after its ttl: empty, dropped
		{Kind: KindAcquire, Key: "k", LeaseID: "", Result: Denied, Call: 0, Return: ms},
	}
	got := HeldIntervals(ops)
	want := map[string][2]int64{"a": {10, 50}, "b": {10, 100}, "c": {10, 180}, "e": {10, 150}}
	if len(got) != len(want) {
		t.Fatalf("got %d intervals %+v, want %d", len(got), got, len(want))
	}
	for _, h := range got {
		w := want[h.ID]
		if h.Start != w[0]*ms || h.End != w[1]*ms {
			t.Errorf("%s: [%d, %d] ms, want %v", h.ID, h.Start/ms, h.End/ms, w)
		}
	}
}

func TestMaxHeld(t *testing.T) {
	iv := []HeldInterval{
		{ID: "a", Start: 0, End: 10},
		{ID: "b", Start: 5, End: 15},
		{ID: "c", Start: 10, End: 20}, // touches a: not counted with it
		{ID: "d", Start: 12, End: 30},
		{ID: "e", Start: 25, End: 40},
	}
	phases := []Phase{{"before", 0, 11}, {"during", 11, 26}, {"after", 26, 100}}
	got := MaxHeld(iv, phases)
	want := []int{2, 3, 2} // before: a+b; during at 12: b,c,d; after at 26: d,e
	for i, p := range got {
		if p.Max != want[i] {
			t.Errorf("%s: max %d at %d, want %d", p.Phase, p.Max, p.At, want[i])
		}
	}
}

func TestFencingCheck(t *testing.T) {
	ops := []Op{
		grant("a", 0, 10, 100, 5),
		grant("b", 5, 20, 100, 3),  // overlaps a: order unknown, fine
		grant("c", 30, 40, 100, 7), // after a and b: 7 > 5, fine
		grant("d", 50, 60, 100, 6), // after c (7): violation
		grant("e", 70, 80, 100, 7), // equal to c's: violation
		grant("f", 90, 95, 100, 8),
	}
	v := FencingCheck(ops)
	if len(v) != 2 || v[0].Later.ID != "d" || v[0].Earlier.ID != "c" || v[1].Later.ID != "e" {
		t.Fatalf("violations %+v, want d and e after c", v)
	}
}

func TestCheckLeasesBound(t *testing.T) {
	l := ConcLimit{Name: "conc", Permits: 2, LeaseTTLms: 1000}
	var ops []Op
	// Three leases held at once before the fault (bound 2): a violation.
	for i, id := range []string{"a", "b", "c"} {
		ops = append(ops, grant(id, int64(i), 10+int64(i), 1000, uint64(i+1)))
		ops = append(ops, release(id, 100))
	}
	phases := []Phase{{"before", 0, 200 * ms}, {"during", 200 * ms, 300 * ms}, {"after", 300 * ms, 400 * ms}}
	bound := func(BucketID) LeaseBound { return NewLeaseBound(l, Kill, OwnedByTarget, 3) }
	owner := func(BucketID) (string, Relation) { return "n1", OwnedByTarget }
	ks := CheckLeases(ops, phases, time.Second, bound, owner)
	if len(ks) != 1 || ks[0].Pass || ks[0].Worst().Max != 3 || ks[0].Worst().Bound != 2 || ks[0].Grants != 3 {
		t.Fatalf("got %+v, want one failing key with 3 held against 2", ks)
	}
	// The same three inside the fault are within permits + takeovers + ceilings.
	for i := range ops {
		ops[i].Call += 250 * ms
		ops[i].Return += 250 * ms
	}
	ks = CheckLeases(ops, phases, time.Second, bound, owner)
	if !ks[0].Pass || ks[0].Phases[1].Max != 3 || ks[0].Phases[0].Max != 0 {
		t.Fatalf("got %+v, want a pass with 3 held during the fault", ks[0])
	}
}

func TestNewLeaseBound(t *testing.T) {
	l := ConcLimit{Permits: 4}
	cases := []struct {
		f      Fault
		rel    Relation
		strict bool
		want   int
	}{
		{Kill, OwnedByTarget, false, 4 + 4 + 3*1}, // replication: no takeover share
		{Kill, OwnedByTarget, true, 4 + 4 + 3*1},
		{Pause, OwnedByTarget, false, 4 + 1 + 4 + 3*1},
		{Isolate, OwnedByTarget, false, 4 + 1 + 4 + 3*1},
		{Isolate, OwnedElsewhere, false, 4 + 3*1},
		{None, OwnedElsewhere, false, 4 + 3*1},
		{Leave, OwnedByTarget, false, 4 + 2*2},
	}
	for _, c := range cases {
		l.Strict = c.strict
		if got := NewLeaseBound(l, c.f, c.rel, 3); got.Faulty != c.want || got.Healthy != 4 {
			t.Errorf("%s %s strict=%v: %+v, want faulty %d", c.f, c.rel, c.strict, got, c.want)
		}
	}
}

func TestLostGrants(t *testing.T) {
	at := int64(5 * time.Second)
	w := int64(LostWindow)
	id := BucketID{"conc", "k"}
	ops := []Op{
		{Kind: KindAcquire, Result: Allowed, Source: "owner", Limit: "conc", Key: "k", Call: at - w/2, Return: at - w/3},
		{Kind: KindAcquire, Result: Allowed, Source: "owner", Limit: "conc", Key: "k", Call: at - 3*w, Return: at - 2*w},
		{Kind: KindAcquire, Result: Allowed, Source: "fallback", Limit: "conc", Key: "k", Call: at - w/2, Return: at - w/3},
		{Kind: KindAcquire, Result: Denied, Source: "owner", Limit: "conc", Key: "k", Call: at - w/2, Return: at - w/3},
		{Kind: KindAcquire, Result: Allowed, Source: "owner", Limit: "conc", Key: "other", Call: at - w/2, Return: at - w/3},
	}
	if got := LostGrants(ops, id, at); got != 1 {
		t.Fatalf("LostGrants = %d, want 1", got)
	}
	lb := NewLeaseBound(ConcLimit{Permits: 4}, Kill, OwnedByTarget, 3).WithLost(2)
	if lb.Faulty != 4+4+3+2 {
		t.Fatalf("WithLost: %+v", lb)
	}
}

func TestTakeOpsKeepsTakes(t *testing.T) {
	ops := []Op{{ID: 1, Limit: "hot"}, {ID: 2, Kind: KindAcquire}, {ID: 3, Limit: "cold"}, {ID: 4, Kind: KindRelease}}
	if got := TakeOps(ops); len(got) != 2 || got[0].ID != 1 || got[1].ID != 3 {
		t.Fatalf("TakeOps = %+v", got)
	}
	if got := LeaseOps(ops); len(got) != 2 || got[0].ID != 2 || got[1].ID != 4 {
		t.Fatalf("LeaseOps = %+v", got)
	}
}

func TestSummaryLeaseColumn(t *testing.T) {
	r := Result{
		Name: "3-kill", Fault: Kill, Pass: true,
		Buckets: []BucketCheck{{ID: BucketID{"hot", "h"}, Relation: OwnedByTarget, Pass: true}},
		Leases: []LeaseKeyCheck{{
			ID: BucketID{"conc", "k"}, Relation: OwnedByTarget,
			Phases:  []PhaseMax{{Phase: "before", Max: 4, Bound: 4}, {Phase: "during", Max: 6, Bound: 9}, {Phase: "after", Max: 10, Bound: 9}},
			Fencing: []FencingViolation{{}},
		}},
	}
	var b strings.Builder
	if err := WriteSummary(&b, []Result{r}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"leases max/bound", "4/4 10/9! f1"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
}

func refused(call int64) Op {
	return Op{Kind: KindAcquire, Limit: "conc", Key: "k", Node: "n2", Call: call * ms, Return: (call + 2) * ms, Result: Denied}
}

// TestLeaks: a refusal while fewer leases than permits could be held is a
// lease the owner did not reclaim; a refusal a possible lease explains is
// not, and neither is one outside a healthy phase.
func TestLeaks(t *testing.T) {
	phases := []Phase{{"before", 0, 1000 * ms}, {"during", 1000 * ms, 2000 * ms}, {"after", 2000 * ms, 3000 * ms}, {"settled", 3000 * ms, 4000 * ms}}
	base := []Op{
		grant("a", 0, 10, 100, 1), // abandoned: possibly held until 10+100
		{Kind: KindAbandon, Limit: "conc", Key: "k", LeaseID: "a", Call: 12 * ms, Return: 12 * ms, Result: Allowed},
		grant("b", 0, 10, 100, 2), // held by a live holder, renewed, released at 500
		renew("b", 60, 100, Allowed),
		renew("b", 120, 100, Allowed),
		renew("b", 180, 100, Allowed),
		renew("b", 240, 100, Allowed),
		renew("b", 300, 100, Allowed),
		renew("b", 360, 100, Allowed),
		renew("b", 420, 100, Allowed),
		release("b", 500),
	}
	cases := []struct {
		name  string
		extra []Op
		leaks int
	}{
		{"a and b possibly held: full", []Op{refused(50)}, 0},
		{"a expired, only b held: leak", []Op{refused(200)}, 1},
		{"the refusal straddles a's expiry: explained", []Op{refused(109)}, 0},
		{"an unseen grant explains it", []Op{refused(200), {Kind: KindAcquire, Key: "k", Call: 150 * ms, Return: 160 * ms, Result: Timeout}}, 0},
		{"during the fault: not judged", []Op{refused(1200)}, 0},
		{"settled: judged", []Op{refused(3500)}, 1},
	}
	for _, c := range cases {
		got := Leaks(append(append([]Op(nil), base...), c.extra...), 2, 100*time.Millisecond, phases)
		if len(got) != c.leaks {
			t.Errorf("%s: %d leaks %+v, want %d", c.name, len(got), got, c.leaks)
			continue
		}
		if c.leaks > 0 && (got[0].MostHeld >= 2 || got[0].Abandoned != 1) {
			t.Errorf("%s: %+v: want fewer than 2 held and the abandoned lease counted", c.name, got[0])
		}
	}
}

// TestHealthyBoundCountsCeilings: a node whose forward missed its deadline
// grants from its local ceiling even in a healthy cluster (a compose pause
// run: 5 held against 4 in the settled phase); each such node adds a share.
func TestHealthyBoundCountsCeilings(t *testing.T) {
	l := ConcLimit{Name: "conc", Permits: 2, LeaseTTLms: 1000}
	phases := []Phase{{"before", 0, 1000 * ms}}
	ops := []Op{grant("a", 0, 10, 1000, 1), grant("b", 0, 10, 1000, 2)}
	fb := grant("c", 20, 30, 1000, 3)
	fb.Node, fb.Source = "n3", "fallback"
	bound := func(BucketID) LeaseBound { return NewLeaseBound(l, None, OwnedElsewhere, 3) }
	owner := func(BucketID) (string, Relation) { return "n1", OwnedElsewhere }
	ks := CheckLeases(append(ops, fb), phases, time.Second, bound, owner)
	if !ks[0].Pass || ks[0].Phases[0].Max != 3 || ks[0].Phases[0].Bound != 3 {
		t.Fatalf("a ceiling grant: got %+v, want 3 held against 2 + 1 share", ks[0].Phases)
	}
	// The same third grant from the owner is over the permits.
	ks = CheckLeases(append(ops, grant("c", 20, 30, 1000, 3)), phases, time.Second, bound, owner)
	if ks[0].Pass || ks[0].Phases[0].Bound != 2 {
		t.Fatalf("an owner grant: got %+v, want a failure against 2", ks[0].Phases)
	}
}

// TestFencingHealthy: within a healthy phase one owner issues every token,
// so a later grant must carry a higher one; across phases and from local
// ceilings the order is only reported.
func TestFencingHealthy(t *testing.T) {
	l := ConcLimit{Name: "conc", Permits: 4, LeaseTTLms: 1000}
	phases := []Phase{{"before", 0, 1000 * ms}, {"during", 1000 * ms, 2000 * ms}, {"after", 2000 * ms, 3000 * ms}, {"settled", 3000 * ms, 4000 * ms}}
	bound := func(BucketID) LeaseBound { return NewLeaseBound(l, Kill, OwnedByTarget, 3) }
	owner := func(BucketID) (string, Relation) { return "n1", OwnedByTarget }
	run := func(ops []Op) LeaseKeyCheck {
		t.Helper()
		ks := CheckLeases(ops, phases, time.Second, bound, owner)
		if len(ks) != 1 {
			t.Fatalf("%d keys", len(ks))
		}
		return ks[0]
	}
	// A takeover during the fault issues lower tokens: reported, not failed.
	k := run([]Op{grant("a", 0, 10, 100, 50), release("a", 50), grant("b", 1500, 1510, 100, 7), release("b", 1550)})
	if !k.Pass || len(k.Fencing) != 1 || len(k.FencingHealthy) != 0 {
		t.Fatalf("across the fault: %+v", k)
	}
	// Two owner grants of the settled phase out of order fail.
	k = run([]Op{grant("c", 3000, 3010, 100, 90), release("c", 3050), grant("d", 3100, 3110, 100, 80), release("d", 3150)})
	if k.Pass || len(k.FencingHealthy) != 1 {
		t.Fatalf("settled, out of order: %+v", k)
	}
	// The same from a local ceiling is only reported.
	d := grant("d", 3100, 3110, 100, 80)
	d.Source = "fallback"
	k = run([]Op{grant("c", 3000, 3010, 100, 90), release("c", 3050), d, release("d", 3150)})
	if !k.Pass || len(k.FencingHealthy) != 0 || len(k.Fencing) != 1 {
		t.Fatalf("a ceiling's token: %+v", k)
	}
}

// TestLostGrantsFiltersAsLostDebits: a lease acquire and a take with the
// same source, result and times are both lost or both kept: the two
// checkers count one crash alike. Each case is one decision, counted by
// LostDebits as a take of cost 1 by the crashed owner and by LostGrants
// as an acquire of the crashed owner's key.
func TestLostGrantsFiltersAsLostDebits(t *testing.T) {
	at := int64(5 * time.Second)
	w := int64(LostWindow)
	id := BucketID{"conc", "k"}
	cases := []struct {
		name         string
		source       string
		result       Outcome
		call, ret    int64
		wantInWindow bool
	}{
		{"owner, in the window", "owner", Allowed, at - w/2, at - w/3, true},
		{"owner, answered after the crash", "owner", Allowed, at - 1, at + w, true},
		{"owner, answered before the window", "owner", Allowed, at - 3*w, at - 2*w, false},
		{"owner, called after the crash", "owner", Allowed, at + 1, at + 2, false},
		{"owner, denied", "owner", Denied, at - w/2, at - w/3, false},
		{"fallback", "fallback", Allowed, at - w/2, at - w/3, false},
		{"allotment", SourceAllotment, Allowed, at - w/2, at - w/3, false},
		{"no source", "", Allowed, at - w/2, at - w/3, false},
	}
	for _, c := range cases {
		take := Op{Result: c.result, Source: c.source, Decider: "n3", Cost: 1, Limit: id.Limit, Key: id.Key, Call: c.call, Return: c.ret}
		grant := take
		grant.Kind, grant.Cost, grant.Decider = KindAcquire, 0, ""
		debits := LostDebits([]Op{take}, map[string]bool{"n3": true}, at)
		grants := LostGrants([]Op{grant}, id, at)
		if want := b01(c.wantInWindow); debits != float64(want) || grants != want {
			t.Errorf("%s: LostDebits %v, LostGrants %d, want both %d", c.name, debits, grants, want)
		}
	}
}

func b01(b bool) int {
	if b {
		return 1
	}
	return 0
}
