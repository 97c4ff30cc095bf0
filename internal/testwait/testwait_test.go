package testwait_test

import (
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weir-rl/weir/internal/testwait"
)

// TestUntilReturnsOnceTheConditionHolds: cond is asked once per interval,
// and Until returns, with the time it took, on the first true.
func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		took := testwait.Until(t, time.Second, 10*time.Millisecond, "the third call", func() bool {
			calls++
			return calls == 3
		})
		if calls != 3 || took != 20*time.Millisecond {
			t.Fatalf("cond called %d times in %v, want 3 times in 20ms", calls, took)
		}
	})
}

// TestUntilFailsTheTestAtTheBound: a condition that never holds fails the
// test once the bound has passed, not before, naming what was awaited.
func TestUntilFailsTheTestAtTheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &fatalRecorder{TB: t}
		start := time.Now()
		done := make(chan struct{})
		go func() {
			defer close(done)
			testwait.Until(rec, 100*time.Millisecond, 10*time.Millisecond, "the sky to fall", func() bool { return false })
		}()
		<-done
		const want = "timed out after 100ms waiting for the sky to fall"
		if rec.msg != want {
			t.Fatalf("failed with %q, want %q", rec.msg, want)
		}
		if waited := time.Since(start); waited <= 100*time.Millisecond {
			t.Fatalf("failed after %v, before the bound", waited)
		}
	})
}

// fatalRecorder is a testing.TB whose Fatalf records the message and ends
// the calling goroutine, as testing's does, without failing the test.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
