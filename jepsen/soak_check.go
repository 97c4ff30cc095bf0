package jepsen

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// SoakSegment is the stretch of a soak's history from one step to the
// next (the first from the start of the load, with Kind ""): the step's
// own fault and its recovery (a killed node's restart, a joiner's
// takeover) fall inside it.
type SoakSegment struct {
	Start, End int64 // on the history's base; an op is in it when Call >= Start and Return <= End
	Kind       SoakKind
	Node       string
}

// SegmentCheck is one bucket's excess in one segment against the
// segment's bound.
type SegmentCheck struct {
	Seg       SoakSegment
	Excess    Window
	Lost      float64 // LostDebits of the killed node at a kill
	Allowance float64 // FallbackAllowance in the segment
	Fallbacks int
	Bound     float64
	Pass      bool
}

// SoakBucketCheck is one bucket's over-admission verdict over a soak:
// every segment within its own bound, and the whole run within their sum.
type SoakBucketCheck struct {
	ID       BucketID
	Whole    Window
	Bound    float64 // the sum of the segments' bounds
	Segments []SegmentCheck
	Pass     bool
}

// Largest returns the segment with the largest excess (the first of
// equals).
func (c SoakBucketCheck) Largest() SegmentCheck {
	var w SegmentCheck
	for i, s := range c.Segments {
		if i == 0 || s.Excess.Excess > w.Excess.Excess {
			w = s
		}
	}
	return w
}

// Worst returns the segment whose excess is largest over its bound.
func (c SoakBucketCheck) Worst() SegmentCheck {
	var w SegmentCheck
	for i, s := range c.Segments {
		if i == 0 || s.Excess.Excess-s.Bound > w.Excess.Excess-w.Bound {
			w = s
		}
	}
	return w
}

// CheckSoakBuckets is the over-admission verdict of every bucket of the
// takes ops under the bounds the fault suite uses, one segment per step
// (FaultBound): a kill of the key's owner costs the debits of its last
// replication interval (LostDebits of the killed node: 0 when it was not
// the owner); a graceful leave and a join hand the bucket over with its
// debt (0); in every segment, the local ceilings of members nodes admit
// their fallback allowance (FallbackAllowance). Members is the smallest
// number of members the cluster has (the largest share). A bucket passes
// when each segment's excess is within its bound and the whole run's
// excess within their sum. Buckets of a limit not in limits are skipped.
func CheckSoakBuckets(ops []Op, limits map[string]Limit, segs []SoakSegment, members int) []SoakBucketCheck {
	var out []SoakBucketCheck
	for id, bops := range GroupByBucket(ops) {
		l, ok := limits[id.Limit]
		if !ok {
			continue
		}
		b := l.Bucket()
		bc := SoakBucketCheck{ID: id, Whole: Excess(bops, b, math.MinInt64, math.MaxInt64), Pass: true}
		for _, s := range segs {
			sc := SegmentCheck{Seg: s, Excess: Excess(bops, b, s.Start, s.End)}
			if s.Kind == SoakKill {
				sc.Lost = LostDebits(bops, map[string]bool{s.Node: true}, s.Start)
			}
			sc.Allowance, sc.Fallbacks = FallbackAllowance(bops, b, members, s.Start, s.End)
			sc.Bound = sc.Lost + sc.Allowance
			sc.Pass = sc.Excess.Excess <= sc.Bound+1e-6
			bc.Pass = bc.Pass && sc.Pass
			bc.Bound += sc.Bound
			bc.Segments = append(bc.Segments, sc)
		}
		bc.Pass = bc.Pass && bc.Whole.Excess <= bc.Bound+1e-6
		out = append(out, bc)
	}
	slices.SortFunc(out, func(a, b SoakBucketCheck) int {
		return strings.Compare(a.ID.Limit+"/"+a.ID.Key, b.ID.Limit+"/"+b.ID.Key)
	})
	return out
}

// SoakSegments cuts [0, end] at every step's instant: one segment before
// the first step and one from each step to the next.
func SoakSegments(steps []SoakEvent, end int64) []SoakSegment {
	segs := []SoakSegment{{Start: 0}}
	for _, st := range steps {
		segs[len(segs)-1].End = st.At
		segs = append(segs, SoakSegment{Start: st.At, Kind: st.Kind, Node: st.Node})
	}
	segs[len(segs)-1].End = end
	return segs
}

// SoakEvent is a step as it was played: its instant on the history's
// base, and how long the cluster took to agree again after it.
type SoakEvent struct {
	At       int64    `json:"at_ns"`
	Kind     SoakKind `json:"kind"`
	Node     string   `json:"node"`
	Converge string   `json:"converge"` // a duration, or why it did not converge
}

// bucketFailures returns a failure line per bucket over its bound.
func bucketFailures(bcs []SoakBucketCheck) []string {
	var out []string
	for _, bc := range bcs {
		if bc.Pass {
			continue
		}
		w := bc.Worst()
		out = append(out, fmt.Sprintf("over-admission: %s/%s: whole run excess %.1f (bound %.1f); worst segment %s %s at %.0fs: excess %.1f > bound %.1f (lost %.0f, fallback allowance %.1f from %d fallback admissions)",
			bc.ID.Limit, bc.ID.Key, bc.Whole.Excess, bc.Bound, segName(w.Seg), w.Seg.Node, float64(w.Seg.Start)/1e9,
			w.Excess.Excess, w.Bound, w.Lost, w.Allowance, w.Fallbacks))
	}
	return out
}

func segName(s SoakSegment) string {
	if s.Kind == "" {
		return "start"
	}
	return string(s.Kind)
}

// SegmentErrors is the error answers of one segment by kind and node.
type SegmentErrors struct {
	Seg   SoakSegment
	Count map[string]int // "kind from node"
	First int64          // the first one's instant
}

// ErrorsBySegment groups errs by the segment (of segs, in order) their
// instant falls in, leaving out the segments without any.
func ErrorsBySegment(errs []ErrorEvent, segs []SoakSegment) []SegmentErrors {
	var out []SegmentErrors
	for _, s := range segs {
		se := SegmentErrors{Seg: s, Count: make(map[string]int)}
		for _, e := range errs {
			if e.At >= s.Start && (e.At < s.End || s.End == segs[len(segs)-1].End) {
				if len(se.Count) == 0 || e.At < se.First {
					se.First = e.At
				}
				se.Count[e.Kind+" from "+e.Node]++
			}
		}
		if len(se.Count) > 0 {
			out = append(out, se)
		}
	}
	return out
}
