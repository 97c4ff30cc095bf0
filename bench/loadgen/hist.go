package main

import (
	"math"
	"math/bits"
	"time"
)

// Histogram layout: values below histLinear nanoseconds get a bucket each;
// above, every power of two is split into histSub linear sub-buckets, so a
// bucket's width is at most 1/histSub of its lower bound.
const (
	histSubBits = 6
	histSub     = 1 << histSubBits // sub-buckets per power of two
	histLinear  = 2 * histSub      // values below this are exact
	// histSize covers every non-negative int64: the largest shift is
	// 63 - (histSubBits + 1).
	histSize = histLinear + (63-histSubBits-1)*histSub
)

// histogram is a fixed log-bucket latency histogram in nanoseconds, in the
// spirit of HdrHistogram with a relative precision of 1/64. The zero value
// is empty and ready to use. It is not safe for concurrent use: each caller
// records into its own and the runner merges them.
type histogram struct {
	counts [histSize]uint64
	n      uint64
	sum    float64 // nanoseconds, for the mean
	min    int64
	max    int64
}

// histIndex returns the bucket of v (v >= 0).
func histIndex(v int64) int {
	if v < histLinear {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - (histSubBits + 1)
	top := int(v >> shift) // in [histSub, 2*histSub)
	return histLinear + (shift-1)*histSub + (top - histSub)
}

// histUpper returns the largest value that falls in bucket i.
func histUpper(i int) int64 {
	if i < histLinear {
		return int64(i)
	}
	shift := (i-histLinear)/histSub + 1
	top := int64((i-histLinear)%histSub + histSub)
	return (top+1)<<shift - 1
}

// record adds one observation; a negative duration counts as zero.
func (h *histogram) record(d time.Duration) {
	v := max(int64(d), 0)
	h.counts[histIndex(v)]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	h.sum += float64(v)
}

// merge adds every observation of o to h.
func (h *histogram) merge(o *histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}

// count returns the number of observations.
func (h *histogram) count() uint64 { return h.n }

// mean returns the mean observation, or zero when empty.
func (h *histogram) mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.n))
}

// quantile returns the q-quantile (0 <= q <= 1) as the upper bound of the
// bucket holding the observation of rank ceil(q*n), capped at the largest
// observation: never below the true value, and at most 1/64 above it. It
// returns zero when the histogram is empty.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	q = min(max(q, 0), 1)
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = max(rank, 1)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(min(histUpper(i), h.max))
		}
	}
	return time.Duration(h.max)
}
