package jepsen

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// This file: the exact token bucket model the linearizability checker
// (linear.go, "The model") replays each instance against, in porcupine's
// terms.

// linInput is a take: its cost and the decider's clock when it decided
// (0 for a timeout, whose decision time is unknown).
type linInput struct {
	Cost, At int64
}

// linOutput is what the client saw; Unknown for a timeout.
type linOutput struct {
	Allowed            bool
	Remaining, ResetMs int64
	Unknown            bool
}

// linState is the interval of balances an instance may hold, in units of
// 1/linearPer token, at its last decision Last (decider's Unix ns).
// Pending is the cost, in units, that timeouts since Last may have spent;
// it comes off Lo at the next decision. The zero value is the unknown
// state before the first decision.
type linState struct {
	Known   bool
	Lo, Hi  int64
	Last    int64
	Pending int64
}

// tbModel is a token bucket in units: capacity capU = Capacity*linearPer,
// refilled n = RatePerSec units per nanosecond.
type tbModel struct {
	capU, n int64
}

// newTBModel returns the model of l, false when l cannot be modelled.
func newTBModel(l Limit) (tbModel, bool) {
	if l.Capacity < 1 || l.RatePerSec < 1 || int64(l.Capacity) > math.MaxInt64/linearPer {
		return tbModel{}, false
	}
	return tbModel{capU: int64(l.Capacity) * linearPer, n: int64(l.RatePerSec)}, true
}

// step is the model's transition: the state after a take with input in
// answered out, and whether that answer was possible.
func (m tbModel) step(s linState, in linInput, out linOutput) (linState, bool) {
	if out.Unknown {
		if s.Known {
			s.Pending = satAdd(s.Pending, satMul(max(in.Cost, 0), linearPer))
		}
		return s, true
	}
	if !s.Known {
		s = linState{Known: true, Lo: 0, Hi: m.capU, Last: in.At}
	}
	at := max(in.At, s.Last)
	v := m.refill(s, at)
	cost := satMul(max(in.Cost, 0), linearPer)
	if out.Allowed {
		if v.Hi < cost {
			return s, false
		}
		v.Lo, v.Hi = max(v.Lo, cost)-cost, v.Hi-cost
	} else {
		if v.Lo >= cost {
			return s, false
		}
		v.Hi = min(v.Hi, cost-1)
	}
	lo, hi := remainingBounds(out.Remaining)
	v.Lo, v.Hi = max(v.Lo, lo), min(v.Hi, hi)
	lo, hi = m.resetBounds(out.ResetMs)
	v.Lo, v.Hi = max(v.Lo, lo), min(v.Hi, hi)
	if v.Lo > v.Hi {
		return s, false
	}
	if out.Allowed {
		return v, true
	}
	// The store keeps nothing of a denial: the bucket stays as it was at
	// Last, so the next take refills from there and is clamped to Last,
	// not to this denial's time. What the denial revealed narrows the
	// stored state when nothing unseen may have spent since Last: the
	// bucket held [v.Lo, v.Hi] at this time, so [v.Lo-add, v.Hi-add] at
	// Last (v.Hi < cost <= capacity, so no cap is involved). After a take
	// that may have been decided unseen, the bucket may have been written
	// at that take's unknown time, and the state is left as it was.
	if s.Pending == 0 {
		add := satMul(at-s.Last, m.n)
		s.Lo, s.Hi = max(s.Lo, v.Lo-add), min(s.Hi, v.Hi-add)
	}
	return s, s.Lo <= s.Hi
}

// refill advances s to at (at >= s.Last): both ends gain (at-Last)*n units,
// capped at capacity, then Lo loses what timeouts may have spent.
func (m tbModel) refill(s linState, at int64) linState {
	add := satMul(at-s.Last, m.n)
	s.Lo = min(m.capU, satAdd(s.Lo, add))
	s.Hi = min(m.capU, satAdd(s.Hi, add))
	s.Lo = max(0, s.Lo-s.Pending)
	s.Last, s.Pending = at, 0
	return s
}

// remainingBounds is the interval of balances whose whole part is r.
func remainingBounds(r int64) (lo, hi int64) {
	if r < 0 {
		return 1, 0
	}
	lo = satMul(r, linearPer)
	return lo, satAdd(lo, linearPer-1)
}

// resetBounds is the interval of balances whose reset, ceil(deficit/n) ns
// with deficit = capU - balance, rounds up to ms milliseconds: deficit 0
// for ms 0, else deficit in ((ms-1)*1e6*n, ms*1e6*n]. Products saturate;
// a saturated bound lies beyond capU either way, so the answer is exact.
func (m tbModel) resetBounds(ms int64) (lo, hi int64) {
	switch {
	case ms < 0:
		return 1, 0
	case ms == 0:
		return m.capU, m.capU
	}
	const nsPerMs = int64(time.Millisecond)
	most := satMul(satMul(ms, nsPerMs), m.n)    // largest deficit
	least := satMul(satMul(ms-1, nsPerMs), m.n) // deficit is above this
	return m.capU - most, m.capU - least - 1
}

// satMul is a*b for a, b >= 0, saturating at MaxInt64.
func satMul(a, b int64) int64 {
	if a != 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}

// satAdd is a+b for b >= 0, saturating at MaxInt64.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// porcupine returns m as a porcupine model; base is the decider's clock
// that descriptions count from.
func (m tbModel) porcupine(base int64) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return linState{} },
		Step: func(state, input, output any) (bool, any) {
			s, ok := m.step(state.(linState), input.(linInput), output.(linOutput))
			return ok, s
		},
		Equal: func(a, b any) bool { return a.(linState) == b.(linState) },
		Hash: func(state any) uint64 {
			s := state.(linState)
			h := uint64(14695981039346656037)
			for _, v := range []int64{s.Lo, s.Hi, s.Last, s.Pending} {
				h = (h ^ uint64(v)) * 1099511628211
			}
			return h
		},
		DescribeOperation: func(input, output any) string {
			return describeTake(input.(linInput), output.(linOutput), base)
		},
		DescribeState: func(state any) string { return describeState(state.(linState), base) },
	}
}

// describeTake renders a take, e.g. "take 2 @+1.234s -> allowed rem 3
// reset 500ms".
func describeTake(in linInput, out linOutput, base int64) string {
	if out.Unknown {
		return fmt.Sprintf("take %d -> timeout (may have spent)", in.Cost)
	}
	verdict := "denied"
	if out.Allowed {
		verdict = "allowed"
	}
	return fmt.Sprintf("take %d @+%s -> %s rem %d reset %dms",
		in.Cost, time.Duration(in.At-base), verdict, out.Remaining, out.ResetMs)
}

// describeState renders a state, e.g. "[3.000, 3.006] tokens @+1.234s".
func describeState(s linState, base int64) string {
	if !s.Known {
		return "unknown"
	}
	d := fmt.Sprintf("[%s, %s] tokens @+%s", formatUnits(s.Lo), formatUnits(s.Hi), time.Duration(s.Last-base))
	if s.Pending > 0 {
		d += fmt.Sprintf(", up to %s more maybe spent", formatUnits(s.Pending))
	}
	return d
}

// formatUnits renders u units as tokens with at least 3 decimals and as
// many as needed, up to 9, to be exact.
func formatUnits(u int64) string {
	if u < 0 {
		return "-" + formatUnits(-u)
	}
	frac := strings.TrimRight(fmt.Sprintf("%09d", u%linearPer), "0")
	for len(frac) < 3 {
		frac += "0"
	}
	return fmt.Sprintf("%d.%s", u/linearPer, frac)
}
