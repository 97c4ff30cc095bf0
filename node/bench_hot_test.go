package node_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/node"
)

// hotBenchNode is a started cluster of one on a fake clock, for measuring the
// decision path (engine, stores, counting) without HTTP.
func hotBenchNode(b *testing.B) *node.Node {
	b.Helper()
	cfg := node.LocalConfig()
	cfg.NodeName = "bench"
	cfg.Clustered = false
	cfg.SweepInterval = 0
	cfg.Store.MaxBuckets = 1_000_000 // the Zipf run touches tens of thousands of keys
	n, err := node.New(cfg, node.Deps{Clock: newFakeClock().Now})
	if err != nil {
		b.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = n.Shutdown(context.Background()) })
	return n
}

// hotBenchKeys are 4096 tenant keys, so a run touches many buckets.
func hotBenchKeys() []string {
	keys := make([]string, 4096)
	for i := range keys {
		keys[i] = "tenant:" + strconv.Itoa(i)
	}
	return keys
}

// BenchmarkNodeTake is one check per Take on the monthly limit (a quota of
// a million, so every take is allowed and the store is the same work each
// time).
func BenchmarkNodeTake(b *testing.B) {
	n := hotBenchNode(b)
	keys := hotBenchKeys()
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := n.Take(ctx, []api.Check{{Limit: "monthly", Key: keys[i&4095], Cost: 1}}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkNodeTakeParallel is BenchmarkNodeTake from GOMAXPROCS goroutines.
func BenchmarkNodeTakeParallel(b *testing.B) {
	benchParallelTakes(b, hotBenchKeys())
}

// BenchmarkNodeTakeZipfParallel is BenchmarkNodeTakeParallel with keys
// drawn from a Zipf law over 100,000 tenants (s = 1.1): a few heavy
// tenants and a long tail, as hot-key counting sees in practice.
func BenchmarkNodeTakeZipfParallel(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	z := rand.NewZipf(r, 1.1, 1, 99_999)
	keys := make([]string, 1<<16)
	for i := range keys {
		keys[i] = "tenant:" + strconv.FormatUint(z.Uint64(), 10)
	}
	benchParallelTakes(b, keys)
}

// BenchmarkNodeTakeUniformParallel is BenchmarkNodeTakeParallel with keys
// drawn uniformly from 100,000 tenants: every bucket and nearly every
// hot-key sketch cell is a cache miss, as on a node serving many tenants
// evenly, and about one take in eight replaces a key in the sketch.
func BenchmarkNodeTakeUniformParallel(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	keys := make([]string, 1<<16)
	for i := range keys {
		keys[i] = "tenant:" + strconv.Itoa(r.IntN(100_000))
	}
	benchParallelTakes(b, keys)
}

// benchParallelTakes takes one check on the monthly limit per iteration
// from GOMAXPROCS goroutines, each cycling through keys (a power of two of
// them) at its own stride.
func benchParallelTakes(b *testing.B, keys []string) {
	n := hotBenchNode(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, err := n.Take(ctx, []api.Check{{Limit: "monthly", Key: keys[i&(len(keys)-1)], Cost: 1}}); err != nil {
				b.Fatal(err)
			}
			i += 7
		}
	})
}
