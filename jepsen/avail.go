package jepsen

import (
	"slices"
	"time"
)

// Phase is a named span of a run on the run's time base.
type Phase struct {
	Name       string // before | during | after
	Start, End int64  // nanoseconds; an op belongs to the phase its Call falls in
}

// Availability summarizes the ops of one phase.
type Availability struct {
	Ops      int
	Answered int           // a decision (allowed or denied) within the deadline
	Errors   int           // definite errors (503, refused, ...)
	Timeouts int           // indeterminate
	P50, P99 time.Duration // latency of answered ops
}

// Share is Answered/Ops (1 for a phase without ops).
func (a Availability) Share() float64 {
	if a.Ops == 0 {
		return 1
	}
	return float64(a.Answered) / float64(a.Ops)
}

// Availabilities returns the availability of the ops whose Call lies in
// [p.Start, p.End) and that pass keep (nil keeps all).
func Availabilities(ops []Op, p Phase, keep func(Op) bool) Availability {
	var a Availability
	var lat []int64
	for _, o := range ops {
		if o.Call < p.Start || o.Call >= p.End || (keep != nil && !keep(o)) {
			continue
		}
		a.Ops++
		switch o.Result {
		case Allowed, Denied:
			a.Answered++
			lat = append(lat, o.Return-o.Call)
		case Failed:
			a.Errors++
		default:
			a.Timeouts++
		}
	}
	a.P50, a.P99 = quantile(lat, 0.50), quantile(lat, 0.99)
	return a
}

// quantile returns the q-quantile (nearest rank) of xs; it sorts xs.
func quantile(xs []int64, q float64) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	i := int(q*float64(len(xs))+0.5) - 1
	i = min(max(i, 0), len(xs)-1)
	return time.Duration(xs[i])
}
