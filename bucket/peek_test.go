package bucket

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestPeekAgainstTakes: on random histories of every algorithm, a peek
// spends nothing and tells the truth: its Remaining r is the largest cost a
// take at the same instant admits (a take of r is allowed when r >= 1, a
// take of r+1 is denied when r < Capacity), and its ResetAfter is the
// ResetAfter of a take that spends nothing more. The state a peek reads is
// the same afterwards.
func TestPeekAgainstTakes(t *testing.T) {
	rng := rand.New(rand.NewPCG(20, 7))
	limits := []Limit{
		tb(7, 3, time.Second),
		gcra(5, 1, time.Second),
		gcra(16, 30, 60*time.Second),
		{Algorithm: SlidingWindow, Capacity: 9, Window: time.Second},
		{Algorithm: FixedWindow, Capacity: 4, Calendar: Second},
	}
	for _, l := range limits {
		var s State
		now := epoch
		for i := range 2000 {
			now = now.Add(time.Duration(rng.Int64N(int64(400 * time.Millisecond))))
			before := s
			p, err := PeekAt(l, s, now)
			if err != nil {
				t.Fatal(err)
			}
			if s != before {
				t.Fatalf("%v step %d: PeekAt changed the state", l.Algorithm, i)
			}
			if !p.Allowed || p.RetryAfter != 0 || p.Limit != l.Capacity || p.Remaining < 0 || p.Remaining > l.Capacity {
				t.Fatalf("%v step %d: peek %+v", l.Algorithm, i, p)
			}
			if p.Remaining >= 1 {
				c := s
				if d, _ := TakeAt(l, &c, now, p.Remaining); !d.Allowed {
					t.Fatalf("%v step %d: peek says %d remain, a take of them is denied: %+v", l.Algorithm, i, p.Remaining, d)
				}
			}
			if p.Remaining < l.Capacity {
				c := s
				if d, _ := TakeAt(l, &c, now, p.Remaining+1); d.Allowed {
					t.Fatalf("%v step %d: peek says %d remain, a take of %d is allowed", l.Algorithm, i, p.Remaining, p.Remaining+1)
				}
			}
			if _, err := TakeAt(l, &s, now, 1+rng.Int64N(l.Capacity)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestPeekRedisCellCase12 is redis-cell's zero-quantity case (max_burst 4,
// 1 per second: after its cases 1..11, a peek at +9.5 s answers 4
// remaining, reset after 1 s) on the gcra this package decides with.
func TestPeekRedisCellCase12(t *testing.T) {
	l := gcra(5, 1, time.Second)
	var s State
	for _, st := range []struct {
		at   time.Duration
		cost int64
	}{{0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {3000 * time.Millisecond, 1}, {3100 * time.Millisecond, 1}, {4000 * time.Millisecond, 1}, {8000 * time.Millisecond, 1}, {9500 * time.Millisecond, 1}} {
		if _, err := TakeAt(l, &s, at(st.at), st.cost); err != nil {
			t.Fatal(err)
		}
	}
	p, err := PeekAt(l, s, at(9500*time.Millisecond))
	if want := (Decision{Allowed: true, Remaining: 4, Limit: 5, ResetAfter: time.Second}); err != nil || p != want {
		t.Fatalf("peek = %+v, %v; want %+v", p, err, want)
	}
	if _, err := PeekAt(Limit{}, s, epoch); err == nil {
		t.Fatal("PeekAt with an invalid limit: no error")
	}
}

// TestStorePeekCreatesNothing: a cost-0 check answers the bucket's state
// and neither creates a missing bucket, nor changes an existing one, nor
// needs room in a full store; mixed with a spend on the same bucket it
// sees the spend's effect in request order.
func TestStorePeekCreatesNothing(t *testing.T) {
	st := NewStore(Config{MaxBuckets: 1, Shards: 1})
	l := gcra(5, 1, time.Second)
	peek := func(key string) Decision {
		t.Helper()
		ds, ok, err := st.TakeAt(epoch, []Check{{Name: "l", Limit: l, Key: key, Cost: 0}}, nil)
		if err != nil || !ok {
			t.Fatalf("peek %q: ok %v err %v", key, ok, err)
		}
		return ds[0]
	}
	if d := peek("a"); d.Remaining != 5 || st.Len() != 0 || st.Has("l", "a") {
		t.Fatalf("peek of a missing bucket: %+v, %d buckets", d, st.Len())
	}
	if _, ok, err := st.TakeAt(epoch, []Check{{Name: "l", Limit: l, Key: "b", Cost: 2}}, nil); !ok || err != nil {
		t.Fatalf("take: %v %v", ok, err)
	}
	// The store is full (one bucket, in debt): a peek of another key still
	// answers, and the bucket peeked stays as it was.
	if d := peek("c"); d.Remaining != 5 {
		t.Fatalf("peek in a full store: %+v", d)
	}
	for range 3 {
		if d := peek("b"); d.Remaining != 3 {
			t.Fatalf("peek of b: %+v, want 3 remaining", d)
		}
	}
	ds, ok, err := st.TakeAt(epoch, []Check{{Name: "l", Limit: l, Key: "b", Cost: 1}, {Name: "l", Limit: l, Key: "b", Cost: 0}}, nil)
	if err != nil || !ok || ds[1].Remaining != 2 {
		t.Fatalf("spend then peek: %+v %v %v", ds, ok, err)
	}
	if d := peek("b"); d.Remaining != 2 {
		t.Fatalf("after spend then peek: %+v, want 2", d)
	}
	ds, _, err = st.TakeAt(epoch, []Check{{Name: "l", Limit: l, Key: "b", Cost: 0}, {Name: "l", Limit: l, Key: "b", Cost: 1}}, nil)
	if err != nil || ds[0].Remaining != 2 || ds[1].Remaining != 1 || peek("b").Remaining != 1 {
		t.Fatalf("peek then spend: %+v %v", ds, err)
	}
	if _, _, err := st.TakeAt(epoch, []Check{{Name: "l", Limit: l, Key: "b", Cost: -1}}, nil); err == nil {
		t.Fatal("negative cost: no error")
	}
}
