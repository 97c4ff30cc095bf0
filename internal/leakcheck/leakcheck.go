// Package leakcheck runs a package's tests and then checks, with goleak,
// that they left no goroutine behind, allowing goroutines that end on their
// own a few seconds to do so.
package leakcheck

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// grace is how long goroutines get to end after the tests. memberlist's
// Shutdown does not wait for a probe already in flight; the probe ends on
// its own timer within one ProbeInterval (1 s with the LAN profile), which
// is longer than goleak's own retries wait. One node test run in six
// reported such a probe as a leak.
const grace = 5 * time.Second

// Main runs m's tests and exits with their code, or with 1 when goroutines
// are still running grace after they passed.
func Main(m *testing.M) {
	code := m.Run()
	if code == 0 {
		// goleak.Find itself retries with a growing backoff (about half a
		// second in all) before it reports; ask again until grace is up.
		deadline := time.Now().Add(grace)
		err := goleak.Find()
		for err != nil && time.Now().Before(deadline) {
			err = goleak.Find()
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "leakcheck: goroutines still running %v after the tests: %v\n", grace, err)
			code = 1
		}
	}
	os.Exit(code)
}
