package allot

import "time"

// Meter estimates a rate, in units per second, from amounts added at
// explicit times. Amounts are summed over windows of a fixed length; when a
// window ends, the estimate moves halfway toward that window's rate
// (an exponentially weighted average with a half-life of one window), and
// every window with nothing added halves it again. The zero Meter is empty
// and ready to use. A Meter is a value; it is not safe for concurrent use.
type Meter struct {
	start time.Time // start of the current window; zero before the first Add
	sum   int64     // amount added in the current window
	rate  float64   // estimate as of the end of the previous window
}

// AddAt adds n at now to the window of length window. A time before the
// current window's start counts in the current window (a clock that goes
// back moves nothing).
func (m *Meter) AddAt(now time.Time, n int64, window time.Duration) {
	m.roll(now, window)
	m.sum += n
}

// RateAt is the estimate at now: completed windows only, so an amount
// counts once its window has ended; a burst in the current window shows
// one window later.
func (m *Meter) RateAt(now time.Time, window time.Duration) float64 {
	m.roll(now, window)
	return m.rate
}

// roll closes the windows that ended by now.
func (m *Meter) roll(now time.Time, window time.Duration) {
	if m.start.IsZero() {
		m.start = now
		return
	}
	elapsed := now.Sub(m.start)
	if elapsed < window {
		return
	}
	n := int64(elapsed / window)
	m.rate = (m.rate + float64(m.sum)/window.Seconds()) / 2
	for i := int64(1); i < n && m.rate > 0; i++ {
		if i > 64 {
			m.rate = 0 // long idle: nothing is left of it
			break
		}
		m.rate /= 2
	}
	m.sum = 0
	m.start = m.start.Add(time.Duration(n) * window)
}
