package transport

import "time"

// Batcher groups items into batches. It is the pure core of forward
// batching, a step function: it reads no clock and starts no timer. The caller
// passes now, sends what Add, Tick and Done return, calls Done when a sent
// batch has been answered (or failed), and arranges a call to Tick at the
// time Add returned as next.
//
// The rule, per peer:
//
//   - When nothing is in flight, an item is sent at once, alone: an idle
//     peer adds no batching delay.
//   - While a batch is in flight, items collect in an open batch. It is sent
//     when the in-flight batches have all been answered (Done), when it holds
//     the size cap (Add), or when its window has passed since its first item
//     (Add or Tick at or after the due time), whichever comes first.
//
// So batches grow with the load and the round-trip time, and no item waits
// longer than the window for a batch to leave. A zero window sends every item
// on its own Add (no batching). Without the idle rule, a forward at low load
// would pay the whole window, which on an idle Go process is at least the
// runtime's 1ms timer resolution, not 200µs.
//
// A Batcher is not safe for concurrent use; the Pool guards each one with
// its peer's mutex. The zero Batcher is not usable; use NewBatcher.
type Batcher[T any] struct {
	window   time.Duration
	max      int
	items    []T
	due      time.Time // due time of the open batch; meaningful when len(items) > 0
	inflight int       // batches returned by Add, Tick or Done and not yet Done
}

// NewBatcher returns an idle Batcher with the given window and size cap.
// A negative window is taken as zero and a cap below 1 as 1.
func NewBatcher[T any](window time.Duration, maxBatch int) *Batcher[T] {
	return &Batcher[T]{window: max(window, 0), max: max(maxBatch, 1)}
}

// Add offers item at time now. If that makes a batch ready (the peer is
// idle, or the open batch is full or due), Add returns it as flush, now
// owned by the caller and counted in flight, and a zero next. Otherwise
// flush is nil and next is the time at which the caller should call Tick.
func (b *Batcher[T]) Add(item T, now time.Time) (flush []T, next time.Time) {
	if len(b.items) == 0 {
		if b.inflight == 0 {
			b.inflight++
			return []T{item}, time.Time{}
		}
		b.due = now.Add(b.window)
		if b.items == nil {
			b.items = make([]T, 0, min(b.max, 64))
		}
	}
	b.items = append(b.items, item)
	if len(b.items) >= b.max || !now.Before(b.due) {
		return b.take(), time.Time{}
	}
	return nil, b.due
}

// Tick returns the open batch if it is due at now, and nil otherwise (no
// open batch, or a timer that fired for an older batch).
func (b *Batcher[T]) Tick(now time.Time) (flush []T) {
	if len(b.items) == 0 || now.Before(b.due) {
		return nil
	}
	return b.take()
}

// Done records that one batch in flight was answered or failed. When that
// leaves nothing in flight, the open batch, if any, is returned to be sent
// at once.
func (b *Batcher[T]) Done() (flush []T) {
	if b.inflight > 0 {
		b.inflight--
	}
	if b.inflight > 0 || len(b.items) == 0 {
		return nil
	}
	return b.take()
}

// Next returns the due time of the open batch, or the zero time when there
// is none.
func (b *Batcher[T]) Next() time.Time {
	if len(b.items) == 0 {
		return time.Time{}
	}
	return b.due
}

// Len returns the number of items in the open batch.
func (b *Batcher[T]) Len() int { return len(b.items) }

// InFlight returns the number of batches handed out and not yet Done.
func (b *Batcher[T]) InFlight() int { return b.inflight }

// Drain returns the open batch whether or not it is due, leaving the
// Batcher empty, and does not count it in flight; nil when there is none.
// It is used on shutdown.
func (b *Batcher[T]) Drain() []T {
	f := b.items
	b.items = nil
	if len(f) == 0 {
		return nil
	}
	return f
}

// take hands the open batch to the caller, counts it in flight and starts
// a fresh slice, since the caller keeps the old one while it is sent.
func (b *Batcher[T]) take() []T {
	f := b.items
	b.items = nil
	b.inflight++
	return f
}
