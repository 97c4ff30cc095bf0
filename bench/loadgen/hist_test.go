package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestHistIndexUpperAgree(t *testing.T) {
	for i := range histSize - 1 {
		up := histUpper(i)
		if got := histIndex(up); got != i {
			t.Fatalf("histIndex(histUpper(%d)=%d) = %d", i, up, got)
		}
		if got := histIndex(up + 1); got != i+1 {
			t.Fatalf("histIndex(%d) = %d, want %d (the next bucket)", up+1, got, i+1)
		}
	}
	if got := histIndex(1<<63 - 1); got != histSize-1 {
		t.Fatalf("histIndex(MaxInt64) = %d, want the last bucket %d", got, histSize-1)
	}
}

func TestHistogramEmpty(t *testing.T) {
	var h histogram
	if h.quantile(0.5) != 0 || h.mean() != 0 || h.count() != 0 {
		t.Fatalf("empty histogram: quantile %v mean %v count %d", h.quantile(0.5), h.mean(), h.count())
	}
}

func TestHistogramExactBelowLinear(t *testing.T) {
	var h histogram
	for v := range 100 {
		h.record(time.Duration(v + 1)) // 1..100 ns
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0, 1}, {0.01, 1}, {0.5, 50}, {0.99, 99}, {0.999, 100}, {1, 100}} {
		if got := h.quantile(tc.q); got != tc.want {
			t.Errorf("quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if h.mean() != 50 { // (1+100)/2 = 50.5, truncated
		t.Errorf("mean = %v, want 50ns", h.mean())
	}
	if h.min != 1 || h.max != 100 {
		t.Errorf("min, max = %d, %d, want 1, 100", h.min, h.max)
	}
}

func TestHistogramNegativeIsZero(t *testing.T) {
	var h histogram
	h.record(-5)
	if h.quantile(1) != 0 || h.min != 0 {
		t.Fatalf("a negative duration: quantile(1) %v, min %d, want 0", h.quantile(1), h.min)
	}
}

// TestHistogramRelativeError checks the contract against sorting: a
// quantile is never below the true value and at most 1/64 above it.
func TestHistogramRelativeError(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 20 {
		n := 1 + rng.IntN(5000)
		var h histogram
		vals := make([]int64, n)
		for i := range vals {
			// log-uniform from 1 ns to ~100 s
			vals[i] = int64(math.Exp2(rng.Float64() * 37))
			h.record(time.Duration(vals[i]))
		}
		slices.Sort(vals)
		for _, q := range []float64{0, 0.1, 0.5, 0.9, 0.99, 0.999, 1} {
			rank := max(int(math.Ceil(q*float64(n))), 1)
			exact := vals[rank-1]
			got := int64(h.quantile(q))
			if got < exact || float64(got-exact) > float64(exact)/histSub {
				t.Fatalf("trial %d n %d q %v: got %d, exact %d (more than 1/%d off)", trial, n, q, got, exact, histSub)
			}
		}
	}
}

func TestHistogramMerge(t *testing.T) {
	var a, b, all histogram
	for v := range 1000 {
		d := time.Duration(v * 997)
		all.record(d)
		if v%3 == 0 {
			a.record(d)
		} else {
			b.record(d)
		}
	}
	var m histogram
	m.merge(&a)
	m.merge(&histogram{}) // merging an empty one changes nothing
	m.merge(&b)
	if m.count() != all.count() || m.min != all.min || m.max != all.max || m.mean() != all.mean() {
		t.Fatalf("merged count/min/max/mean %d/%d/%d/%v, want %d/%d/%d/%v",
			m.count(), m.min, m.max, m.mean(), all.count(), all.min, all.max, all.mean())
	}
	for _, q := range []float64{0, 0.5, 0.99, 1} {
		if m.quantile(q) != all.quantile(q) {
			t.Errorf("quantile(%v): merged %v, direct %v", q, m.quantile(q), all.quantile(q))
		}
	}
}
