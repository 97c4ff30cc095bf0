package bucket

import (
	"math/big"
	"testing"
	"time"
)

// ideal replays admitted requests through the ideal bucket B + r*t and
// fails when it goes below zero (docs/architecture.md §11).
type ideal struct {
	l      Limit
	tokens *big.Rat
	last   int64
	init   bool
}

func (m *ideal) admit(t *testing.T, now int64, cost int64) {
	t.Helper()
	b := big.NewRat(m.l.Capacity, 1)
	if !m.init {
		m.tokens, m.last, m.init = new(big.Rat).Set(b), now, true
	}
	if now > m.last {
		e := new(big.Rat).SetFrac(new(big.Int).Mul(big.NewInt(now-m.last), big.NewInt(m.l.Rate.N)), big.NewInt(int64(m.l.Rate.Per)))
		m.tokens.Add(m.tokens, e)
		if m.tokens.Cmp(b) > 0 {
			m.tokens.Set(b)
		}
		m.last = now
	}
	m.tokens.Sub(m.tokens, big.NewRat(cost, 1))
	if m.tokens.Sign() < 0 {
		t.Fatalf("admitted more than the ideal bucket: balance %v after cost %d at %d", m.tokens, cost, now)
	}
}

// arrivals decodes a fuzz input into (time offset, cost) pairs: two bytes
// of gap (the top bit of the first makes it a step backwards) and one of
// cost.
func arrivals(data []byte, capacity int64, unit time.Duration) (ts []int64, costs []int64) {
	var now int64
	for len(data) >= 3 {
		gap := int64(data[0]&0x7f)<<8 | int64(data[1])
		if data[0]&0x80 != 0 {
			now -= gap * int64(unit) / 4
		} else {
			now += gap * int64(unit)
		}
		ts = append(ts, epoch.UnixNano()+now)
		costs = append(costs, 1+int64(data[2])%capacity)
		data = data[3:]
	}
	return ts, costs
}

// checkSequence runs token_bucket and gcra side by side on the arrivals,
// requiring identical decisions and no admission beyond the ideal bucket.
func checkSequence(t *testing.T, capacity, n int64, per time.Duration, data []byte) {
	t.Helper()
	a, g := tb(capacity, n, per), gcra(capacity, n, per)
	if a.Validate() != nil {
		return
	}
	var sa, sg State
	m := ideal{l: a}
	var clock int64 // the bucket's effective clock: max of times seen
	ts, costs := arrivals(data, capacity, time.Duration(max(1, int64(per)/(n*16))))
	for i := range ts {
		now := time.Unix(0, ts[i])
		da, err := TakeAt(a, &sa, now, costs[i])
		if err != nil {
			t.Fatal(err)
		}
		dg, err := TakeAt(g, &sg, now, costs[i])
		if err != nil {
			t.Fatal(err)
		}
		if da != dg {
			t.Fatalf("arrival %d (t=%d cost %d): token_bucket %+v, gcra %+v", i, ts[i]-epoch.UnixNano(), costs[i], da, dg)
		}
		if da.Allowed == (da.RetryAfter != 0) || da.Remaining < 0 || da.Remaining > capacity || da.ResetAfter < 0 {
			t.Fatalf("arrival %d: inconsistent decision %+v", i, da)
		}
		if i == 0 || ts[i] > clock {
			clock = ts[i]
		}
		if da.Allowed {
			m.admit(t, clock, costs[i])
		}
	}
}

func TestGCRAEqualsTokenBucket(t *testing.T) {
	// A deterministic pseudo-random sweep over shapes the fuzz target also
	// explores.
	x := uint64(42)
	next := func() byte {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return byte(x)
	}
	shapes := []struct {
		c, n int64
		per  time.Duration
	}{{6, 2, time.Second}, {1, 3, time.Second}, {7, 3, 10 * time.Second}, {100, 1, time.Millisecond}, {5, 1_000_000_000_000, 366 * 24 * time.Hour}}
	for _, sh := range shapes {
		for range 20 {
			data := make([]byte, 3*200)
			for i := range data {
				data[i] = next()
				if i%3 == 0 {
					data[i] &= 0x8f // mostly short gaps, some backwards
				}
			}
			checkSequence(t, sh.c, sh.n, sh.per, data)
		}
	}
}

func FuzzGCRAEqualsTokenBucket(f *testing.F) {
	f.Add(int64(6), int64(2), int64(time.Second), []byte{0, 0, 0, 0, 0, 1, 0x80, 4, 2, 0, 200, 5})
	f.Fuzz(func(t *testing.T, capacity, n, per int64, data []byte) {
		if capacity < 1 || n < 1 || per < 1 || capacity > 1000 {
			return
		}
		checkSequence(t, capacity, n, time.Duration(per), data)
	})
}

// FuzzExtremeParameters drives every entry point with arbitrary limits,
// instants and costs: nothing may panic, and every decision must be
// self-consistent.
func FuzzExtremeParameters(f *testing.F) {
	f.Add(uint8(0), int64(MaxCapacity), int64(1), int64(MaxPer), uint8(4), int64(0), int64(1<<62), int64(1))
	f.Fuzz(func(t *testing.T, alg uint8, capacity, n, per int64, cal uint8, t1, t2, cost int64) {
		l := Limit{Algorithm: Algorithm(alg % 5), Capacity: capacity, Rate: Rate{n, time.Duration(per)}, Window: time.Duration(per), Calendar: Calendar(cal % 6)}
		var s State
		for _, now := range []int64{t1, t2, t1, t2 / 2} {
			d, err := TakeAt(l, &s, time.Unix(0, now), cost)
			if err != nil {
				if l.Validate() == nil && cost >= 1 && cost <= capacity {
					t.Fatalf("valid call failed: %v", err)
				}
				continue
			}
			if d.Remaining < 0 || d.Remaining > capacity || d.ResetAfter < 0 || d.Limit != capacity {
				t.Fatalf("decision %+v", d)
			}
			if d.Allowed == (d.RetryAfter != 0) || d.RetryAfter < 0 {
				t.Fatalf("retry %+v", d)
			}
			RefundAt(l, &s, time.Unix(0, now), cost)
			snap := ExportAt(l, s, time.Unix(0, now))
			s2 := ImportAt(l, snap, time.Unix(0, t2))
			MergeAt(l, &s2, snap, time.Unix(0, t1))
			_ = s2.EvictableAt(time.Unix(0, t1))
			_ = l.PolicyWindow()
			_ = l.Scale(int(n % 1000)).Validate()
		}
	})
}
