package allot

import (
	"math"
	"testing"
	"time"
)

var t0 = time.Unix(1_000_000, 0)

func TestMeterSteps(t *testing.T) {
	const w = 100 * time.Millisecond
	var m Meter
	for _, st := range []struct {
		name string
		at   time.Duration
		add  int64
		want float64 // rate at the step, after the add
	}{
		{"first add opens the window", 0, 10, 0},
		{"same window: not counted yet", 50 * time.Millisecond, 10, 0},
		{"window ends: halfway to 200/s", 100 * time.Millisecond, 0, 100},
		{"a steady 20 per window converges", 150 * time.Millisecond, 20, 100},
		{"second window: halfway to 200/s", 200 * time.Millisecond, 0, 150},
		{"clock going back counts in the current window", 120 * time.Millisecond, 20, 150},
		{"third window: 20 again", 300 * time.Millisecond, 0, 175},
		{"three windows idle: halved each", 600 * time.Millisecond, 0, 175.0 / 8},
		{"long idle: nothing left", time.Hour, 0, 0},
	} {
		if st.add > 0 {
			m.AddAt(t0.Add(st.at), st.add, w)
		}
		if got := m.RateAt(t0.Add(st.at), w); math.Abs(got-st.want) > 1e-9 {
			t.Fatalf("%s: rate %v, want %v", st.name, got, st.want)
		}
	}
}
