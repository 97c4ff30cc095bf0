package bucket

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
)

// checkShard verifies a shard against the buckets it should hold: each is
// found with its state, the index holds exactly them, and the interned
// names are exactly those in use, each counted once per bucket.
func checkShard(t *testing.T, sh *shard, want map[[2]string]State, hashOf func(name, key string) uint64) {
	t.Helper()
	if int(sh.n) != len(want) {
		t.Fatalf("n %d, want %d", sh.n, len(want))
	}
	inIndex := 0
	for _, e := range sh.index {
		if e != 0 {
			inIndex++
		}
	}
	if inIndex != len(want) {
		t.Fatalf("index holds %d entries, want %d", inIndex, len(want))
	}
	refs := map[string]uint32{}
	for k, st := range want {
		idx, ok := sh.find(hashOf(k[0], k[1]), k[0], k[1])
		if !ok {
			t.Fatalf("bucket %q lost", k)
		}
		if got := sh.at(idx).st; got != st {
			t.Fatalf("bucket %q: state %+v, want %+v", k, got, st)
		}
		refs[k[0]]++
	}
	if len(sh.ids) != len(refs) {
		t.Fatalf("%d names interned, want %d", len(sh.ids), len(refs))
	}
	for name, n := range refs {
		if id, ok := sh.ids[name]; !ok || sh.names[id].refs != n || sh.names[id].s != name {
			t.Fatalf("name %q: interned %v %+v, want %d refs", name, ok, sh.names[id], n)
		}
	}
}

// TestShardIndexAgainstModel inserts and removes buckets at random, with
// hashes crowded at the end of the index so probe runs wrap around, and
// checks the shard against a map after every step: growth, backward-shift
// deletion, slot reuse and name interning.
func TestShardIndexAgainstModel(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 7))
		hashes := map[[2]string]uint64{}
		hashOf := func(name, key string) uint64 {
			k := [2]string{name, key}
			h, ok := hashes[k]
			if !ok {
				var tag uint64
				switch r.IntN(3) {
				case 0: // the last few homes of any index size
					tag = 1<<32 - 1 - uint64(r.IntN(3))
				case 1: // the same tag as others: compared by key
					tag = 1<<32 - 1
				default:
					tag = uint64(r.Uint32())
				}
				h = tag<<32 | uint64(r.Uint32())
				hashes[k] = h
			}
			return h
		}
		sh := &shard{ids: map[string]uint32{}}
		want := map[[2]string]State{}
		names := []string{"a", "b", "c"}
		for step := range 600 {
			name, key := names[r.IntN(len(names))], fmt.Sprint(r.IntN(120))
			k := [2]string{name, key}
			h := hashOf(name, key)
			idx, ok := sh.find(h, name, key)
			if _, in := want[k]; ok != in {
				t.Fatalf("seed %d step %d: find %q = %v, want %v", seed, step, k, ok, in)
			}
			if ok {
				sh.remove(idx)
				delete(want, k)
			} else {
				st := State{tv: 1<<tagShift | uint64(step), w: int64(seed)}
				sh.insert(h, name, key, st)
				want[k] = st
			}
			checkShard(t, sh, want, hashOf)
		}
		if int(sh.used)-len(sh.free) != len(want) {
			t.Fatalf("seed %d: %d slots used, %d free, %d buckets", seed, sh.used, len(sh.free), len(want))
		}
	}
}

// TestStoreExportAfterChurn checks that export walks exactly the live
// buckets, with their names, after buckets of several limits have come and
// gone in one shard.
func TestStoreExportAfterChurn(t *testing.T) {
	s := NewStore(Config{MaxBuckets: 1000, Shards: 1})
	l := tb(10, 1, time.Second)
	want := map[[2]string]bool{}
	for i := range 300 {
		name, key := fmt.Sprint("limit", i%3), fmt.Sprint(i)
		if _, ok, err := s.TakeAt(at(0), []Check{{name, l, key, 1, false}}, nil); !ok || err != nil {
			t.Fatal(ok, err)
		}
		want[[2]string{name, key}] = true
	}
	for i := 0; i < 300; i += 2 {
		name, key := fmt.Sprint("limit", i%3), fmt.Sprint(i)
		if _, ok := s.ExtractAt(at(0), name, key); !ok {
			t.Fatalf("extract %s %s", name, key)
		}
		delete(want, [2]string{name, key})
	}
	// All of limit1's buckets go; its name is forgotten and may come back.
	s.ExportAt(at(0), func(name, _ string) bool { return name == "limit1" }, true)
	for k := range want {
		if k[0] == "limit1" {
			delete(want, k)
		}
	}
	if got := len(s.shards[0].ids); got != 2 {
		t.Fatalf("%d names interned, want 2", got)
	}
	if _, ok, _ := s.TakeAt(at(0), []Check{{"limit1", l, "back", 1, false}}, nil); !ok {
		t.Fatal("take denied")
	}
	want[[2]string{"limit1", "back"}] = true
	out := s.ExportAt(at(0), nil, false)
	if len(out) != len(want) || s.Len() != len(want) {
		t.Fatalf("exported %d, Len %d, want %d", len(out), s.Len(), len(want))
	}
	for _, e := range out {
		if !want[[2]string{e.Name, e.Key}] {
			t.Fatalf("exported %q %q", e.Name, e.Key)
		}
		if !s.Has(e.Name, e.Key) {
			t.Fatalf("Has %q %q false", e.Name, e.Key)
		}
	}
}

// TestStoreBytesPerBucket holds the store to its memory budget: at most 100
// bytes of heap per live bucket beyond its key's copy (16 bytes for the
// 14-byte keys here). BenchmarkStoreBytesPerBucket measures 1,000,000 keys;
// this smaller run keeps the test fast. No test of the package runs in
// parallel, so the heap delta is the store's.
func TestStoreBytesPerBucket(t *testing.T) {
	const n = 1 << 17
	keys := benchKeys(n)
	checks := []Check{{Name: "export", Limit: benchLimit, Cost: 1}}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := NewStore(Config{MaxBuckets: n, Shards: 16})
	for _, k := range keys {
		checks[0].Key = k
		if _, ok, err := s.TakeAt(epoch, checks, nil); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keys)
	if s.Len() != n {
		t.Fatalf("Len %d", s.Len())
	}
	perBucket := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
	t.Logf("%.1f bytes per bucket, key copy included", perBucket)
	if perBucket > 100+16 {
		t.Fatalf("%.1f bytes per bucket, want at most 116", perBucket)
	}
	runtime.KeepAlive(s)
}
