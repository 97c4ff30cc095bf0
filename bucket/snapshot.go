package bucket

import "time"

// Snapshot is a bucket's state in relative terms, to move a bucket between
// owners (handoff, replication) whose clocks differ. It holds no absolute
// instant: every time is a span from the exporter's now, which the importer
// re-anchors at its own now. Counts are exact, including the fraction of a
// token, so a handoff under the same Limit loses nothing. The zero value is a
// token bucket holding no tokens, the conservative reading of a snapshot
// that says nothing; a bucket with no state is exported with Full set.
type Snapshot struct {
	// Algorithm is the algorithm the bucket was kept under.
	Algorithm Algorithm
	// Full reports a bucket that holds no state, which counts as full; the
	// other fields are then zero.
	Full bool
	// Count is the whole tokens held (token_bucket) or the units used in
	// the current window or period (sliding_window, fixed_window).
	Count int64
	// Frac is token_bucket's fraction of a token, in units of 1/Rate.Per,
	// or gcra's fraction of a nanosecond of Ahead, in units of 1/Rate.N.
	Frac int64
	// Prev is sliding_window's count in the previous window.
	Prev int64
	// Ahead is gcra's theoretical arrival time minus now; zero or negative
	// means no debt.
	Ahead time.Duration
	// Since is now minus the state's anchor: the latest instant seen
	// (token_bucket, gcra; negative after a backward clock), the current
	// window start (sliding_window) or period start (fixed_window).
	Since time.Duration
	// Left is fixed_window's time until the period ends.
	Left time.Duration
	// UntilFull is the time until the bucket holds no debt.
	UntilFull time.Duration
}

// InDebtAfter reports whether the bucket still holds debt d after the
// snapshot was taken: it is not Full and its UntilFull is longer than d.
// InDebtAfter(0) is false for a bucket that holds no debt at all.
func (s Snapshot) InDebtAfter(d time.Duration) bool { return !s.Full && s.UntilFull > d }

// rel returns a-b, saturating at the int64 bounds.
func rel(a, b int64) time.Duration {
	d := a - b
	if (b < 0 && d < a) || (b > 0 && d > a) {
		if b < 0 {
			return time.Duration(maxInt64)
		}
		return time.Duration(-maxInt64 - 1)
	}
	return time.Duration(d)
}

// back returns now-d for a span d, saturating.
func back(now int64, d time.Duration) int64 {
	if d < 0 {
		if d == time.Duration(-maxInt64-1) {
			return maxInt64
		}
		return satAdd(now, uint64(-d))
	}
	r := now - int64(d)
	if r > now {
		return -maxInt64 - 1
	}
	return r
}

// ExportAt returns the bucket's state at now in relative terms. Under a
// valid limit of the state's algorithm the state is first brought up to now
// (refilled, windows rolled), so Since is zero and Count is the balance as
// of now; otherwise the stored state is exported as it stands.
func ExportAt(l Limit, s State, now time.Time) Snapshot {
	n := now.UnixNano()
	if a, ok := s.alg(); ok && a == l.Algorithm && l.Validate() == nil {
		advance(l, &s, n)
	}
	return exportAt(s, n)
}

// advance brings a present state of l's algorithm up to now without taking.
func advance(l Limit, s *State, now int64) {
	switch l.Algorithm {
	case TokenBucket:
		t, whole, frac := tbLoad(l, s, now)
		tbStore(l, s, t, whole, frac)
	case GCRA:
		t, debt := gcraLoad(l, s, now)
		gcraStore(l, s, t, debt)
	case SlidingWindow:
		t, start, cur, prev := swLoad(l, s, now)
		swStore(l, s, t, start, cur, prev)
	default:
		t, start, end, count := fwLoad(l, s, now)
		fwStore(s, t, start, end, count)
	}
}

// exportAt exports a state as stored; it needs no Limit.
func exportAt(s State, now int64) Snapshot {
	a, ok := s.alg()
	if !ok {
		return Snapshot{Full: true}
	}
	snap := Snapshot{Algorithm: a, Since: rel(now, s.last), UntilFull: time.Duration(dur(span(now, s.full)))}
	v := int64(s.val())
	switch a {
	case TokenBucket:
		snap.Count, snap.Frac = v, s.w
	case GCRA:
		snap.Frac, snap.Ahead = v, rel(s.w, now)
	case SlidingWindow:
		snap.Count, snap.Prev = v, s.w
	default:
		snap.Count, snap.Left = v, rel(s.w, now)
	}
	return snap
}

// ImportAt rebuilds a state from a snapshot at the importer's now. A
// snapshot of the limit's algorithm is restored exactly (counts clamped to
// the limit); one of another algorithm is converted conservatively: into
// token_bucket or gcra as a debt of UntilFull, into a window as a count
// used now. An invalid limit gives the zero State, a full bucket.
func ImportAt(l Limit, snap Snapshot, now time.Time) State {
	if l.Validate() != nil {
		return State{}
	}
	return importAt(l, snap, now.UnixNano())
}

// importAt is ImportAt at now in Unix ns under a valid limit. A snapshot
// of l's algorithm is restored exactly, in this function: that is the path
// of every handoff and replica, so it makes no call it does not need (one
// costs about 1 ns of its 12 to 18). One of another algorithm is
// converted, into a debt (importDebt) or a count used now (importUsed). It
// does not allocate.
func importAt(l Limit, snap Snapshot, now int64) State {
	var s State
	switch {
	case snap.Full:
		return s
	case snap.Algorithm != l.Algorithm && (l.Algorithm == TokenBucket || l.Algorithm == GCRA):
		importDebt(l, uint64(max(snap.UntilFull, 0)), now, &s)
		return s
	case snap.Algorithm != l.Algorithm:
		importUsed(l, &snap, now, &s)
		return s
	}
	// The same algorithm: counts are clamped to the capacity, negative ones
	// read as zero, and the state is re-anchored at now.
	b := uint64(l.Capacity)
	switch l.Algorithm {
	case TokenBucket:
		s.set(TokenBucket, min(nonNeg(snap.Count), b))
		s.w = int64(nonNeg(snap.Frac))
		s.last = back(now, snap.Since)
	case GCRA:
		s.set(GCRA, nonNeg(snap.Frac))
		s.w = back(now, -snap.Ahead)
		s.last = back(now, snap.Since)
	case SlidingWindow:
		s.set(SlidingWindow, min(nonNeg(snap.Count), b))
		s.w = int64(min(nonNeg(snap.Prev), b))
		s.last = back(now, max(snap.Since, 0))
	default:
		// The count belongs to the period holding the middle of the
		// exporter's period, as seen on this clock: robust to skew of
		// up to half a period. A period already over, or a zero count,
		// is a full bucket.
		count := nonNeg(snap.Count)
		mid := back(now, snap.Since/2-snap.Left/2)
		start, end := period(l.Calendar, mid)
		if end <= now || count == 0 {
			return State{}
		}
		s.set(FixedWindow, min(count, b))
		s.w, s.last, s.full = end, start, end
		return s
	}
	advance(l, &s, now)
	return s
}

// importDebt sets the zero *s to a state of l's algorithm, token_bucket or
// gcra, that is until ns short of full at now, so it is full at the same
// instant as the exported bucket; the debt is capped at an empty bucket.
// No debt leaves *s a full bucket.
func importDebt(l Limit, until uint64, now int64, s *State) {
	if until == 0 {
		return
	}
	// A debt of until ns is until*N/Per tokens: full at the same instant.
	per := uint64(l.Rate.Per)
	burst := mul(uint64(l.Capacity), per)
	debt := burst
	if until < uint64(MaxRefill) {
		if d := mul(until, uint64(l.Rate.N)); d.less(burst) {
			debt = d
		}
	}
	if l.Algorithm == GCRA {
		gcraStore(l, s, now, debt)
	} else {
		whole, fr := burst.sub(debt).divmod(per)
		tbStore(l, s, now, whole, fr)
	}
}

// importUsed sets the zero *s to a state of l's algorithm, sliding_window
// or fixed_window, that has used now what a snapshot of another algorithm
// had used, at most l.Capacity: a window's counts as they stand, or for a
// token_bucket or gcra the share of l's window it would still be busy
// (UntilFull over the window, rounded up). The units count in a window
// starting now (sliding) or in the period holding now (fixed). Nothing
// used leaves *s a full bucket.
func importUsed(l Limit, snap *Snapshot, now int64, s *State) {
	b := uint64(l.Capacity)
	var used uint64
	switch snap.Algorithm {
	case SlidingWindow, FixedWindow:
		used = nonNeg(snap.Count) + nonNeg(snap.Prev)
	default:
		until := uint64(max(snap.UntilFull, 0))
		w := uint64(l.PolicyWindow())
		used = b
		if until < w {
			used = mul(b, until).divCeil(w)
		}
	}
	used = min(used, b)
	if used == 0 {
		return
	}
	if l.Algorithm == SlidingWindow {
		swStore(l, s, now, now, used, 0)
		return
	}
	start, end := period(l.Calendar, now)
	fwStore(s, now, start, end, used)
}

func nonNeg(v int64) uint64 { return uint64(max(v, 0)) }

// MergeAt folds a snapshot into *s conservatively: the fewer tokens (the
// more used) wins, so merging replicas never grants more than either held.
// An invalid limit changes nothing.
func MergeAt(l Limit, s *State, snap Snapshot, now time.Time) {
	if l.Validate() != nil {
		return
	}
	mergeAt(l, s, snap, now.UnixNano())
}

func mergeAt(l Limit, s *State, snap Snapshot, now int64) {
	in := importAt(l, snap, now)
	if _, ok := in.alg(); !ok {
		return
	}
	if _, ok := s.alg(); !ok {
		*s = in
		return
	}
	migrate(l, s, now)
	switch l.Algorithm {
	case TokenBucket:
		t, w1, f1 := tbLoad(l, s, now)
		_, w2, f2 := tbLoad(l, &in, now)
		if w2 < w1 || (w2 == w1 && f2 < f1) {
			w1, f1 = w2, f2
		}
		tbStore(l, s, t, w1, f1)
	case GCRA:
		t, d1 := gcraLoad(l, s, now)
		if _, d2 := gcraLoad(l, &in, now); d1.less(d2) {
			d1 = d2
		}
		gcraStore(l, s, t, d1)
	case SlidingWindow:
		t, st1, c1, p1 := swLoad(l, s, now)
		_, st2, c2, p2 := swLoad(l, &in, now)
		swStore(l, s, t, max(st1, st2), max(c1, c2), max(p1, p2))
	default:
		t, st1, e1, c1 := fwLoad(l, s, now)
		_, st2, e2, c2 := fwLoad(l, &in, now)
		switch {
		case st2 > st1:
			st1, e1, c1 = st2, e2, c2
		case st2 == st1:
			c1 = max(c1, c2)
		}
		fwStore(s, t, st1, e1, c1)
	}
}
