package cluster

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/node/limits"
	"github.com/weir-rl/weir/transport"
)

const logLimits = `version: 1
limits:
  - name: tb
    algorithm: token_bucket
    capacity: 8
    rate: 10/s
  - name: slow
    algorithm: token_bucket
    capacity: 5
    rate: 1/h
  - name: gcra
    algorithm: gcra
    rate: 5/s
    burst: 3
  - name: sliding
    algorithm: sliding_window
    limit: 6
    window: 2s
  - name: fixed
    algorithm: fixed_window
    limit: 6
    window: minute
`

// TestReplicaLogIsEagerMerge drives an owner's store with random takes and
// sends its snapshots (and dropped keys) as replica batches, packed or not,
// to two successors: one merging each batch on arrival, as a replica store did
// before the log, and one through a replicaLog with a small bound. Every
// read finds the same bucket in both, or a bucket missing from one that is
// full in the other.
func TestReplicaLogIsEagerMerge(t *testing.T) {
	f, err := limits.Parse([]byte(logLimits), "test")
	if err != nil {
		t.Fatal(err)
	}
	names := f.Names()
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			owner, eager, lazy := bucket.NewStore(bucket.DefaultConfig()), bucket.NewStore(bucket.DefaultConfig()), bucket.NewStore(bucket.DefaultConfig())
			log := newReplicaLog(lazy, 1+rng.IntN(40))
			now := time.Unix(1_800_000_000, 0)
			key := func() (string, string) { return names[rng.IntN(len(names))], fmt.Sprint("k", rng.IntN(12)) }
			var expired, merged int
			for step := range 3000 {
				now = now.Add(time.Duration(rng.IntN(400)) * time.Millisecond)
				switch r := rng.IntN(10); {
				case r < 6: // the owner takes, then sends what it took and maybe drops some
					var entries []bucket.Entry
					var dropped []transport.Key
					for range 1 + rng.IntN(6) {
						name, k := key()
						l, _ := f.Lookup(name)
						if _, _, err := owner.TakeAt(now, []bucket.Check{{Name: name, Limit: l.Bucket, Key: k, Cost: 1 + rng.Int64N(3)}}, nil); err != nil {
							t.Fatal(err)
						}
						if e, ok := owner.SnapshotAt(now, name, k); ok {
							entries = append(entries, e)
						}
					}
					if rng.IntN(4) == 0 {
						name, k := key()
						dropped = append(dropped, transport.Key{Limit: name, Key: k})
					}
					eager.MergeAt(now, entries, f.MergeBucket)
					for _, d := range dropped {
						_, _ = eager.ExtractAt(now, d.Limit, d.Key)
					}
					before := log.len()
					batch := transport.Replica{State: transport.State{Buckets: entries}, Dropped: dropped}
					if rng.IntN(2) == 0 { // as a sender speaking V2 packs them
						batch.State.Buckets, batch.Packed = nil, transport.PackedOf(entries)
					}
					log.add(now, f, batch)
					if log.len() > log.bound {
						t.Fatalf("step %d: the log holds %d entries, over its bound %d", step, log.len(), log.bound)
					}
					if log.len() < before+len(entries)+len(dropped) {
						if log.len() == 0 {
							merged++
						} else {
							expired++
						}
					}
				case r < 9: // a reader: compact, then the same bucket in both
					log.compact(now)
					if log.len() != 0 {
						t.Fatalf("step %d: %d entries left after compact", step, log.len())
					}
					name, k := key()
					sameBucket(t, step, now, eager, lazy, name, k)
				default: // a takeover: the bucket leaves both stores
					log.compact(now)
					name, k := key()
					sameBucket(t, step, now, eager, lazy, name, k)
					_, _ = eager.ExtractAt(now, name, k)
					_, _ = lazy.ExtractAt(now, name, k)
				}
			}
			if expired == 0 || merged == 0 {
				t.Fatalf("the run never settled a batch at the head (%d) or the log for its bound (%d): it tests neither", expired, merged)
			}
		})
	}
}

// sameBucket fails unless eager and lazy hold the same snapshot of (name,
// key) at now, a missing bucket counting as a full one.
func sameBucket(t *testing.T, step int, now time.Time, eager, lazy *bucket.Store, name, key string) {
	t.Helper()
	e, eok := eager.SnapshotAt(now, name, key)
	l, lok := lazy.SnapshotAt(now, name, key)
	ef, lf := !eok || refilled(e.Snapshot), !lok || refilled(l.Snapshot)
	if ef && lf {
		return
	}
	if e.Snapshot != l.Snapshot {
		t.Fatalf("step %d: %s/%s merged on arrival %+v (held %v), through the log %+v (held %v)", step, name, key, e.Snapshot, eok, l.Snapshot, lok)
	}
}

// TestReplicaLogLetsFullBatchesGo: batches of buckets that are full again
// are dropped without touching the store, and a batch that is not stays
// until a reader merges it.
func TestReplicaLogLetsFullBatchesGo(t *testing.T) {
	f, err := limits.Parse([]byte(logLimits), "test")
	if err != nil {
		t.Fatal(err)
	}
	owner, lazy := bucket.NewStore(bucket.DefaultConfig()), bucket.NewStore(bucket.DefaultConfig())
	log := newReplicaLog(lazy, 1_000_000)
	now := time.Unix(1_800_000_000, 0)
	tb, _ := f.Lookup("tb")
	for i := range 1000 {
		k := fmt.Sprint("k", i)
		if _, _, err := owner.TakeAt(now, []bucket.Check{{Name: "tb", Limit: tb.Bucket, Key: k, Cost: 8}}, nil); err != nil {
			t.Fatal(err)
		}
		e, _ := owner.SnapshotAt(now, "tb", k)
		log.add(now, f, transport.Replica{Packed: transport.PackedOf([]bucket.Entry{e})})
	}
	if log.len() != 1000 {
		t.Fatalf("holds %d entries, want 1000", log.len())
	}
	// 8 tokens at 10/s are back within 0.8 s: a batch arriving a second
	// later finds every earlier one full again.
	now = now.Add(time.Second)
	e, _ := owner.SnapshotAt(now, "tb", "k0")
	log.add(now, f, transport.Replica{State: transport.State{Buckets: []bucket.Entry{e}}})
	if log.len() != 1 || lazy.Len() != 0 {
		t.Fatalf("after the refill the log holds %d entries and the store %d buckets, want 1 and 0", log.len(), lazy.Len())
	}
}

// TestReplicaLogSettlesAHotKey: under skewed load nearly every batch holds
// a hot key deep in debt beside keys whose debt is short. Each batch is
// settled once it has waited logHorizon, merging the hot key only: the
// log holds about a horizon's batches, and the store one bucket.
func TestReplicaLogSettlesAHotKey(t *testing.T) {
	f, err := limits.Parse([]byte(logLimits), "test")
	if err != nil {
		t.Fatal(err)
	}
	lazy := bucket.NewStore(bucket.DefaultConfig())
	log := newReplicaLog(lazy, 1_000_000)
	now := time.Unix(1_800_000_000, 0)
	const every, short = 100 * time.Millisecond, 50
	for i := range 100 {
		entries := []bucket.Entry{{Name: "slow", Key: "hot", Snapshot: bucket.Snapshot{Algorithm: bucket.TokenBucket, UntilFull: time.Hour}}}
		for j := range short {
			entries = append(entries, bucket.Entry{Name: "tb", Key: fmt.Sprint(i, "/", j), Snapshot: bucket.Snapshot{Algorithm: bucket.TokenBucket, Count: 2, UntilFull: 600 * time.Millisecond}})
		}
		log.add(now, f, transport.Replica{Packed: transport.PackedOf(entries)})
		now = now.Add(every)
	}
	if most := int(logHorizon/every+1) * (short + 1); log.len() > most {
		t.Errorf("the log holds %d entries, over a horizon's %d", log.len(), most)
	}
	if lazy.Len() != 1 || !lazy.Has("slow", "hot") {
		t.Errorf("the store holds %d buckets, want the hot key alone", lazy.Len())
	}
}
