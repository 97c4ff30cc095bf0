package transport

import (
	"slices"
	"testing"
	"time"
)

// Step kinds.
const (
	add = iota
	tick
	done
)

// step is one input to a Batcher and what it must answer.
type step struct {
	kind     int
	item     int           // the item to add
	at       time.Duration // now, relative to t0 (add, tick)
	flush    []int         // expected flush (nil for none)
	next     time.Duration // expected next after add, relative to t0; none for the zero time
	len      int           // expected Len afterwards
	inflight int           // expected InFlight afterwards
}

const none = -1

func TestBatcherSteps(t *testing.T) {
	const us = time.Microsecond
	tests := []struct {
		name   string
		window time.Duration
		max    int
		steps  []step
	}{
		{"idle peer: every add is sent alone at once", 100 * us, 10, []step{
			{kind: add, item: 1, at: 0, flush: []int{1}, next: none, inflight: 1},
			{kind: done, inflight: 0},
			{kind: add, item: 2, at: 5 * us, flush: []int{2}, next: none, inflight: 1},
			{kind: done, inflight: 0},
		}},
		{"in flight: adds collect until done", 100 * us, 10, []step{
			{kind: add, item: 1, at: 0, flush: []int{1}, next: none, inflight: 1},
			{kind: add, item: 2, at: 10 * us, next: 110 * us, len: 1, inflight: 1},
			{kind: add, item: 3, at: 20 * us, next: 110 * us, len: 2, inflight: 1},
			{kind: done, flush: []int{2, 3}, inflight: 1},
			{kind: done, inflight: 0},
			{kind: done, inflight: 0}, // a surplus done does not go negative
		}},
		{"size cap sends the filling add's batch", 100 * us, 3, []step{
			{kind: add, item: 1, at: 0, flush: []int{1}, next: none, inflight: 1},
			{kind: add, item: 2, at: 0, next: 100 * us, len: 1, inflight: 1},
			{kind: add, item: 3, at: 1 * us, next: 100 * us, len: 2, inflight: 1},
			{kind: add, item: 4, at: 2 * us, flush: []int{2, 3, 4}, next: none, inflight: 2},
			// the next batch opens with its own window
			{kind: add, item: 5, at: 30 * us, next: 130 * us, len: 1, inflight: 2},
			{kind: done, len: 1, inflight: 1}, // one still in flight: keep collecting
			{kind: done, flush: []int{5}, inflight: 1},
		}},
		{"window sends on tick at the due time, not before", 100 * us, 10, []step{
			{kind: add, item: 1, at: 0, flush: []int{1}, next: none, inflight: 1},
			{kind: add, item: 2, at: 10 * us, next: 110 * us, len: 1, inflight: 1},
			{kind: add, item: 3, at: 50 * us, next: 110 * us, len: 2, inflight: 1},
			{kind: tick, at: 109 * us, len: 2, inflight: 1},
			{kind: tick, at: 110 * us, flush: []int{2, 3}, inflight: 2},
			{kind: tick, at: 300 * us, inflight: 2},
		}},
		{"a late add sends the due batch with itself", 100 * us, 10, []step{
			{kind: add, item: 1, at: 0, flush: []int{1}, next: none, inflight: 1},
			{kind: add, item: 2, at: 0, next: 100 * us, len: 1, inflight: 1},
			{kind: add, item: 3, at: 150 * us, flush: []int{2, 3}, next: none, inflight: 2},
		}},
		{"zero window never batches", 0, 10, []step{
			{kind: add, item: 1, at: 0, flush: []int{1}, next: none, inflight: 1},
			{kind: add, item: 2, at: 0, flush: []int{2}, next: none, inflight: 2},
			{kind: add, item: 3, at: 0, flush: []int{3}, next: none, inflight: 3},
		}},
		{"cap of one never batches", time.Millisecond, 1, []step{
			{kind: add, item: 1, at: 0, flush: []int{1}, next: none, inflight: 1},
			{kind: add, item: 2, at: 0, flush: []int{2}, next: none, inflight: 2},
		}},
		{"a stale tick for a batch that left early does nothing", 100 * us, 10, []step{
			{kind: add, item: 1, at: 0, flush: []int{1}, next: none, inflight: 1},
			{kind: add, item: 2, at: 0, next: 100 * us, len: 1, inflight: 1},
			{kind: done, flush: []int{2}, inflight: 1},
			{kind: add, item: 3, at: 50 * us, next: 150 * us, len: 1, inflight: 1},
			{kind: tick, at: 100 * us, len: 1, inflight: 1}, // the timer armed for item 2
			{kind: tick, at: 150 * us, flush: []int{3}, inflight: 2},
		}},
		{"time going backwards does not send early", 100 * us, 10, []step{
			{kind: add, item: 1, at: 500 * us, flush: []int{1}, next: none, inflight: 1},
			{kind: add, item: 2, at: 500 * us, next: 600 * us, len: 1, inflight: 1},
			{kind: add, item: 3, at: 0, next: 600 * us, len: 2, inflight: 1},
			{kind: tick, at: 300 * us, len: 2, inflight: 1},
			{kind: tick, at: 600 * us, flush: []int{2, 3}, inflight: 2},
		}},
		{"tick and done on an empty batcher", 100 * us, 10, []step{
			{kind: tick, at: 0},
			{kind: done},
		}},
	}
	t0 := time.Unix(1000, 0)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBatcher[int](tt.window, tt.max)
			for i, s := range tt.steps {
				now := t0.Add(s.at)
				var flush []int
				switch s.kind {
				case tick:
					flush = b.Tick(now)
				case done:
					flush = b.Done()
				case add:
					var next time.Time
					flush, next = b.Add(s.item, now)
					want := time.Time{}
					if s.next != none {
						want = t0.Add(s.next)
					}
					if !next.Equal(want) {
						t.Errorf("step %d: next = %v, want %v", i, next.Sub(t0), s.next)
					}
				}
				if !slices.Equal(flush, s.flush) || (flush == nil) != (s.flush == nil) {
					t.Errorf("step %d: flush = %v, want %v", i, flush, s.flush)
				}
				if b.Len() != s.len || b.InFlight() != s.inflight {
					t.Errorf("step %d: Len %d InFlight %d, want %d %d", i, b.Len(), b.InFlight(), s.len, s.inflight)
				}
				if (b.Len() > 0) == b.Next().IsZero() {
					t.Errorf("step %d: Next = %v with Len %d", i, b.Next(), b.Len())
				}
			}
		})
	}
}

func TestBatcherFlushIsOwnedByCaller(t *testing.T) {
	t0 := time.Unix(0, 0)
	b := NewBatcher[int](time.Millisecond, 2)
	b.Add(0, t0) // in flight
	b.Add(1, t0)
	first, _ := b.Add(2, t0)
	b.Add(3, t0)
	b.Add(4, t0)
	if !slices.Equal(first, []int{1, 2}) {
		t.Fatalf("first batch changed to %v after later adds", first)
	}
}

func TestBatcherDrain(t *testing.T) {
	t0 := time.Unix(0, 0)
	b := NewBatcher[int](time.Hour, 10)
	if got := b.Drain(); got != nil {
		t.Fatalf("Drain of empty = %v", got)
	}
	b.Add(0, t0)
	b.Add(1, t0)
	b.Add(2, t0)
	if got := b.Drain(); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("Drain = %v", got)
	}
	if b.Len() != 0 || !b.Next().IsZero() || b.InFlight() != 1 {
		t.Fatalf("after Drain: Len %d Next %v InFlight %d", b.Len(), b.Next(), b.InFlight())
	}
}

func TestBatcherClampsArguments(t *testing.T) {
	t0 := time.Unix(0, 0)
	b := NewBatcher[int](-time.Second, 0)
	b.Add(0, t0)
	if flush, _ := b.Add(1, t0); !slices.Equal(flush, []int{1}) {
		t.Fatalf("negative window, zero cap, in flight: flush = %v, want [1]", flush)
	}
}

// FuzzBatcher checks invariants over random step sequences: every item
// leaves exactly once and in order, no batch exceeds the cap, nothing is
// held while the peer is idle, and no open batch outlives its window past
// a tick.
func FuzzBatcher(f *testing.F) {
	f.Add([]byte{0, 1, 2, 0, 0, 1, 2, 2}, uint8(3), uint8(10))
	f.Fuzz(func(t *testing.T, ops []byte, maxBatch, windowUs uint8) {
		b := NewBatcher[int](time.Duration(windowUs)*time.Microsecond, int(maxBatch))
		now := time.Unix(0, 0)
		var sent []int
		next := 0
		for _, op := range ops {
			now = now.Add(time.Duration(op>>2) * time.Microsecond)
			var flush []int
			switch op & 3 {
			case 0, 3:
				flush, _ = b.Add(next, now)
				next++
			case 1:
				flush = b.Tick(now)
				if b.Len() > 0 && !now.Before(b.Next()) {
					t.Fatal("a due batch survived a tick")
				}
			case 2:
				flush = b.Done()
			}
			if len(flush) > max(int(maxBatch), 1) {
				t.Fatalf("batch of %d over cap %d", len(flush), maxBatch)
			}
			sent = append(sent, flush...)
			if b.InFlight() == 0 && b.Len() > 0 {
				t.Fatal("items held while nothing is in flight")
			}
		}
		sent = append(sent, b.Drain()...)
		for i, v := range sent {
			if v != i {
				t.Fatalf("items left as %v, want 0..%d in order", sent, next-1)
			}
		}
		if len(sent) != next {
			t.Fatalf("%d items left, %d added", len(sent), next)
		}
	})
}
