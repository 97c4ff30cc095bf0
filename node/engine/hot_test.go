package engine

import (
	"strconv"
	"sync"
	"testing"
)

// TestHotKeysConcurrent adds from many goroutines while summaries are
// read; with -race it checks the shard locking, and the totals check that
// no add is lost.
func TestHotKeysConcurrent(t *testing.T) {
	h := newHotKeys()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				h.add("l"+strconv.Itoa(g%2), "k"+strconv.Itoa(i%50), 1, i%4 == 0)
				if i%100 == 0 {
					_ = h.summaries("", 5)
				}
			}
		})
	}
	wg.Wait()
	for _, l := range h.summaries("", 0) {
		var sum int64
		for _, e := range l.sum.Entries {
			sum += e.Count
		}
		if sum != 4000 || len(l.sum.Entries) != 50 {
			t.Errorf("limit %s: %d keys weighing %d, want 50 keys and 4000", l.limit, len(l.sum.Entries), sum)
		}
	}
}
