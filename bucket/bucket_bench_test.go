package bucket

import (
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// BenchmarkTakeAt is the hot path of one bucket, each algorithm, beside
// golang.org/x/time/rate's Limiter.AllowN on the same rate in the same run.
// Time advances 1 µs per take so refill arithmetic runs every time.
func BenchmarkTakeAt(b *testing.B) {
	limits := []Limit{
		tb(1000, 1_000_000, time.Second),
		gcra(1000, 1_000_000, time.Second),
		sw(1000, time.Millisecond),
		fw(1000, Minute),
		{Algorithm: FixedWindow, Capacity: 1000, Calendar: Month},
	}
	for _, l := range limits {
		b.Run(l.Algorithm.String()+"/"+l.PolicyWindow().String(), func(b *testing.B) {
			b.ReportAllocs()
			var s State
			now := epoch
			for b.Loop() {
				now = now.Add(time.Microsecond)
				_, _ = TakeAt(l, &s, now, 1)
			}
		})
	}
	b.Run("x_time_rate_AllowN", func(b *testing.B) {
		b.ReportAllocs()
		lim := rate.NewLimiter(rate.Limit(1_000_000), 1000)
		now := epoch
		for b.Loop() {
			now = now.Add(time.Microsecond)
			_ = lim.AllowN(now, 1)
		}
	})
}
