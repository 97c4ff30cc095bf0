package jepsen

import (
	"bytes"
	"math"
	"reflect"
	"testing"
	"time"
)

const sec = int64(time.Second)

func allowed(call, ret, cost int64) Op {
	return Op{Limit: "l", Key: "k", Cost: cost, Call: call, Return: ret, Result: Allowed}
}

// idealHistory replays requests every step ns through an exact bucket and
// returns the allowed ones with a [t, t+lat] interval.
func idealHistory(b Bucket, n int, step, lat int64) []Op {
	tokens, last := b.Capacity, int64(0)
	var ops []Op
	for i := range n {
		t := int64(i) * step
		tokens = math.Min(b.Capacity, tokens+b.Rate*float64(t-last)/1e9)
		last = t
		if tokens >= 1 {
			tokens--
			ops = append(ops, allowed(t-lat/2, t+lat/2+1, 1))
		}
	}
	return ops
}

func TestExcessExactBucketIsZero(t *testing.T) {
	b := Bucket{Capacity: 10, Rate: 5}
	ops := idealHistory(b, 5000, int64(time.Millisecond)*3, int64(time.Millisecond))
	w := Excess(ops, b, math.MinInt64, math.MaxInt64)
	if w.Excess != 0 {
		t.Fatalf("exact bucket: excess %v in %+v, want 0", w.Excess, w)
	}
	if w.Admitted == 0 {
		t.Fatal("no window found")
	}
}

func TestExcessTwoOwnersDoubleAdmit(t *testing.T) {
	b := Bucket{Capacity: 10, Rate: 5}
	a := idealHistory(b, 3000, int64(time.Millisecond)*4, int64(time.Millisecond))
	c := idealHistory(b, 3000, int64(time.Millisecond)*4, int64(time.Millisecond))
	ops := append(a, c...)
	// Over 12 s two exact buckets admit 2*(10+5*12) = 140; the ideal is 70.
	w := Excess(ops, b, math.MinInt64, math.MaxInt64)
	if w.Excess < 65 || w.Excess > 72 {
		t.Fatalf("two buckets: excess %v, want about 70 (%+v)", w.Excess, w)
	}
	if r := w.Ratio(); r < 0.9 || r > 1.05 {
		t.Fatalf("ratio %v, want about 1", r)
	}
}

func TestExcessSteps(t *testing.T) {
	b := Bucket{Capacity: 2, Rate: 1}
	tests := []struct {
		name string
		ops  []Op
		want float64
	}{
		{"empty", nil, 0},
		{"burst within capacity", []Op{allowed(0, 1, 1), allowed(0, 1, 1)}, 0},
		{"one over capacity", []Op{allowed(0, 1, 1), allowed(0, 1, 1), allowed(0, 1, 1)}, 1 - 1e-9},
		{"weighted cost", []Op{allowed(0, 10, 3)}, 1 - 10e-9},
		{"refill earns", []Op{allowed(0, 1, 2), allowed(sec, sec+1, 1)}, 0},
		// Long intervals can hide an excess: only what surely fell inside a
		// window counts. Three ops each spanning 2 s: the window [0, 2s]
		// holds all three, ideal 2 + 2 = 4.
		{"wide intervals are conservative", []Op{allowed(0, 2*sec, 1), allowed(0, 2*sec, 1), allowed(0, 2*sec, 1)}, 0},
		{"denied and timeouts never count", []Op{
			allowed(0, 1, 2),
			{Cost: 5, Call: 0, Return: 1, Result: Denied},
			{Cost: 5, Call: 0, Return: 1, Result: Timeout},
			{Cost: 5, Call: 0, Return: 1, Result: Failed},
		}, 0},
		{"backwards interval ignored", []Op{allowed(5, 1, 3)}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := Excess(tc.ops, b, math.MinInt64, math.MaxInt64)
			if math.Abs(w.Excess-tc.want) > 1e-6 {
				t.Fatalf("excess %v, want %v (%+v)", w.Excess, tc.want, w)
			}
		})
	}
}

func TestExcessRespectsRange(t *testing.T) {
	b := Bucket{Capacity: 1, Rate: 1}
	ops := []Op{allowed(0, 1, 1), allowed(0, 1, 1), allowed(10*sec, 10*sec+1, 1)}
	if w := Excess(ops, b, 5*sec, 20*sec); w.Excess != 0 {
		t.Fatalf("ops outside the range counted: %+v", w)
	}
	if w := Excess(ops, b, 0, 20*sec); w.Excess < 0.99 {
		t.Fatalf("excess inside the range missed: %+v", w)
	}
}

// TestExcessNeverAboveTruth checks the checker's soundness against a
// brute-force truth: with random decision times inside each op's interval
// the true max-window excess is never below what the checker reports.
func TestExcessNeverAboveTruth(t *testing.T) {
	b := Bucket{Capacity: 3, Rate: 2}
	seed := uint64(1)
	rnd := func(n int64) int64 { seed = seed*6364136223846793005 + 1442695040888963407; return int64(seed>>33) % n }
	for trial := range 200 {
		var ops []Op
		var at []int64
		for range 30 {
			d := rnd(4 * sec)
			call := d - rnd(sec/2)
			ops = append(ops, allowed(call, d+rnd(sec/2), 1+rnd(2)))
			at = append(at, d)
		}
		// The truth: windows over exact decision times.
		exact := make([]Op, len(ops))
		for i, o := range ops {
			exact[i] = allowed(at[i], at[i], o.Cost)
		}
		truth := Excess(exact, b, math.MinInt64, math.MaxInt64).Excess
		got := Excess(ops, b, math.MinInt64, math.MaxInt64).Excess
		if got > truth+1e-9 {
			t.Fatalf("trial %d: checker reports %v above the truth %v", trial, got, truth)
		}
	}
}

// TestLostDebits: only the crashed owner's allowed decisions answered
// within LostWindow before the crash count.
func TestLostDebits(t *testing.T) {
	at := int64(10 * time.Second)
	w := int64(LostWindow)
	ops := []Op{
		{Result: Allowed, Source: "owner", Decider: "n3", Cost: 2, Call: at - w/2, Return: at - w/4},   // in
		{Result: Allowed, Source: "owner", Decider: "n3", Cost: 1, Call: at - 2*w, Return: at - w - 1}, // answered before the window
		{Result: Allowed, Source: "owner", Decider: "n1", Cost: 5, Call: at - w/2, Return: at - w/4},   // another owner
		{Result: Denied, Source: "owner", Decider: "n3", Cost: 3, Call: at - w/2, Return: at - w/4},    // denied
		{Result: Allowed, Source: "fallback", Cost: 3, Call: at - w/2, Return: at - w/4},               // a ceiling's
		{Result: Allowed, Source: "owner", Decider: "n3", Cost: 3, Call: at - 1, Return: at + w},       // called before, answered after: may be lost
		{Result: Allowed, Source: "owner", Decider: "n3", Cost: 4, Call: at + 1, Return: at + 2},       // after the crash
	}
	if got := LostDebits(ops, map[string]bool{"n3": true}, at); got != 5 {
		t.Fatalf("LostDebits = %v, want 2 + 3", got)
	}
}

func TestFaultBound(t *testing.T) {
	b := Bucket{Capacity: 12, Rate: 6}
	if got := FaultBound(None, OwnedByTarget, 3).Tokens(b, 0, 7); got != 0 {
		t.Fatalf("no fault: bound %v, want 0", got)
	}
	if got := FaultBound(Isolate, OwnedByTarget, 3).Tokens(b, 5, 7); got != 29 {
		t.Fatalf("isolate owner: bound %v, want 2B + 5", got)
	}
	if got := FaultBound(Isolate, OwnedElsewhere, 3).Tokens(b, 5, 7); got != 5 {
		t.Fatalf("isolate other: bound %v, want 5", got)
	}
	// A crash with replication: the last interval's debits, not a full B.
	if got := FaultBound(Kill, OwnedByTarget, 3).Tokens(b, 5, 3); got != 8 {
		t.Fatalf("kill owner: bound %v, want lost 3 + fallback 5", got)
	}
	if got := FaultBound(Kill, OwnedElsewhere, 3).Tokens(b, 5, 3); got != 5 {
		t.Fatalf("kill other: bound %v, want 5", got)
	}
	if m := FaultBound(Leave, OwnedByTarget, 3).Members; m != 2 {
		t.Fatalf("leave divides by %d, want 2", m)
	}
	if Share(Bucket{Capacity: 5, Rate: 1}, 100) != 1 || Share(b, 3) != 4 || Share(b, 0) != 12 {
		t.Fatal("Share")
	}
}

func TestFallbackAllowance(t *testing.T) {
	b := Bucket{Capacity: 12, Rate: 6}
	fb := func(node string, call, ret int64, r Outcome) Op {
		return Op{Node: node, Call: call, Return: ret, Result: r, Source: "fallback", Cost: 1}
	}
	ops := []Op{
		fb("n1", sec, sec+1, Denied),      // opens n1's ceiling at 1s
		fb("n1", 3*sec, 3*sec, Allowed),   // last allowed at 3s: 4 + 2*2
		fb("n2", 5*sec, 5*sec, Allowed),   // one share
		fb("n3", 5*sec, 5*sec, Denied),    // never allowed: nothing
		allowed(0, 1, 1),                  // owner decisions do not count
		fb("n1", 50*sec, 50*sec, Allowed), // outside the range
	}
	got, n := FallbackAllowance(ops, b, 3, 0, 10*sec)
	if want := 8.0 + 4; math.Abs(got-want) > 1e-9 || n != 2 {
		t.Fatalf("allowance %v (%d allowed), want %v (2)", got, n, want)
	}
}

func TestAvailabilities(t *testing.T) {
	ms := int64(time.Millisecond)
	ops := []Op{
		{Call: 0, Return: 2 * ms, Result: Allowed},
		{Call: ms, Return: 5 * ms, Result: Denied},
		{Call: 2, Return: 1000 * ms, Result: Timeout},
		{Call: 3, Return: 3, Result: Failed},
		{Call: 100 * sec, Return: 100 * sec, Result: Allowed}, // other phase
	}
	a := Availabilities(ops, Phase{Name: "p", Start: 0, End: sec}, nil)
	if a.Ops != 4 || a.Answered != 2 || a.Timeouts != 1 || a.Errors != 1 {
		t.Fatalf("counts %+v", a)
	}
	if a.Share() != 0.5 || a.P99 != 4*time.Millisecond || a.P50 != 2*time.Millisecond {
		t.Fatalf("share %v p50 %v p99 %v", a.Share(), a.P50, a.P99)
	}
	if (Availability{}).Share() != 1 {
		t.Fatal("empty phase share != 1")
	}
}

func TestJSONLRoundTrip(t *testing.T) {
	in := []Op{allowed(1, 2, 3), {ID: 7, Node: "n2", Limit: "x", Key: "y", Result: Timeout, Err: "deadline"}}
	var buf bytes.Buffer
	if err := WriteJSONL(&buf, in); err != nil {
		t.Fatal(err)
	}
	out, err := ReadJSONL(&buf)
	if err != nil || len(out) != 2 || out[0] != in[0] || out[1] != in[1] {
		t.Fatalf("round trip: %v %+v", err, out)
	}
	if _, err := ReadJSONL(bytes.NewBufferString("{bad")); err == nil {
		t.Fatal("bad JSON accepted")
	}
	if in[1].Determinate() || !in[0].Determinate() {
		t.Fatal("Determinate")
	}
}

func TestGroupAndIndeterminate(t *testing.T) {
	ops := []Op{
		{Limit: "a", Key: "1", Cost: 1, Result: Timeout},
		{Limit: "a", Key: "1", Cost: 2, Result: Allowed},
		{Limit: "a", Key: "2", Cost: 4, Result: Timeout},
	}
	g := GroupByBucket(ops)
	if len(g) != 2 || len(g[BucketID{"a", "1"}]) != 2 {
		t.Fatalf("groups %v", g)
	}
	if Indeterminate(g[BucketID{"a", "1"}]) != 1 || Indeterminate(ops) != 5 {
		t.Fatal("indeterminate")
	}
}

func TestRingDeaf(t *testing.T) {
	// 3 nodes: each hears itself and its successor, so each is deaf to
	// its predecessor only: every node sees a majority of 2, all different.
	got := RingDeaf([]int{2, 3, 1})
	want := map[int][]int{2: {1}, 3: {2}, 1: {3}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("3 nodes: got %v, want %v", got, want)
	}
	// 5 nodes: each hears its two neighbours and is deaf to the two
	// across the ring; the cut is symmetric.
	got = RingDeaf([]int{1, 2, 3, 4, 5})
	want = map[int][]int{1: {3, 4}, 2: {4, 5}, 3: {1, 5}, 4: {1, 2}, 5: {2, 3}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("5 nodes: got %v, want %v", got, want)
	}
	for node, deaf := range got {
		if len(deaf) != 2 {
			t.Errorf("node %d is deaf to %v: it must hear a majority of 3", node, deaf)
		}
	}
}
