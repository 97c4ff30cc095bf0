package resp_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
)

// benchLimits never deny within a benchmark: a capacity far above what
// one run takes, and inline limits on for CL.THROTTLE.
const benchLimits = `version: 1
limits:
  - name: bench
    capacity: 1000000000000
    rate: 1000000/s
inline_limits: true
`

// benchClient starts a node with RESP on loopback and a go-redis client
// sized for b's parallelism.
func benchClient(b *testing.B) *redis.Client {
	b.Helper()
	rn := startNode(b, benchLimits, nil)
	return rn.client(b, func(o *redis.Options) { o.PoolSize = 256 })
}

// BenchmarkGoRedisTake is one WEIR.TAKE through go-redis against a real
// node on loopback: one caller (serial) and 32 callers per GOMAXPROCS
// (parallel), each on its own key.
func BenchmarkGoRedisTake(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		c := benchClient(b)
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if err := c.Do(ctx, "WEIR.TAKE", "bench", "k").Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		c := benchClient(b)
		ctx := context.Background()
		var id atomic.Int64
		b.ReportAllocs()
		b.SetParallelism(32) // 32 callers per GOMAXPROCS: 64 on two cores
		b.RunParallel(func(pb *testing.PB) {
			key := "k" + strconv.FormatInt(id.Add(1), 10)
			for pb.Next() {
				if err := c.Do(ctx, "WEIR.TAKE", "bench", key).Err(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkGoRedisThrottle is one CL.THROTTLE (an inline gcra limit)
// through go-redis against a real node on loopback, serial and parallel.
func BenchmarkGoRedisThrottle(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		c := benchClient(b)
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if err := c.Do(ctx, "CL.THROTTLE", "k", "999999999", "1000000", "1").Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		c := benchClient(b)
		ctx := context.Background()
		var id atomic.Int64
		b.ReportAllocs()
		b.SetParallelism(32) // 32 callers per GOMAXPROCS: 64 on two cores
		b.RunParallel(func(pb *testing.PB) {
			key := "k" + strconv.FormatInt(id.Add(1), 10)
			for pb.Next() {
				if err := c.Do(ctx, "CL.THROTTLE", key, "999999999", "1000000", "1").Err(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
