package engine

import (
	"context"
	"strconv"
	"testing"

	"github.com/weir-rl/weir/api"
)

// TestOneCheckTakeAllocatesOnlyItsResults holds the decision path's
// allocations: a one-check take at its bucket's owner keeps its resolved
// check, its group and the owner's results on the stack, and allocates
// only the results it returns, with or without a request id. (The takes
// run past the bucket's capacity, so denials are counted too.)
func TestOneCheckTakeAllocatesOnlyItsResults(t *testing.T) {
	e := newTestEngine(t, "n1", newTestClock(), SingleNode{}, NoPeers{}, NoChanges{})
	checks := []api.Check{{Limit: "plain", Key: "tenant-1", Cost: 1}}
	const runs = 200
	ctxs := make([]context.Context, runs+2) // AllocsPerRun calls once more to warm up
	for i := range ctxs {
		ctxs[i] = api.WithRequestID(context.Background(), "r-"+strconv.Itoa(i))
	}
	for _, tc := range []struct {
		name string
		ctx  func(i int) context.Context
	}{
		{"no request id", func(int) context.Context { return context.Background() }},
		{"a new request id each", func(i int) context.Context { return ctxs[i] }},
	} {
		if _, err := e.Take(context.Background(), checks); err != nil { // the bucket and its sketch entry exist
			t.Fatal(err)
		}
		i := 0
		n := testing.AllocsPerRun(runs, func() {
			if _, err := e.Take(tc.ctx(i), checks); err != nil {
				t.Fatal(err)
			}
			i++
		})
		if n != 1 {
			t.Errorf("%s: %v allocations per take, want 1 (its results)", tc.name, n)
		}
	}
}
