package lease

import (
	"strconv"
	"sync"
	"testing"
	"time"
)

// BenchmarkAcquireRelease is one grant and one release of a hot key, with
// the clock moving a microsecond per iteration.
func BenchmarkAcquireRelease(b *testing.B) {
	tbl, _ := NewTable(DefaultConfig())
	r := Request{Limit: "export-db", Key: "tenant:acme:route:export", Holder: "bench"}
	now := t0
	// A second lease keeps the key's state alive, as on a busy key.
	out, _, _ := tbl.Acquire(now, Request{Limit: r.Limit, Key: r.Key, TTL: time.Hour}, params)
	_ = out
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Microsecond)
		out, _, err := tbl.Acquire(now, r, params)
		if err != nil || out.Status != Granted {
			b.Fatalf("%v %v", out.Status, err)
		}
		tbl.Release(now, out.Grant.ID)
	}
}

// BenchmarkAcquireReleaseManyKeys spreads grants over 10000 keys whose
// leases pile up and expire, exercising the timer heap and bucket churn.
func BenchmarkAcquireReleaseManyKeys(b *testing.B) {
	tbl, _ := NewTable(DefaultConfig())
	keys := make([]string, 10000)
	for i := range keys {
		keys[i] = "tenant:" + strconv.Itoa(i)
	}
	now := t0
	p := Params{Permits: 4, DefaultTTL: 10 * time.Millisecond}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Microsecond)
		out, _, err := tbl.Acquire(now, Request{Limit: "db", Key: keys[i%len(keys)]}, p)
		if err != nil {
			b.Fatal(err)
		}
		if out.Status == Granted && i%2 == 0 {
			tbl.Release(now, out.Grant.ID)
		}
		i++
	}
}

// BenchmarkAcquireReleaseParallel is the shape the node uses: one Table per
// shard, each behind its own mutex.
func BenchmarkAcquireReleaseParallel(b *testing.B) {
	const shards = 16
	type shard struct {
		mu  sync.Mutex
		tbl *Table
	}
	var ss [shards]shard
	for i := range ss {
		ss[i].tbl, _ = NewTable(DefaultConfig())
	}
	var next sync.Mutex
	n := 0
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		next.Lock()
		sh := &ss[n%shards]
		n++
		next.Unlock()
		r := Request{Limit: "db", Key: "k" + strconv.Itoa(n), Holder: "bench"}
		now := t0
		for pb.Next() {
			now = now.Add(time.Microsecond)
			sh.mu.Lock()
			out, _, _ := sh.tbl.Acquire(now, r, params)
			if out.Status == Granted {
				sh.tbl.Release(now, out.Grant.ID)
			}
			sh.mu.Unlock()
		}
	})
}
