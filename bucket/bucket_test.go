package bucket

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var epoch = time.Unix(1_700_000_000, 0)

// at returns the fake clock's reading d after the epoch.
func at(d time.Duration) time.Time { return epoch.Add(d) }

func tb(capacity, n int64, per time.Duration) Limit {
	return Limit{Algorithm: TokenBucket, Capacity: capacity, Rate: Rate{N: n, Per: per}}
}

func gcra(capacity, n int64, per time.Duration) Limit {
	return Limit{Algorithm: GCRA, Capacity: capacity, Rate: Rate{N: n, Per: per}}
}

// step is one take in a fake-clock table and what it must decide.
type step struct {
	t                     time.Duration
	cost                  int64
	allowed               bool
	remaining             int64
	retryAfter, resetAfer time.Duration
}

func runSteps(t *testing.T, l Limit, steps []step) {
	t.Helper()
	var s State
	for i, st := range steps {
		d, err := TakeAt(l, &s, at(st.t), st.cost)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		want := Decision{Allowed: st.allowed, Remaining: st.remaining, Limit: l.Capacity, RetryAfter: st.retryAfter, ResetAfter: st.resetAfer}
		if d != want {
			t.Fatalf("step %d at %v cost %d: got %+v, want %+v", i, st.t, st.cost, d, want)
		}
	}
}

func TestTokenBucketAndGCRASteps(t *testing.T) {
	steps := []step{
		{0, 1, true, 5, 0, 500 * time.Millisecond},
		{0, 1, true, 4, 0, time.Second},
		{0, 1, true, 3, 0, 1500 * time.Millisecond},
		{0, 1, true, 2, 0, 2 * time.Second},
		{0, 1, true, 1, 0, 2500 * time.Millisecond},
		{0, 1, true, 0, 0, 3 * time.Second},
		{0, 1, false, 0, 500 * time.Millisecond, 3 * time.Second}, // the seventh
		{250 * time.Millisecond, 1, false, 0, 250 * time.Millisecond, 2750 * time.Millisecond},
		{1500 * time.Millisecond, 4, false, 3, 500 * time.Millisecond, 1500 * time.Millisecond}, // three are back
		{1500 * time.Millisecond, 3, true, 0, 0, 3 * time.Second},
		{1500*time.Millisecond + 1, 1, false, 0, 500*time.Millisecond - 1, 3*time.Second - 1},
		{time.Hour, 6, true, 0, 0, 3 * time.Second}, // refill capped at capacity
	}
	for _, l := range []Limit{tb(6, 2, time.Second), gcra(6, 2, time.Second)} {
		t.Run(l.Algorithm.String(), func(t *testing.T) { runSteps(t, l, steps) })
	}
}

func TestThirdsAreExact(t *testing.T) {
	// 1 token per 1/3 s: a float or a ns-rounded rate would drift after
	// many refills; exact rationals refill exactly 3 per second forever.
	for _, l := range []Limit{tb(1, 3, time.Second), gcra(1, 3, time.Second)} {
		var s State
		admitted := 0
		for i := range 300_000 {
			now := at(time.Duration(i) * 10 * time.Microsecond) // every 10 µs for 3 s
			if d, _ := TakeAt(l, &s, now, 1); d.Allowed {
				admitted++
			}
		}
		// Full at 0, then one every 333333333.33 ns over 2.99999 s: 1 + 8.
		if admitted != 9 {
			t.Errorf("%v: admitted %d, want 9", l.Algorithm, admitted)
		}
	}
}

func TestValidation(t *testing.T) {
	var s State
	l := tb(6, 2, time.Second)
	for _, cost := range []int64{7, 0, -1} {
		_, err := TakeAt(l, &s, at(0), cost)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "cost") {
			t.Errorf("cost %d: err %v, want ErrInvalid naming cost", cost, err)
		}
	}
	if s != (State{}) {
		t.Fatalf("a bad call changed the state: %+v", s)
	}
	bad := map[string]Limit{
		"capacity":     tb(0, 2, time.Second),
		"big capacity": tb(MaxCapacity+1, 2, time.Second),
		"rate count":   tb(6, 0, time.Second),
		"rate period":  tb(6, 1, 0),
		"long period":  tb(6, 1, MaxPer+1),
		"refill":       tb(MaxCapacity, 1, MaxPer),
		"window":       {Algorithm: SlidingWindow, Capacity: 5},
		"calendar":     {Algorithm: FixedWindow, Capacity: 5, Calendar: 9},
		"algorithm":    {Algorithm: 9, Capacity: 5},
	}
	for name, l := range bad {
		field := strings.Fields(name)[len(strings.Fields(name))-1]
		err := l.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: Validate = %v, want ErrInvalid naming %q", name, err, field)
		}
		if _, err := TakeAt(l, &s, at(0), 1); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: TakeAt err %v", name, err)
		}
	}
	for _, a := range []Algorithm{TokenBucket, GCRA, SlidingWindow, FixedWindow} {
		got, err := ParseAlgorithm(a.String())
		if err != nil || got != a {
			t.Errorf("ParseAlgorithm(%q) = %v, %v", a, got, err)
		}
	}
	if _, err := ParseAlgorithm("leaky"); !errors.Is(err, ErrInvalid) {
		t.Errorf("ParseAlgorithm(leaky) err %v", err)
	}
	if Minute.String() != "minute" || Month.String() != "month" {
		t.Error("Calendar.String")
	}
}

func TestBackwardClockMintsNothing(t *testing.T) {
	for _, l := range []Limit{tb(6, 2, time.Second), gcra(6, 2, time.Second), sw(6, time.Second), fw(6, Minute)} {
		t.Run(l.Algorithm.String(), func(t *testing.T) {
			var s State
			for range 6 {
				mustTake(t, l, &s, at(10*time.Second), 1, true)
			}
			// The clock jumps back a minute, then crawls forward; nothing may
			// be admitted before the bucket's own clock passes 10.5 s.
			for _, back := range []time.Duration{-time.Minute, -time.Hour, 5 * time.Second, 10*time.Second + 499*time.Millisecond} {
				mustTake(t, l, &s, at(back), 1, false)
			}
		})
	}
}

func mustTake(t *testing.T, l Limit, s *State, now time.Time, cost int64, allowed bool) Decision {
	t.Helper()
	d, err := TakeAt(l, s, now, cost)
	if err != nil {
		t.Fatal(err)
	}
	if d.Allowed != allowed {
		t.Fatalf("%v at %v cost %d: allowed %v, want %v (%+v)", l.Algorithm, now.Sub(epoch), cost, d.Allowed, allowed, d)
	}
	if !d.Allowed && d.RetryAfter <= 0 {
		t.Fatalf("denial with RetryAfter %v", d.RetryAfter)
	}
	if d.Allowed && d.RetryAfter != 0 {
		t.Fatalf("allow with RetryAfter %v", d.RetryAfter)
	}
	return d
}

func TestLimitChangeClamps(t *testing.T) {
	var s State
	l := tb(100, 10, time.Second)
	mustTake(t, l, &s, at(0), 40, true) // 60 left
	small := tb(10, 10, time.Second)
	d := mustTake(t, small, &s, at(0), 1, true)
	if d.Remaining != 9 {
		t.Fatalf("after shrinking to 10: remaining %d, want 9 (clamped, not reset)", d.Remaining)
	}
	// Growing again does not mint: the balance stays 9 and refills at the rate.
	d = mustTake(t, l, &s, at(0), 1, true)
	if d.Remaining != 8 {
		t.Fatalf("after growing back: remaining %d, want 8", d.Remaining)
	}
	// gcra keeps its debt clamped to the new burst.
	var g State
	mustTake(t, gcra(100, 10, time.Second), &g, at(0), 40, true)
	d = mustTake(t, gcra(10, 10, time.Second), &g, at(0), 1, false)
	if d.Remaining != 0 {
		t.Fatalf("gcra after shrinking: remaining %d, want 0", d.Remaining)
	}
	// Windows clamp counts.
	var w State
	mustTake(t, sw(100, time.Minute), &w, at(0), 90, true)
	d = mustTake(t, sw(10, time.Minute), &w, at(0), 1, false)
	if d.Remaining != 0 {
		t.Fatalf("sliding after shrinking: remaining %d", d.Remaining)
	}
	// A changed algorithm converts: a token bucket 3 s from full becomes a
	// gcra debt of 3 s.
	var c State
	mustTake(t, tb(6, 2, time.Second), &c, at(0), 6, true)
	d = mustTake(t, gcra(6, 2, time.Second), &c, at(0), 1, false)
	if d.ResetAfter != 3*time.Second || d.RetryAfter != 500*time.Millisecond {
		t.Fatalf("converted: %+v", d)
	}
}

func TestEvictableOnlyWhenFull(t *testing.T) {
	if !(State{}).EvictableAt(at(0)) {
		t.Fatal("a missing bucket is full")
	}
	for _, l := range []Limit{tb(6, 2, time.Second), gcra(6, 2, time.Second), sw(6, time.Second), fw(6, Minute)} {
		var s State
		d := mustTake(t, l, &s, at(0), 3, true)
		full := d.ResetAfter
		if full <= 0 {
			t.Fatalf("%v: ResetAfter %v", l.Algorithm, full)
		}
		if s.EvictableAt(at(full - 1)) {
			t.Errorf("%v: evictable 1ns before full", l.Algorithm)
		}
		if !s.EvictableAt(at(full)) {
			t.Errorf("%v: not evictable when full", l.Algorithm)
		}
		if s.EvictableAt(at(-time.Hour)) {
			t.Errorf("%v: evictable under a backward clock", l.Algorithm)
		}
		// Once evictable, a fresh bucket decides like the old one would.
		old := s
		d1 := mustTake(t, l, &old, at(full), 1, true)
		var fresh State
		d2 := mustTake(t, l, &fresh, at(full), 1, true)
		if d1 != d2 {
			t.Errorf("%v: evicted bucket differs: %+v vs %+v", l.Algorithm, d1, d2)
		}
	}
}

func TestRefund(t *testing.T) {
	for _, l := range []Limit{tb(6, 2, time.Second), gcra(6, 2, time.Second), sw(6, time.Second), fw(6, Minute)} {
		var s State
		mustTake(t, l, &s, at(0), 4, true)
		RefundAt(l, &s, at(0), 3)
		d := mustTake(t, l, &s, at(0), 5, true)
		if d.Remaining != 0 {
			t.Errorf("%v: remaining %d after refund, want 0", l.Algorithm, d.Remaining)
		}
		RefundAt(l, &s, at(0), 6)
		RefundAt(l, &s, at(0), 6) // never above capacity
		mustTake(t, l, &s, at(0), 6, true)
		mustTake(t, l, &s, at(0), 1, false)
	}
}

func TestScaleAndPolicyWindow(t *testing.T) {
	l := tb(6, 2, time.Second)
	if got := l.PolicyWindow(); got != 3*time.Second {
		t.Errorf("PolicyWindow = %v", got)
	}
	s3 := l.Scale(3)
	if s3.Capacity != 2 || s3.Rate != (Rate{2, 3 * time.Second}) || s3.Validate() != nil {
		t.Errorf("Scale(3) = %+v", s3)
	}
	if s := l.Scale(2); s.Capacity != 3 || s.Rate != (Rate{1, time.Second}) {
		t.Errorf("Scale(2) = %+v", s)
	}
	if s := l.Scale(100); s.Capacity != 1 || s.Validate() != nil {
		t.Errorf("Scale(100) = %+v", s)
	}
	if s := l.Scale(0); s != l {
		t.Errorf("Scale(0) = %+v", s)
	}
	for c, want := range map[Calendar]time.Duration{Minute: time.Minute, Hour: time.Hour, Day: 24 * time.Hour, Month: 30 * 24 * time.Hour} {
		if got := fw(1, c).PolicyWindow(); got != want {
			t.Errorf("%v PolicyWindow = %v", c, got)
		}
	}
	if got := sw(1, 7*time.Second).PolicyWindow(); got != 7*time.Second {
		t.Errorf("sliding PolicyWindow = %v", got)
	}
}

func TestStateSize(t *testing.T) {
	if n := unsafeSizeof(); n > 32 {
		t.Fatalf("State is %d bytes, want <= 32", n)
	}
}
