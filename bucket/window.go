package bucket

import "time"

// The window algorithms count units in windows. sliding_window keeps the
// counts of the current and the previous window and estimates the trailing
// window as prev*(W-elapsed)/W + cur, compared exactly in 128-bit integers.
// Its windows are anchored at the bucket's first take (and step by Window
// from there), not at the epoch, so a snapshot carries only relative times.
// fixed_window keeps one count per UTC calendar period.

// swLoad returns the clamped time, the current window start and the counts
// at now, rolling the windows forward.
func swLoad(l Limit, s *State, now int64) (t, start int64, cur, prev uint64) {
	if _, ok := s.alg(); !ok {
		return now, now, 0, 0
	}
	w, b := uint64(l.Window), uint64(l.Capacity)
	start = s.last
	t = max(now, start)
	cur = s.val()
	if s.w > 0 {
		prev = uint64(s.w)
	}
	if el := span(start, t); el >= w {
		k := el / w
		prev = 0
		if k == 1 {
			prev = cur
		}
		cur = 0
		start = satAdd(start, k*w)
	}
	return t, start, min(cur, b), min(prev, b)
}

// swUsed returns the estimate prev*(W-el) + cur*W, in units of 1/W.
func swUsed(w, el, cur, prev uint64) u128 {
	return mul(prev, w-el).add(mul(cur, w))
}

// swStore saves the windows and returns the time until the estimate is 0.
func swStore(l Limit, s *State, t, start int64, cur, prev uint64) time.Duration {
	w := uint64(l.Window)
	left := w - span(start, t)
	var reset uint64
	switch {
	case cur > 0:
		reset = left + w
	case prev > 0:
		reset = left
	}
	s.set(SlidingWindow, cur)
	s.w = int64(prev)
	s.last = start
	s.full = satAdd(t, reset)
	return time.Duration(reset)
}

func swTake(l Limit, s *State, now int64, cost int64) Decision {
	t, start, cur, prev := swLoad(l, s, now)
	w, b, c := uint64(l.Window), uint64(l.Capacity), uint64(cost)
	el := span(start, t)
	limit := mul(b, w)
	used := swUsed(w, el, cur, prev)
	next := used.add(mul(c, w))
	d := Decision{Allowed: !limit.less(next), Limit: l.Capacity}
	if d.Allowed {
		cur += c
		used = next
	} else if cur+c <= b {
		// Wait in this window until prev*(W-el) <= (B-cur-c)*W; prev > 0
		// here, and the quotient is below W-el.
		q, _ := mul(b-cur-c, w).divmod(prev)
		d.RetryAfter = time.Duration(w - q - el)
	} else {
		// Wait for the next window, where cur becomes prev, until
		// cur*(W-el') <= (B-c)*W; cur > B-c here, so the quotient is below W.
		q, _ := mul(b-c, w).divmod(cur)
		d.RetryAfter = time.Duration(dur((w - el) + (w - q)))
	}
	rem, _ := limit.sub(used).divmod(w)
	d.Remaining = int64(rem)
	d.ResetAfter = swStore(l, s, t, start, cur, prev)
	return d
}

func swRefund(l Limit, s *State, now int64, cost int64) {
	t, start, cur, prev := swLoad(l, s, now)
	c := uint64(cost)
	back := min(c, cur)
	cur -= back
	prev -= min(c-back, prev)
	swStore(l, s, t, start, cur, prev)
}

// epochSize is the length in ns of c's periods when they are equal periods
// counted from the Unix epoch, 0 for Month.
func (c Calendar) epochSize() int64 {
	switch c {
	case Second:
		return int64(time.Second)
	case Minute:
		return int64(time.Minute)
	case Hour:
		return int64(time.Hour)
	case Day:
		return int64(24 * time.Hour)
	case Week:
		return int64(7 * 24 * time.Hour)
	case Days30:
		return int64(30 * 24 * time.Hour)
	case Days365:
		return int64(365 * 24 * time.Hour)
	}
	return 0
}

// period returns the UTC calendar period [start, end) holding t (Unix ns).
func period(c Calendar, t int64) (start, end int64) {
	size := c.epochSize()
	if size == 0 {
		tm := time.Unix(0, t).UTC()
		y, m, _ := tm.Date()
		st := time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
		start, end = st.UnixNano(), st.AddDate(0, 1, 0).UnixNano()
		if start > t || end <= t { // beyond the years UnixNano can express
			start, end = t, satAdd(t, uint64(31*24*time.Hour))
		}
		return start, end
	}
	start = t - t%size
	if t%size < 0 {
		if start < -maxInt64-1+size { // the period began before int64 time
			start = -maxInt64 - 1
		} else {
			start -= size
		}
	}
	return start, satAdd(start, uint64(size))
}

// fwLoad returns the clamped time, the period and the count at now.
func fwLoad(l Limit, s *State, now int64) (t, start, end int64, count uint64) {
	if _, ok := s.alg(); !ok {
		start, end = period(l.Calendar, now)
		return now, start, end, 0
	}
	t = max(now, s.last)
	ps, pe := period(l.Calendar, t)
	if ps > s.last { // a new period: the count starts again
		return t, ps, pe, 0
	}
	// The same period, or a longer calendar period that holds the stored
	// one: keep the count.
	return t, ps, pe, min(s.val(), uint64(l.Capacity))
}

// fwStore saves the period and count and returns the time until empty.
func fwStore(s *State, t, start, end int64, count uint64) time.Duration {
	s.set(FixedWindow, count)
	s.w = end
	s.last = start
	if count == 0 {
		s.full = t
		return 0
	}
	s.full = end
	return time.Duration(dur(span(t, end)))
}

func fwTake(l Limit, s *State, now int64, cost int64) Decision {
	t, start, end, count := fwLoad(l, s, now)
	b, c := uint64(l.Capacity), uint64(cost)
	d := Decision{Allowed: count+c <= b, Limit: l.Capacity}
	if d.Allowed {
		count += c
	} else {
		d.RetryAfter = time.Duration(dur(span(t, end)))
	}
	d.Remaining = int64(b - count)
	d.ResetAfter = fwStore(s, t, start, end, count)
	return d
}

func fwRefund(l Limit, s *State, now int64, cost int64) {
	t, start, end, count := fwLoad(l, s, now)
	count -= min(uint64(cost), count)
	fwStore(s, t, start, end, count)
}
