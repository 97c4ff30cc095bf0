// Package testwait is how tests wait for what no event announces: gossip
// among real nodes converging, a child process answering, a metric that a
// background loop updates. It polls a condition until it holds or a bound
// passes, and fails the test at the bound; it never waits a fixed time in
// the hope that the condition holds by then. It is for tests only.
//
// A test that can inject a clock or run in a testing/synctest bubble
// should: this package is for the parts that run for real (sockets,
// memberlist, processes), where only the condition tells when it is done.
package testwait

import (
	"testing"
	"time"
)

// Until calls cond every interval until it returns true, and returns how
// long that took. When bound passes first, it fails t (Fatalf) with what
// and bound. An interval below a millisecond is taken as one.
func Until(t testing.TB, bound, interval time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(bound)
	tick := time.NewTicker(max(interval, time.Millisecond))
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", bound, what)
		}
		<-tick.C
	}
	return time.Since(start)
}
