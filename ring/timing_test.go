package ring

import (
	"testing"
	"time"
)

func TestDetectionSpread(t *testing.T) {
	for _, c := range []struct {
		t    Timing
		n    int
		want time.Duration
	}{
		{LocalTiming(), 3, 2350 * time.Millisecond},
		{LocalTiming(), 5, 2750 * time.Millisecond},
		{LANTiming(), 3, 22500 * time.Millisecond},
		{LANTiming(), 5, 24500 * time.Millisecond},
		{LocalTiming(), 0, 150*time.Millisecond + 3*600*time.Millisecond},
	} {
		if got := c.t.DetectionSpread(c.n); got != c.want {
			t.Errorf("%d members, probe interval %v: %v, want %v", c.n, c.t.ProbeInterval, got, c.want)
		}
	}
}
