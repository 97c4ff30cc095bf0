package lease

import "time"

// timer is one instant at which Expire has work: a lease expiry or a parked
// waiter's deadline. Leases and waiters embed one, and the Table keeps all
// of them in a single min-heap so that Expire replays them in time order and
// Next is the top of the heap.
type timer struct {
	at  time.Time
	seq uint64 // tie-break: the lease's fencing token or the waiter's ticket
	idx int    // position in the heap; -1 when not in it
	l   *lease // exactly one of l and w is set
	w   *waiter
}

// before orders timers by instant; at the same instant a waiter's deadline
// comes before a lease's expiry (both are half-open intervals [start, at):
// a permit freed at instant e goes only to waiters still parked at e), then
// by sequence number, so the order is total and deterministic.
func (a *timer) before(b *timer) bool {
	if !a.at.Equal(b.at) {
		return a.at.Before(b.at)
	}
	if (a.w != nil) != (b.w != nil) {
		return a.w != nil
	}
	return a.seq < b.seq
}

// timerHeap is a binary min-heap of timers that keeps each timer's idx up
// to date, so that a renewed lease or a cancelled waiter is fixed or removed
// in O(log n). Typed rather than container/heap to avoid interface calls on
// the hot path.
type timerHeap []*timer

func (h *timerHeap) push(t *timer) {
	t.idx = len(*h)
	*h = append(*h, t)
	h.up(t.idx)
}

func (h *timerHeap) remove(t *timer) {
	i := t.idx
	last := len(*h) - 1
	if i != last {
		h.swap(i, last)
	}
	(*h)[last] = nil
	*h = (*h)[:last]
	t.idx = -1
	if i != last {
		h.fix(i)
	}
}

// fix restores heap order after the timer at position i changed its instant.
func (h *timerHeap) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h timerHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx = i
	h[j].idx = j
}

func (h timerHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h[i].before(h[p]) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h timerHeap) down(i int) bool {
	start := i
	for {
		c := 2*i + 1
		if c >= len(h) {
			break
		}
		if r := c + 1; r < len(h) && h[r].before(h[c]) {
			c = r
		}
		if !h[c].before(h[i]) {
			break
		}
		h.swap(i, c)
		i = c
	}
	return i > start
}
