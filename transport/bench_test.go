package transport

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/bucket"
)

// echoHandler answers every take with one allowed Result per check.
type echoHandler struct{}

func (echoHandler) Serve(_ context.Context, _ string, reqs []Request) []Reply {
	reps := make([]Reply, len(reqs))
	for i, q := range reqs {
		reps[i].RulesVersion = 1
		reps[i].Results = make([]api.Result, len(q.Checks))
		for j, c := range q.Checks {
			reps[i].Results[j] = api.Result{Allowed: true, Remaining: 100 - c.Cost, Capacity: 100, ResetAfter: time.Second}
		}
	}
	return reps
}

func (echoHandler) Handoff(context.Context, string, State) error { return nil }

func (echoHandler) Replicate(context.Context, string, Replica) error { return nil }

func (echoHandler) Report(context.Context, ReportRequest) Report { return Report{} }

// BenchmarkDo measures one forward round trip (Pool.Do to a Server on
// loopback, both in this process, so ns/op and allocs/op count client and
// server together), serially and from 16 and 64 goroutines, with and
// without the batch window. reqs/batch is the mean batch size.
func BenchmarkDo(b *testing.B) {
	tok := testCreds(b, "bench")
	addr := startServer(b, echoHandler{}, tok)
	req := Request{Op: OpTake, Checks: []api.Check{{Limit: "export", Key: "tenant:acme", Cost: 1}}, Epoch: 1}
	for _, window := range []time.Duration{0, 200 * time.Microsecond} {
		newPool := func(b *testing.B) (*Pool, *countObserver) {
			obs := &countObserver{}
			cfg := DefaultConfig()
			cfg.Deadline = time.Second
			cfg.Window = window
			cfg.Credentials = tok
			cfg.Observer = obs
			p := NewPool(cfg)
			b.Cleanup(func() { p.Close() })
			if _, err := p.Do(context.Background(), addr, req); err != nil { // connect
				b.Fatal(err)
			}
			obs.batches.Store(0)
			obs.batched.Store(0)
			return p, obs
		}
		report := func(b *testing.B, obs *countObserver) {
			if n := obs.batches.Load(); n > 0 {
				b.ReportMetric(float64(obs.batched.Load())/float64(n), "reqs/batch")
			}
		}
		b.Run(fmt.Sprintf("window=%v/goroutines=1", window), func(b *testing.B) {
			p, obs := newPool(b)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Do(ctx, addr, req); err != nil {
					b.Fatal(err)
				}
			}
			report(b, obs)
		})
		for _, g := range []int{16, 64} {
			b.Run(fmt.Sprintf("window=%v/goroutines=%d", window, g), func(b *testing.B) {
				p, obs := newPool(b)
				b.SetParallelism(max(1, g/runtime.GOMAXPROCS(0)))
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					ctx := context.Background()
					for pb.Next() {
						if _, err := p.Do(ctx, addr, req); err != nil {
							b.Error(err)
							return
						}
					}
				})
				report(b, obs)
			})
		}
	}
}

// countingHandler counts the replica entries it is given.
type countingHandler struct {
	echoHandler
	entries atomic.Int64
}

func (h *countingHandler) Replicate(_ context.Context, _ string, r Replica) error {
	h.entries.Add(int64(r.State.Len() + r.Packed.Len()))
	return nil
}

// BenchmarkReplicate measures one replication batch of 256 bucket entries
// (Pool.Replicate to a Server on loopback, both in this process): encoding,
// protobuf both ways, the round trip and decoding, so ns/entry and the
// allocations are what the owner and the successor spend per replicated
// key, before the successor merges it. v1 sends each bucket as a
// HandoffEntry message, v2 packed (packed.go).
func BenchmarkReplicate(b *testing.B) {
	for _, v := range []Version{V1, V2} {
		b.Run(fmt.Sprintf("v%d", v), func(b *testing.B) { benchmarkReplicate(b, v, 256) })
	}
}

// BenchmarkReplicateBatch is BenchmarkReplicate (packed) at several batch
// sizes, as Handoff calls (v2) and on the replica link (v3, link.go): the
// call's fixed cost against each entry's. On two cores, 2026-12-06, both in
// one run (-count 5, medians): v2 73.5 µs for 16 entries, 107 µs for 256,
// 223 µs for 1024, about 71 µs per call and 0.15 µs per entry, 166
// allocations; v3 30.8, 57.4 and 150 µs, about 29 µs per call and 0.12 µs
// per entry, 29 allocations. A flush sends one batch to each successor
// every ReplicationConfig.Interval.
// BenchmarkCallShape measures how much of the call's cost a stream would
// save; its comment says why that did not show in the whole system.
func BenchmarkReplicateBatch(b *testing.B) {
	for _, v := range []Version{V2, V3} {
		for _, n := range []int{16, 256, 1024} {
			b.Run(fmt.Sprintf("proto=v%d/entries=%d", v, n), func(b *testing.B) { benchmarkReplicate(b, v, n) })
		}
	}
}

func benchmarkReplicate(b *testing.B, v Version, n int) {
	tok := testCreds(b, "bench")
	h := &countingHandler{}
	addr := startServer(b, h, tok)
	cfg := DefaultConfig()
	cfg.Credentials = tok
	p := NewPool(cfg)
	b.Cleanup(func() { p.Close() })
	p.SetProtocol(v)
	var entries State
	for i := range n {
		entries.Buckets = append(entries.Buckets, bucket.Entry{
			Name: "export", Key: fmt.Sprintf("tenant:%06d", i),
			Snapshot: bucket.Snapshot{Algorithm: 0, Count: 41, Frac: 7, Since: time.Millisecond, UntilFull: time.Second},
		})
	}
	ctx := context.Background()
	if _, err := p.Replicate(ctx, addr, entries, nil); err != nil { // connect
		b.Fatal(err)
	}
	h.entries.Store(0)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Replicate(ctx, addr, entries, nil); err != nil {
			b.Fatal(err)
		}
	}
	if got := h.entries.Load(); got != int64(b.N*n) {
		b.Fatalf("the successor got %d entries, want %d", got, b.N*n)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
}
