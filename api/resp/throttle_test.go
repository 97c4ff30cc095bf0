package resp_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestThrottleReadmeExample replays the example of redis-cell's README:
//
//	127.0.0.1:6379> CL.THROTTLE user123 15 30 60
//	1) (integer) 0
//	2) (integer) 16
//	3) (integer) 15
//	4) (integer) -1
//	5) (integer) 2
func TestThrottleReadmeExample(t *testing.T) {
	rn := startNode(t, testLimits, nil)
	c := rn.client(t, nil)
	if got := ints(t, c, "CL.THROTTLE", "user123", "15", "30", "60"); !slices.Equal(got, []int64{0, 16, 15, -1, 2}) {
		t.Fatalf("CL.THROTTLE user123 15 30 60 = %v, want [0 16 15 -1 2]", got)
	}
	// And the same with the explicit quantity of the README's diagram.
	if got := ints(t, c, "CL.THROTTLE", "user123", "15", "30", "60", "1"); !slices.Equal(got, []int64{0, 16, 14, -1, 4}) {
		t.Fatalf("second CL.THROTTLE = %v, want [0 16 14 -1 4]", got)
	}
}

// TestThrottleReplaysRedisCell replays redis-cell's own decision table
// (src/cell/mod.rs, it_rate_limits: max_burst 4, 1 token per second)
// through CL.THROTTLE on the fake clock, with redis-cell's rounding of the
// durations to seconds (whole seconds, plus one for a millisecond or more
// of remainder). Every case is answered as redis-cell answers it, among
// them the two that spend nothing: case 0 (quantity 6, above the limit of
// 5: limited, retry -1, the key's state) and case 12 (quantity 0, a peek:
// not limited, the key's state). The cases after each show that nothing
// was spent.
func TestThrottleReplaysRedisCell(t *testing.T) {
	rn := startNode(t, testLimits, nil)
	c := rn.client(t, nil)
	type step struct {
		at        time.Duration // since the start
		quantity  string
		remaining int64
		reset     time.Duration
		retry     time.Duration // -1s when allowed
		limited   bool
	}
	const none = -time.Second
	steps := []step{
		{0, "6", 5, 0, none, true}, // never fits: limited, retry -1, nothing spent
		{0, "1", 4, time.Second, none, false},
		{0, "1", 3, 2 * time.Second, none, false},
		{0, "1", 2, 3 * time.Second, none, false},
		{0, "1", 1, 4 * time.Second, none, false},
		{0, "1", 0, 5 * time.Second, none, false},
		{0, "1", 0, 5 * time.Second, time.Second, true},
		{3000 * time.Millisecond, "1", 2, 3000 * time.Millisecond, none, false},
		{3100 * time.Millisecond, "1", 1, 3900 * time.Millisecond, none, false},
		{4000 * time.Millisecond, "1", 1, 4000 * time.Millisecond, none, false},
		{8000 * time.Millisecond, "1", 4, 1000 * time.Millisecond, none, false},
		{9500 * time.Millisecond, "1", 4, 1000 * time.Millisecond, none, false},
		{9500 * time.Millisecond, "0", 4, time.Second, none, false}, // a peek
		{9500 * time.Millisecond, "2", 2, 3 * time.Second, none, false},
		{9500 * time.Millisecond, "5", 2, 3 * time.Second, 3 * time.Second, true},
	}
	seconds := func(d time.Duration) int64 { // redis-cell's rounding
		s := int64(d / time.Second)
		if (d%time.Second)/time.Millisecond > 0 {
			s++
		}
		return s
	}
	elapsed := time.Duration(0)
	for i, s := range steps {
		rn.clock.Advance(s.at - elapsed)
		elapsed = s.at
		args := []any{"CL.THROTTLE", "foo", "4", "1", "1", s.quantity}
		retry := int64(-1)
		if s.retry != none {
			retry = seconds(s.retry)
		}
		want := []int64{0, 5, s.remaining, retry, seconds(s.reset)}
		if s.limited {
			want[0] = 1
		}
		if got := ints(t, c, args...); !slices.Equal(got, want) {
			t.Fatalf("case %d at +%v quantity %s: %v, want %v", i, s.at, s.quantity, got, want)
		}
	}
}

// TestThrottleParametersChangeOnTheFly: as in redis-cell, the parameters
// come with every call and the key keeps its state (the theoretical
// arrival time) when they change.
func TestThrottleParametersChangeOnTheFly(t *testing.T) {
	rn := startNode(t, testLimits, nil)
	c := rn.client(t, nil)
	if got := ints(t, c, "CL.THROTTLE", "k", "4", "1", "1", "5"); !slices.Equal(got, []int64{0, 5, 0, -1, 5}) {
		t.Fatalf("empty the bucket: %v", got)
	}
	// redis-cell: TAT is now+5s; with max_burst 9 the tolerance is 10s,
	// so a take is allowed, TAT becomes now+6s: remaining (10-6)/1 = 4,
	// reset 6 s.
	if got := ints(t, c, "CL.THROTTLE", "k", "9", "1", "1"); !slices.Equal(got, []int64{0, 10, 4, -1, 6}) {
		t.Fatalf("after raising max_burst: %v, want [0 10 4 -1 6]", got)
	}
	// Back to max_burst 4 (tolerance 5s) with TAT at now+6s. redis-cell
	// keeps the whole arrival time and answers [1 5 0 2 6]; Weir clamps a
	// bucket's debt to its capacity when a limit shrinks (the limits
	// file's rule, documented in doc.go), so the arrival time becomes
	// now+5s: limited, retry 1 s, reset 5 s.
	if got := ints(t, c, "CL.THROTTLE", "k", "4", "1", "1"); !slices.Equal(got, []int64{1, 5, 0, 1, 5}) {
		t.Fatalf("after lowering max_burst: %v, want [1 5 0 1 5]", got)
	}
}

// TestThrottleNeedsInlineLimits: with inline_limits: false CL.THROTTLE is
// refused with the reason, like an inline limit on HTTP and gRPC.
func TestThrottleNeedsInlineLimits(t *testing.T) {
	rn := startNode(t, strings.Replace(testLimits, "inline_limits: true", "inline_limits: false", 1), nil)
	c := rn.client(t, nil)
	err := c.Do(context.Background(), "CL.THROTTLE", "k", "15", "30", "60").Err()
	if err == nil || err.Error() != "ERR checks[0]: inline limits are disabled: the limits file sets inline_limits: false" {
		t.Fatalf("CL.THROTTLE with inline limits off: %v", err)
	}
}

// TestThrottleAnswersWithoutSpending states redis-cell's replies to the
// two quantities that spend nothing (redis-cell's rate_limit: quantity 0
// "peeks"; an increment above the tolerance is limited and leaves
// retry_after at -1), on an untouched key and on one in debt, and checks
// that neither creates, spends or moves anything: the take after them sees
// what it would have seen without them.
func TestThrottleAnswersWithoutSpending(t *testing.T) {
	rn := startNode(t, testLimits, nil)
	c := rn.client(t, nil)
	// max_burst 4, 1 per second: limit 5, interval 1 s.
	cases := []struct {
		name     string
		at       time.Duration // since the start
		quantity string
		want     []int64 // [limited, limit, remaining, retry_s, reset_s]
	}{
		{"peek, untouched key", 0, "0", []int64{0, 5, 5, -1, 0}},
		{"too big, untouched key", 0, "6", []int64{1, 5, 5, -1, 0}},
		{"far too big, untouched key", 0, "1000000", []int64{1, 5, 5, -1, 0}},
		{"a take after them", 0, "2", []int64{0, 5, 3, -1, 2}},
		{"peek, key in debt", 500 * time.Millisecond, "0", []int64{0, 5, 3, -1, 2}},
		{"too big, key in debt", 500 * time.Millisecond, "6", []int64{1, 5, 3, -1, 2}},
		{"peek once more", 500 * time.Millisecond, "0", []int64{0, 5, 3, -1, 2}},
		{"a take after them", 500 * time.Millisecond, "3", []int64{0, 5, 0, -1, 5}},
		{"peek, key empty", 500 * time.Millisecond, "0", []int64{0, 5, 0, -1, 5}},
		{"a take denied", 500 * time.Millisecond, "1", []int64{1, 5, 0, 1, 5}},
	}
	elapsed := time.Duration(0)
	for _, tc := range cases {
		rn.clock.Advance(tc.at - elapsed)
		elapsed = tc.at
		if got := ints(t, c, "CL.THROTTLE", "spare", "4", "1", "1", tc.quantity); !slices.Equal(got, tc.want) {
			t.Fatalf("%s (quantity %s at +%v): %v, want %v", tc.name, tc.quantity, tc.at, got, tc.want)
		}
	}
}
