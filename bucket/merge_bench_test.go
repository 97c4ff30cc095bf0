package bucket

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkMergeAt merges replica batches into a store the size of one
// successor's replica in make bench-repl's bench-debt cell (40,000 keys)
// and into one of a million, whose probes miss every cache as a busy
// node's do: batches of 400 keys picked at random, each in debt, as a replica
// stream delivers them. ns/entry is the successor's cost per replicated
// take, mostly the probe's cache misses.
func BenchmarkMergeAt(b *testing.B) {
	for _, keys := range []int{40_000, 1_000_000} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) { benchmarkMergeAt(b, keys) })
	}
}

func benchmarkMergeAt(b *testing.B, keys int) {
	const batch = 400
	l := tb(10_000_000, 1, time.Second)
	limit := func(string, Limit) (Limit, bool, bool) { return l, false, true }
	s := NewStore(DefaultConfig())
	entry := func(i int) Entry {
		return Entry{Name: "bench-debt", Key: fmt.Sprintf("tenant:%06d", i), Snapshot: Snapshot{Count: 9_999_990, UntilFull: 10 * time.Second}}
	}
	all := make([]Entry, keys)
	for i := range all {
		all[i] = entry(i)
	}
	now := epoch
	s.MergeAt(now, all, limit)
	r := rand.New(rand.NewPCG(1, 2))
	batches := make([][]Entry, 64)
	for i := range batches {
		for range batch {
			batches[i] = append(batches[i], all[r.IntN(keys)])
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s.MergeAt(now, batches[i%len(batches)], limit)
		i++
	}
	if s.Len() != keys {
		b.Fatalf("store holds %d buckets, want %d", s.Len(), keys)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/entry")
}
