package limits_test

import (
	"testing"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/node/limits"
)

// TestQueueWaitCeilingIsTheAPIs: the front ends clamp a caller's wait to
// api.MaxLeaseWait, so it must be no shorter than any queue.max_wait a
// limits file may set.
func TestQueueWaitCeilingIsTheAPIs(t *testing.T) {
	if limits.MaxQueueWait != api.MaxLeaseWait {
		t.Fatalf("limits.MaxQueueWait %v, api.MaxLeaseWait %v: they must agree", limits.MaxQueueWait, api.MaxLeaseWait)
	}
}
