package bucket

import (
	"testing"
	"time"
)

func TestSnapshotSurvivesAnotherClock(t *testing.T) {
	limits := []Limit{tb(6, 2, time.Second), gcra(6, 2, time.Second), sw(6, 10*time.Second), fw(6, Hour), tb(7, 3, 10*time.Second)}
	for _, l := range limits {
		t.Run(l.Algorithm.String(), func(t *testing.T) {
			var a State
			mustTake(t, l, &a, at(0), 4, true)
			mustTake(t, l, &a, at(700*time.Millisecond), 1, true)
			// The receiver's clock reads 5 h and 123 ns ahead. Fixed windows
			// follow the UTC calendar, so there the skew stays within the
			// hour, and the period ends 17 s sooner on the receiver's clock.
			skew := 5*time.Hour + 123
			var sooner time.Duration
			if l.Algorithm == FixedWindow {
				skew, sooner = 17*time.Second, 17*time.Second
			}
			snap := ExportAt(l, a, at(time.Second))
			b := ImportAt(l, snap, at(time.Second+skew))
			// Both decide the same from here on, each on its own clock.
			for _, dt := range []time.Duration{0, 100 * time.Millisecond, 2 * time.Second, 3 * time.Second, 11 * time.Second} {
				da := mustTakeAny(t, l, &a, at(time.Second+dt))
				db := mustTakeAny(t, l, &b, at(time.Second+skew+dt))
				if da.ResetAfter > 0 {
					da.ResetAfter -= sooner
				}
				if da.RetryAfter > 0 {
					da.RetryAfter -= sooner
				}
				if da != db {
					t.Fatalf("after %v: exporter %+v, importer %+v", dt, da, db)
				}
			}
		})
	}
}

func mustTakeAny(t *testing.T, l Limit, s *State, now time.Time) Decision {
	t.Helper()
	d, err := TakeAt(l, s, now, 1)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestMergeKeepsFewerTokens(t *testing.T) {
	for _, l := range []Limit{tb(10, 1, time.Second), gcra(10, 1, time.Second), sw(10, time.Minute), fw(10, Day)} {
		t.Run(l.Algorithm.String(), func(t *testing.T) {
			var a, b State
			mustTake(t, l, &a, at(0), 3, true)
			mustTake(t, l, &b, at(0), 7, true)
			snapB := ExportAt(l, b, at(0))
			snapA := ExportAt(l, a, at(0))
			x, y := a, b
			MergeAt(l, &x, snapB, at(0))
			MergeAt(l, &y, snapA, at(0))
			for _, s := range []*State{&x, &y} {
				d := mustTake(t, l, s, at(0), 3, true)
				if d.Remaining != 0 {
					t.Fatalf("merged remaining %d, want 0 (the fewer tokens)", d.Remaining)
				}
				mustTake(t, l, s, at(0), 1, false)
			}
			// Merging into a missing bucket adopts the snapshot; merging a
			// full snapshot changes nothing.
			var z State
			MergeAt(l, &z, snapB, at(0))
			if d := mustTake(t, l, &z, at(0), 3, true); d.Remaining != 0 {
				t.Fatalf("merged into missing: %+v", d)
			}
			before := z
			MergeAt(l, &z, ExportAt(l, State{}, at(0)), at(0))
			if z != before {
				t.Fatal("a full snapshot changed the bucket")
			}
		})
	}
}

func TestSnapshotZeroIsConservative(t *testing.T) {
	s := ImportAt(tb(5, 1, time.Second), Snapshot{}, at(0))
	if d := mustTake(t, tb(5, 1, time.Second), &s, at(0), 1, false); d.RetryAfter != time.Second {
		t.Fatalf("zero snapshot: %+v", d)
	}
	if !ExportAt(tb(5, 1, time.Second), State{}, at(0)).Full {
		t.Fatal("a missing bucket exports as Full")
	}
}
