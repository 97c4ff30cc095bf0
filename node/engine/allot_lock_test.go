package engine

import (
	"fmt"
	"testing"

	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/node/limits"
)

// TestLockAllottedHoldsTheStripes: lockAllotted locks the stripe of every
// check whose limit allots, none of the others, until its release; with
// one stripe or several.
func TestLockAllottedHoldsTheStripes(t *testing.T) {
	e := &Engine{}
	e.ledger.initUnlocks()
	auto := &limits.Limit{Allotments: limits.Allotments{Auto: true}}
	off := &limits.Limit{}
	a := bucket.Check{Name: "hot", Key: "a"}
	var b bucket.Check
	for i := 0; b.Key == ""; i++ {
		if k := fmt.Sprintf("b%d", i); allotStripe("hot", k) != allotStripe("hot", "a") {
			b = bucket.Check{Name: "hot", Key: k}
		}
	}
	held := func(c bucket.Check) bool {
		l := &e.ledger.locks[allotStripe(c.Name, c.Key)]
		if l.TryLock() {
			l.Unlock()
			return false
		}
		return true
	}
	cases := []struct {
		name   string
		checks []bucket.Check
		lims   []*limits.Limit
		want   []bool // held, per check
	}{
		{"no limit allots", []bucket.Check{a}, []*limits.Limit{off}, []bool{false}},
		{"one stripe", []bucket.Check{a}, []*limits.Limit{auto}, []bool{true}},
		{"two stripes", []bucket.Check{a, b}, []*limits.Limit{auto, auto}, []bool{true, true}},
		{"one of two allots", []bucket.Check{a, b}, []*limits.Limit{off, auto}, []bool{false, true}},
		{"the same stripe twice", []bucket.Check{a, a}, []*limits.Limit{auto, auto}, []bool{true, true}},
	}
	for _, tc := range cases {
		release := e.lockAllotted(tc.checks, tc.lims)
		for i, c := range tc.checks {
			if got := held(c); got != tc.want[i] {
				t.Fatalf("%s: stripe of check %d held %v, want %v", tc.name, i, got, tc.want[i])
			}
		}
		release()
		for i, c := range tc.checks {
			if held(c) {
				t.Fatalf("%s: stripe of check %d still held after the release", tc.name, i)
			}
		}
	}
}

// BenchmarkLockAllotted measures the owner's lock of one key's stripe and
// its release, for a limit that allots and for one that does not (nothing
// to lock).
func BenchmarkLockAllotted(b *testing.B) {
	e := &Engine{}
	e.ledger.initUnlocks()
	checks := []bucket.Check{{Name: "hot", Key: "tenant:000042"}}
	for _, bc := range []struct {
		name string
		lim  *limits.Limit
	}{{"allots", &limits.Limit{Allotments: limits.Allotments{Auto: true}}}, {"off", &limits.Limit{}}} {
		lims := []*limits.Limit{bc.lim}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				e.lockAllotted(checks, lims)()
			}
		})
	}
}
