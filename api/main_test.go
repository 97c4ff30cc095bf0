package api

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// exportAllowed is the "export" limit of the embedded default limits file
// (docs/architecture.md §4) (capacity 6, 2/s, so a 3 s window) with 5
// tokens left after an allowed take. The front ends' tests share it as
// internal/apitest.ExportAllowed, which this package's tests cannot import.
func exportAllowed() Result {
	return Result{
		Limit: "export", Allowed: true, Remaining: 5, Capacity: 6,
		ResetAfter: 500 * time.Millisecond, Window: 3 * time.Second,
	}
}

// exportDenied is the denial of docs/architecture.md §5.1: 500 ms to retry,
// 3 s to full (internal/apitest.ExportDenied).
func exportDenied() Result {
	return Result{
		Limit: "export", Allowed: false, Remaining: 0, Capacity: 6,
		RetryAfter: 500 * time.Millisecond, ResetAfter: 3 * time.Second, Window: 3 * time.Second,
	}
}
