package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/weir-rl/weir/api"
)

func holdTestCluster(now time.Time) *Cluster {
	c := &Cluster{cfg: Config{HandoffWindow: time.Minute}, moved: map[keyID]moved{}, now: func() time.Time { return now }}
	c.locks.initUnlocks()
	return c
}

// TestHoldLocksTheKeysStripes: Hold read-locks the stripe of every check
// until its release, one check or several, and reports a key marked
// moved; a handover (the write lock) waits for the release.
func TestHoldLocksTheKeysStripes(t *testing.T) {
	c := holdTestCluster(time.Unix(1000, 0))
	c.markMoved("api", "gone", "n2", handed{})
	// Two keys on different stripes.
	a := api.Check{Limit: "api", Key: "a"}
	var b api.Check
	for i := 0; b.Key == ""; i++ {
		if k := fmt.Sprintf("b%d", i); stripe("api", k) != stripe("api", "a") {
			b = api.Check{Limit: "api", Key: k}
		}
	}
	cases := []struct {
		name   string
		checks []api.Check
		ok     bool
	}{
		{"one check", []api.Check{a}, true},
		{"one check, moved", []api.Check{{Limit: "api", Key: "gone"}}, false},
		{"two checks", []api.Check{a, b}, true},
		{"two checks, one moved", []api.Check{a, {Limit: "api", Key: "gone"}}, false},
	}
	for _, tc := range cases {
		release, ok := c.Hold(tc.checks)
		if ok != tc.ok {
			t.Fatalf("%s: ok %v, want %v", tc.name, ok, tc.ok)
		}
		for _, ch := range tc.checks {
			if l := &c.locks.rw[stripe(ch.Limit, ch.Key)]; l.TryLock() {
				l.Unlock()
				t.Fatalf("%s: the stripe of %s is not held", tc.name, ch.Key)
			}
		}
		release()
		for _, ch := range tc.checks {
			l := &c.locks.rw[stripe(ch.Limit, ch.Key)]
			if !l.TryLock() {
				t.Fatalf("%s: the stripe of %s is still held after the release", tc.name, ch.Key)
			}
			l.Unlock()
		}
	}
}

// BenchmarkHold measures the decision path's hold of one key's stripe and
// its release (no key marked moved).
func BenchmarkHold(b *testing.B) {
	c := holdTestCluster(time.Unix(1000, 0))
	checks := []api.Check{{Limit: "api", Key: "tenant:000042"}}
	b.ReportAllocs()
	for b.Loop() {
		release, _ := c.Hold(checks)
		release()
	}
}
