package jepsen

import (
	"cmp"
	"slices"
)

// Bucket is an ideal token bucket: Capacity tokens, refilled at Rate tokens
// per second.
type Bucket struct {
	Capacity float64
	Rate     float64
}

// Admits returns the most an ideal bucket admits over a window of d
// nanoseconds: Capacity + Rate*d.
func (b Bucket) Admits(d int64) float64 { return b.Capacity + b.Rate*float64(d)/1e9 }

// Window is the worst window the over-admission checker found for one
// bucket: the allowed cost that surely fell inside [Start, End] and how far
// it exceeds what an ideal bucket admits there.
type Window struct {
	Start, End int64   // nanoseconds on the run's base; both 0 when no op was allowed
	Admitted   int64   // cost of allowed ops with Start <= Call and Return <= End
	Ideal      float64 // Bucket.Admits(End - Start)
	Excess     float64 // Admitted - Ideal, at least 0
}

// Ratio is Excess as a share of the ideal budget of the window (0 when the
// window is empty).
func (w Window) Ratio() float64 {
	if w.Ideal <= 0 {
		return 0
	}
	return w.Excess / w.Ideal
}

// Excess returns the window of [from, to] in which the definitely admitted
// cost of ops exceeds the ideal bucket b the most. Only ops with Result
// Allowed and from <= Call, Return <= to count; a window [t1, t2] counts an
// op only when t1 <= Call and Return <= t2, the only placement of its
// unknown decision time that is certain. The result therefore never
// exceeds the true over-admission. All ops must be of one bucket.
//
// It is O(n²) in the number of allowed ops, fine for the few thousand a
// run records per key.
func Excess(ops []Op, b Bucket, from, to int64) Window {
	var in []Op
	for _, o := range ops {
		if o.Result == Allowed && o.Call >= from && o.Return <= to && o.Return >= o.Call {
			in = append(in, o)
		}
	}
	best := Window{}
	if len(in) == 0 {
		return best
	}
	byReturn := slices.Clone(in)
	slices.SortFunc(byReturn, func(a, c Op) int { return cmp.Compare(a.Return, c.Return) })
	starts := make([]int64, len(in))
	for i, o := range in {
		starts[i] = o.Call
	}
	slices.Sort(starts)
	starts = slices.Compact(starts)
	bestSet := false
	for _, t1 := range starts {
		var sum int64
		for _, o := range byReturn {
			if o.Call < t1 {
				continue
			}
			sum += o.Cost
			ideal := b.Admits(o.Return - t1)
			if ex := float64(sum) - ideal; !bestSet || ex > best.Excess {
				best = Window{Start: t1, End: o.Return, Admitted: sum, Ideal: ideal, Excess: ex}
				bestSet = true
			}
		}
	}
	if best.Excess < 0 {
		best.Excess = 0
	}
	return best
}

// BucketID names one bucket: a limit and a key.
type BucketID struct {
	Limit, Key string
}

// GroupByBucket splits a history by (limit, key), keeping each group in
// the history's order.
func GroupByBucket(ops []Op) map[BucketID][]Op {
	out := make(map[BucketID][]Op)
	for _, o := range ops {
		id := BucketID{o.Limit, o.Key}
		out[id] = append(out[id], o)
	}
	return out
}

// Indeterminate returns the cost of ops whose outcome is unknown: how much
// the true admitted cost may exceed the definite one (the upper bound of a
// Jepsen counter checker).
func Indeterminate(ops []Op) int64 {
	var n int64
	for _, o := range ops {
		if o.Result == Timeout {
			n += o.Cost
		}
	}
	return n
}
