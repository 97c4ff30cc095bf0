package bucket

import (
	"testing"
	"time"
	"unsafe"
)

func unsafeSizeof() uintptr { return unsafe.Sizeof(State{}) }

func sw(capacity int64, w time.Duration) Limit {
	return Limit{Algorithm: SlidingWindow, Capacity: capacity, Window: w}
}

func fw(capacity int64, c Calendar) Limit {
	return Limit{Algorithm: FixedWindow, Capacity: capacity, Calendar: c}
}

func TestSlidingWindowSteps(t *testing.T) {
	// Window 10 s from the first take at 0; limit 10.
	runSteps(t, sw(10, 10*time.Second), []step{
		{0, 10, true, 0, 0, 20 * time.Second},
		// Same window, full: wait for the next window where prev 10 must
		// weigh <= 9: 10*(10s-el)/10s <= 9 -> el >= 1 s: 10 s + 1 s from 0.
		{0, 1, false, 0, 11 * time.Second, 20 * time.Second},
		{9 * time.Second, 1, false, 0, 2 * time.Second, 11 * time.Second},
		{11 * time.Second, 1, true, 0, 0, 19 * time.Second},            // 10*0.9 + 1 = 10
		{15 * time.Second, 3, true, 1, 0, 15 * time.Second},            // 10*0.5 + 1 + 3 = 9
		{15 * time.Second, 2, false, 1, time.Second, 15 * time.Second}, // 10*(W-el)/W <= 4 at el = 6 s
		{16 * time.Second, 2, true, 0, 0, 14 * time.Second},
		{40 * time.Second, 10, true, 0, 0, 20 * time.Second}, // two windows idle: both counts gone
	})
}

func TestFixedWindowSteps(t *testing.T) {
	// Calendar minutes in UTC: epoch (1_700_000_000) is 22:13:20 UTC.
	base := time.Date(2026, 1, 31, 23, 59, 0, 0, time.UTC).Sub(epoch)
	runSteps(t, fw(3, Minute), []step{
		{base, 2, true, 1, 0, time.Minute},
		{base + 30*time.Second, 1, true, 0, 0, 30 * time.Second},
		{base + 59*time.Second, 1, false, 0, time.Second, time.Second},
		{base + time.Minute, 3, true, 0, 0, time.Minute},
	})
	// Month: January 31 23:59 to February 1.
	runSteps(t, fw(2, Month), []step{
		{base, 2, true, 0, 0, time.Minute},
		{base + 30*time.Second, 1, false, 0, 30 * time.Second, 30 * time.Second},
		{base + time.Minute, 1, true, 1, 0, 28 * 24 * time.Hour},
	})
}

func TestFixedWindowDoublesAtBoundarySlidingDoesNot(t *testing.T) {
	const limit = 100
	boundary := time.Date(2026, 3, 1, 12, 35, 0, 0, time.UTC).Sub(epoch)
	count := func(l Limit) int {
		var s State
		n := 0
		// 100 requests in the last 10 ms of a minute, then 100 in the first
		// 10 ms of the next: 200 offered within 20 ms.
		for i := range 200 {
			now := at(boundary - 10*time.Millisecond + time.Duration(i)*100*time.Microsecond)
			if d, _ := TakeAt(l, &s, now, 1); d.Allowed {
				n++
			}
		}
		return n
	}
	if n := count(fw(limit, Minute)); n != 2*limit {
		t.Errorf("fixed_window admitted %d across the boundary, want %d (the 2x contract)", n, 2*limit)
	}
	// A sliding window anchored 60 s before the burst: the previous
	// window's 100 still weigh ~100%.
	l := sw(limit, time.Minute)
	var s State
	mustTake(t, l, &s, at(boundary-2*time.Minute), 1, true) // anchors windows on the minute
	n := 0
	for i := range 200 {
		now := at(boundary - 10*time.Millisecond + time.Duration(i)*100*time.Microsecond)
		if d, _ := TakeAt(l, &s, now, 1); d.Allowed {
			n++
		}
	}
	if n > limit+1 {
		t.Errorf("sliding_window admitted %d across the boundary, want <= %d", n, limit+1)
	}
}

// A fixed window of Second periods admits its limit per whole second and
// starts again at the next one.
func TestFixedWindowSecond(t *testing.T) {
	l := fw(2, Second)
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	var s State
	at := func(ms int64) time.Time { return time.Unix(1700000000, ms*int64(time.Millisecond)) }
	for i, want := range []bool{true, true, false} {
		d, err := TakeAt(l, &s, at(250), 1)
		if err != nil || d.Allowed != want {
			t.Fatalf("take %d: %+v %v, want allowed %v", i, d, err, want)
		}
		if !want && d.RetryAfter != 750*time.Millisecond {
			t.Fatalf("retry after %v, want 750ms", d.RetryAfter)
		}
	}
	if d, _ := TakeAt(l, &s, at(1000), 1); !d.Allowed || d.Remaining != 1 {
		t.Fatalf("next second: %+v", d)
	}
	if got := l.PolicyWindow(); got != time.Second {
		t.Fatalf("policy window %v", got)
	}
	if _, err := ParseCalendar("second"); err == nil {
		t.Fatal("the limits file accepts second")
	}
}

func TestPeriodUTC(t *testing.T) {
	cases := []struct {
		c          Calendar
		t          time.Time
		start, end time.Time
	}{
		{Minute, time.Date(2026, 5, 4, 3, 2, 1, 5, time.UTC), time.Date(2026, 5, 4, 3, 2, 0, 0, time.UTC), time.Date(2026, 5, 4, 3, 3, 0, 0, time.UTC)},
		{Hour, time.Date(2026, 5, 4, 3, 2, 1, 5, time.UTC), time.Date(2026, 5, 4, 3, 0, 0, 0, time.UTC), time.Date(2026, 5, 4, 4, 0, 0, 0, time.UTC)},
		{Day, time.Date(2026, 5, 4, 23, 59, 59, 0, time.FixedZone("x", 3600)), time.Date(2026, 5, 4, 0, 0, 0, 0, time.UTC), time.Date(2026, 5, 5, 0, 0, 0, 0, time.UTC)},
		{Month, time.Date(2024, 2, 29, 1, 0, 0, 0, time.UTC), time.Date(2024, 2, 1, 0, 0, 0, 0, time.UTC), time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)},
		{Minute, time.Unix(-61, 0), time.Unix(-120, 0), time.Unix(-60, 0)},
		// The epoch-counted periods of envoyproxy/ratelimit: now - now%size.
		{Second, time.Unix(1700000000, 999999999), time.Unix(1700000000, 0), time.Unix(1700000001, 0)},
		{Week, time.Unix(1700000000, 0), time.Unix(1700000000-1700000000%604800, 0), time.Unix(1700000000-1700000000%604800+604800, 0)},
		{Days30, time.Unix(1700000000, 0), time.Unix(1700000000-1700000000%2592000, 0), time.Unix(1700000000-1700000000%2592000+2592000, 0)},
		{Days365, time.Unix(1700000000, 0), time.Unix(1700000000-1700000000%31536000, 0), time.Unix(1700000000-1700000000%31536000+31536000, 0)},
	}
	for _, c := range cases {
		s, e := period(c.c, c.t.UnixNano())
		if s != c.start.UnixNano() || e != c.end.UnixNano() {
			t.Errorf("%v %v: [%v, %v), want [%v, %v)", c.c, c.t, time.Unix(0, s).UTC(), time.Unix(0, e).UTC(), c.start, c.end)
		}
	}
}
