package bucket

import "time"

// Token bucket and GCRA keep exact rationals. A token bucket holds
// whole + frac/Per tokens (frac in [0, Per)); a GCRA state holds the
// theoretical arrival time TAT = tatNs + tatFrac/N ns (tatFrac in [0, N)).
// Refilling e ns adds exactly e*N/Per tokens, and spending c tokens moves the
// TAT by exactly c*Per/N ns, so the two never drift apart and decide
// identically on every arrival sequence, including a clock that goes back.

// tbLoad returns the clamped time and the refilled balance of a token
// bucket at now.
func tbLoad(l Limit, s *State, now int64) (t int64, whole, frac uint64) {
	b, per, n := uint64(l.Capacity), uint64(l.Rate.Per), uint64(l.Rate.N)
	if _, ok := s.alg(); !ok {
		return now, b, 0
	}
	t = max(now, s.last)
	whole, frac = s.val(), uint64(s.w)
	if frac >= per { // kept under a longer Per: drop the fraction, conservatively
		frac = 0
	}
	if whole >= b { // full, or a capacity that shrank: clamp
		return t, b, 0
	}
	deficit := mul(b-whole, per).sub(u128{0, frac})
	added := mul(span(s.last, t), n)
	if !added.less(deficit) {
		return t, b, 0
	}
	q, r := added.add64(frac).divmod(per)
	return t, whole + q, r
}

// tbStore saves a token bucket balance at t and returns the time until full.
func tbStore(l Limit, s *State, t int64, whole, frac uint64) time.Duration {
	per, n := uint64(l.Rate.Per), uint64(l.Rate.N)
	reset := mul(uint64(l.Capacity)-whole, per).sub(u128{0, frac}).divCeil(n)
	s.set(TokenBucket, whole)
	s.w = int64(frac)
	s.last = t
	s.full = satAdd(t, reset)
	return time.Duration(dur(reset))
}

func tbTake(l Limit, s *State, now int64, cost int64) Decision {
	t, whole, frac := tbLoad(l, s, now)
	c := uint64(cost)
	d := Decision{Allowed: whole >= c, Limit: l.Capacity}
	if d.Allowed {
		whole -= c
	} else {
		need := mul(c-whole, uint64(l.Rate.Per)).sub(u128{0, frac})
		d.RetryAfter = time.Duration(dur(need.divCeil(uint64(l.Rate.N))))
	}
	d.Remaining = int64(whole)
	d.ResetAfter = tbStore(l, s, t, whole, frac)
	return d
}

func tbRefund(l Limit, s *State, now int64, cost int64) {
	t, whole, frac := tbLoad(l, s, now)
	whole += uint64(cost)
	if whole >= uint64(l.Capacity) {
		whole, frac = uint64(l.Capacity), 0
	}
	tbStore(l, s, t, whole, frac)
}

// gcraLoad returns the clamped time and the debt TAT-t, in units of 1/N ns,
// clamped to [0, Capacity*Per] (a balance between 0 and Capacity).
func gcraLoad(l Limit, s *State, now int64) (t int64, debt u128) {
	per, n := uint64(l.Rate.Per), uint64(l.Rate.N)
	if _, ok := s.alg(); !ok {
		return now, u128{}
	}
	t = max(now, s.last)
	tatNs, fr := s.w, s.val()
	if fr >= n { // kept under a larger N: round the TAT up, conservatively
		tatNs, fr = satAdd(tatNs, 1), 0
	}
	if tatNs < t || (tatNs == t && fr == 0) {
		return t, u128{}
	}
	debt = mul(span(t, tatNs), n).add64(fr)
	if c := mul(uint64(l.Capacity), per); c.less(debt) {
		debt = c
	}
	return t, debt
}

// gcraStore saves TAT = t + debt/N and returns the time until full.
func gcraStore(l Limit, s *State, t int64, debt u128) time.Duration {
	q, r := debt.divmod(uint64(l.Rate.N))
	s.set(GCRA, r)
	s.w = satAdd(t, q)
	s.last = t
	reset := q
	if r != 0 {
		reset++
	}
	s.full = satAdd(t, reset)
	return time.Duration(dur(reset))
}

func gcraTake(l Limit, s *State, now int64, cost int64) Decision {
	t, debt := gcraLoad(l, s, now)
	per := uint64(l.Rate.Per)
	burst := mul(uint64(l.Capacity), per)
	next := debt.add(mul(uint64(cost), per))
	d := Decision{Allowed: !burst.less(next), Limit: l.Capacity}
	if d.Allowed {
		debt = next
	} else {
		d.RetryAfter = time.Duration(dur(next.sub(burst).divCeil(uint64(l.Rate.N))))
	}
	d.Remaining = l.Capacity - int64(debt.divCeil(per))
	d.ResetAfter = gcraStore(l, s, t, debt)
	return d
}

func gcraRefund(l Limit, s *State, now int64, cost int64) {
	t, debt := gcraLoad(l, s, now)
	gcraStore(l, s, t, debt.sub(mul(uint64(cost), uint64(l.Rate.Per))))
}
