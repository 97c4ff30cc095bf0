package bucket

import (
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

var benchLimit = tb(1000, 1_000_000, time.Second)

func BenchmarkStoreTake(b *testing.B) {
	s := NewStore(DefaultConfig())
	checks := []Check{{Name: "export", Limit: benchLimit, Key: "tenant:acme", Cost: 1}}
	out := make([]Decision, 0, 1)
	now := epoch
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Microsecond)
		out, _, _ = s.TakeAt(now, checks, out)
	}
}

// BenchmarkStoreTakeParallel takes from one key per goroutine (spread over
// shards) and, in the hot variant, from one key shared by all.
func BenchmarkStoreTakeParallel(b *testing.B) {
	for _, hot := range []bool{false, true} {
		b.Run(map[bool]string{false: "spread", true: "hot_key"}[hot], func(b *testing.B) {
			s := NewStore(DefaultConfig())
			var id atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				key := "tenant:" + strconv.FormatInt(id.Add(1), 10)
				if hot {
					key = "tenant:hot"
				}
				checks := []Check{{Name: "export", Limit: benchLimit, Key: key, Cost: 1}}
				out := make([]Decision, 0, 1)
				now := epoch
				for pb.Next() {
					now = now.Add(time.Microsecond)
					out, _, _ = s.TakeAt(now, checks, out)
				}
			})
		})
	}
}

func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("tenant:%07d", i)
	}
	return keys
}

// BenchmarkStore1MKeys takes round-robin across 1,000,000 existing keys, so
// every take misses the CPU caches.
func BenchmarkStore1MKeys(b *testing.B) {
	const n = 1_000_000
	keys := benchKeys(n)
	s := NewStore(Config{MaxBuckets: n, Shards: 64})
	checks := []Check{{Name: "export", Limit: benchLimit, Cost: 1}}
	out := make([]Decision, 0, 1)
	for _, k := range keys {
		checks[0].Key = k
		s.TakeAt(epoch, checks, out)
	}
	i := 0
	now := epoch
	b.ReportAllocs()
	for b.Loop() {
		checks[0].Key = keys[i]
		i++
		if i == n {
			i = 0
		}
		now = now.Add(time.Nanosecond)
		out, _, _ = s.TakeAt(now, checks, out)
	}
}

// BenchmarkStoreBytesPerBucket reports the live heap per bucket after
// inserting 1,000,000 keys of 14 bytes ("tenant:0000042"), key copies
// included.
func BenchmarkStoreBytesPerBucket(b *testing.B) {
	const n = 1_000_000
	keys := benchKeys(n)
	checks := []Check{{Name: "export", Limit: benchLimit, Cost: 1}}
	var perBucket float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		s := NewStore(Config{MaxBuckets: n, Shards: 64})
		for _, k := range keys {
			checks[0].Key = k
			s.TakeAt(epoch, checks, nil)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if s.Len() != n {
			b.Fatalf("Len %d", s.Len())
		}
		perBucket = float64(after.HeapAlloc-before.HeapAlloc) / n
		runtime.KeepAlive(s)
	}
	b.ReportMetric(perBucket, "bytes/bucket")
}
