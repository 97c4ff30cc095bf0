package ring

import (
	"math"
	"testing"
)

func TestShare(t *testing.T) {
	v := buildView(1, "n0", members(Alive, Alive, Dead))
	sum := 0.0
	for _, m := range v.Members {
		s := v.Share(m.Name)
		sum += s
		if m.State == Dead && s != 0 {
			t.Errorf("dead %s owns %.3f of a majority ring", m.Name, s)
		}
		if m.State == Alive && (s < 0.3 || s > 0.7) {
			t.Errorf("%s owns %.3f, want about half of two live members", m.Name, s)
		}
	}
	if math.Abs(sum-1) > 1e-9 {
		t.Errorf("shares sum to %f, want 1", sum)
	}
	if s := v.Share("nobody"); s != 0 {
		t.Errorf("Share of an unknown member = %f", s)
	}
	if s := (&View{}).Share("n0"); s != 0 {
		t.Errorf("Share on the zero View = %f", s)
	}
}
