package bucket

import (
	"fmt"
	"time"
)

// State is the live state of one bucket. The zero value is a missing
// bucket, which is full. A State is interpreted under the Limit passed with
// it; a changed Limit of the same algorithm migrates it (tokens clamp to the
// new capacity, nothing resets), and a State kept under another algorithm is
// converted through a Snapshot. A State is a plain value, 32 bytes, and not
// safe for concurrent use; the Store locks around it.
type State struct {
	// tv holds the algorithm tag in its top byte (0: missing, else
	// Algorithm+1) and, below it, a non-negative count v < 2^56:
	// token_bucket whole tokens, gcra fraction of the arrival time in units
	// of 1/Rate.N ns, sliding_window current count, fixed_window count.
	tv uint64
	// w is token_bucket's fraction of a token in units of 1/Rate.Per,
	// gcra's theoretical arrival time in whole ns, sliding_window's
	// previous count, or fixed_window's period end.
	w int64
	// last is the latest instant seen (token_bucket, gcra) or the start of
	// the current window (sliding_window, fixed_window), in Unix ns.
	last int64
	// full is the instant (Unix ns) from which the bucket holds no debt,
	// recorded at every transition so that eviction needs no Limit.
	full int64
}

const (
	tagShift = 56
	valMask  = 1<<tagShift - 1
)

// alg returns the algorithm the state was kept under and whether it holds
// any state at all.
func (s State) alg() (Algorithm, bool) {
	t := s.tv >> tagShift
	if t == 0 {
		return 0, false
	}
	return Algorithm(t - 1), true
}

func (s State) val() uint64 { return s.tv & valMask }

func (s *State) set(a Algorithm, v uint64) { s.tv = uint64(a+1)<<tagShift | v&valMask }

// FullAt is the instant from which the bucket holds no debt, as recorded
// at its last transition. Unlike a Decision's ResetAfter it is absolute: a
// clock that went backwards decides at the latest instant the state has
// seen, not at now. The zero State, a missing bucket, is full from the
// zero instant of Unix time.
func (s State) FullAt() time.Time { return time.Unix(0, s.full) }

// SnapshotAt is the state as stored, in relative terms as of now: what
// Store.SnapshotAt returns for a bucket holding s. It needs no Limit, and
// does not bring the state up to now (Since and UntilFull say how far it
// is), so a snapshot of a state captured earlier is the same as one of
// the stored state, as long as nothing changed the bucket since.
func (s State) SnapshotAt(now time.Time) Snapshot { return exportAt(s, now.UnixNano()) }

// EvictableAt reports whether the bucket would be full at now, so that
// forgetting it grants nothing: a missing bucket starts full. It uses the
// full-at instant recorded at the last transition, under the limit then in
// force, and needs no Limit. A clock that went backwards keeps a bucket.
func (s State) EvictableAt(now time.Time) bool {
	if _, ok := s.alg(); !ok {
		return true
	}
	return now.UnixNano() >= s.full
}

// Decision is the outcome of one take. It is a small value, returned by
// value to avoid an allocation.
type Decision struct {
	// Allowed reports whether the cost was spent.
	Allowed bool
	// Remaining is the whole number of tokens (or window units) left after
	// the take, rounded down.
	Remaining int64
	// Limit is the limit's Capacity.
	Limit int64
	// RetryAfter is zero when allowed; for a denial, the time until the
	// same cost would fit, rounded up to the next nanosecond, never zero.
	// It is guidance, not a reservation.
	RetryAfter time.Duration
	// ResetAfter is the time until the bucket is full again, rounded up.
	ResetAfter time.Duration
	// Instance names the lineage of the state that decided, for checkers
	// that replay a bucket's decisions (Store.TakeAt sets it; TakeAt leaves
	// it zero). Within one Store it stays the same for as long as only
	// takes change the bucket, and changes whenever state may have been
	// replaced or changed otherwise: a refund, a merge, an import or a
	// removal by export. It is not unique across Stores or restarts.
	Instance uint64
	// State is the bucket's state after the take, as the Store keeps it
	// when the request is admitted (Store.TakeAt sets it; the package's
	// TakeAt, on one state, leaves it zero): what a replica of the bucket
	// needs (State.SnapshotAt), so the replication stream need not look
	// the bucket up again, and when it holds no debt (State.FullAt).
	State State
}

// TakeAt is the atomic transition of one bucket at now: it refills (or
// rolls the window), tests whether cost fits, spends it when it does, and
// stores the result in *s on allow and on deny.
// Time is clamped to the latest instant the state has seen, so a clock that
// jumps backwards mints nothing. An invalid limit or a cost outside
// 1..Capacity is an error wrapping ErrInvalid, and *s is not changed.
// Now should come from one clock per owner, preferably monotonic (for
// example start.Add(time.Since(start))); fixed_window reads it as UTC.
func TakeAt(l Limit, s *State, now time.Time, cost int64) (Decision, error) {
	if err := l.Validate(); err != nil {
		return Decision{}, err
	}
	if err := checkCost(l, cost); err != nil {
		return Decision{}, err
	}
	return take(l, s, now.UnixNano(), cost), nil
}

// PeekAt answers what the bucket holds at now without spending: the
// Decision a take of nothing would return (Allowed true, RetryAfter zero,
// Remaining and ResetAfter as of now). It reads s and changes nothing; a
// missing bucket reads as full. An invalid limit is an error wrapping
// ErrInvalid. Remaining is the largest cost a take at now would admit
// (capped at Capacity), so a peek never promises more than a take grants.
func PeekAt(l Limit, s State, now time.Time) (Decision, error) {
	if err := l.Validate(); err != nil {
		return Decision{}, err
	}
	return take(l, &s, now.UnixNano(), 0), nil
}

// checkCost reports a cost outside 1..l.Capacity.
func checkCost(l Limit, cost int64) error {
	if cost < 1 {
		return fmt.Errorf("%w: cost %d must be at least 1", ErrInvalid, cost)
	}
	if cost > l.Capacity {
		return fmt.Errorf("%w: cost %d exceeds capacity %d", ErrInvalid, cost, l.Capacity)
	}
	return nil
}

// checkSpend is checkCost for a Store check, where cost 0 is a peek.
func checkSpend(l Limit, cost int64) error {
	if cost == 0 {
		return nil
	}
	return checkCost(l, cost)
}

// take is TakeAt for a valid limit and cost, with now in Unix ns. A cost
// of 0 spends nothing and is always allowed (PeekAt).
func take(l Limit, s *State, now int64, cost int64) Decision {
	migrate(l, s, now)
	switch l.Algorithm {
	case TokenBucket:
		return tbTake(l, s, now, cost)
	case GCRA:
		return gcraTake(l, s, now, cost)
	case SlidingWindow:
		return swTake(l, s, now, cost)
	default:
		return fwTake(l, s, now, cost)
	}
}

// migrate converts a state kept under another algorithm into l's, through
// a snapshot, so a changed algorithm never resets a bucket.
func migrate(l Limit, s *State, now int64) {
	a, ok := s.alg()
	if ok && a != l.Algorithm {
		*s = importAt(l, exportAt(*s, now), now)
	}
}

// RefundAt gives cost back to the bucket at now, never above capacity: it
// undoes a take whose request was denied elsewhere (a multi-check whose
// other bucket lives on another owner). A missing bucket is already full.
// An invalid limit or cost changes nothing.
func RefundAt(l Limit, s *State, now time.Time, cost int64) {
	if l.Validate() != nil || checkCost(l, cost) != nil {
		return
	}
	if _, ok := s.alg(); !ok {
		return
	}
	refund(l, s, now.UnixNano(), cost)
}

func refund(l Limit, s *State, now int64, cost int64) {
	migrate(l, s, now)
	switch l.Algorithm {
	case TokenBucket:
		tbRefund(l, s, now, cost)
	case GCRA:
		gcraRefund(l, s, now, cost)
	case SlidingWindow:
		swRefund(l, s, now, cost)
	default:
		fwRefund(l, s, now, cost)
	}
}
