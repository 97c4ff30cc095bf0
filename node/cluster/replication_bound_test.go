package cluster

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/weir-rl/weir/bucket"
)

// TestShallowTakesKeepTheCrashBound: neither the takes changeLog.Bucket
// does not record (those that leave their bucket at most an interval from
// full) nor the flush sending the state a take reported instead of
// looking its bucket up makes a crash lose more than the debits not yet
// flushed or of the interval before it. An owner store takes random costs
// at random instants, sometimes two on one key at once; their reports
// reach the change log as racing goroutines' would: in any order, some
// only after the next flush. Every interval a flush sends, as
// Cluster.flush does, the recorded keys still in debt to a replica store,
// merged as the successor merges (fewer tokens wins). Before every take,
// the replica aged to that instant must be short of the owner's debt by no
// more than what the owner admitted in the last interval or has not yet
// had a flush after its report: what a crash then would lose.
func TestShallowTakesKeepTheCrashBound(t *testing.T) {
	cfg := DefaultReplicationConfig() // 20 ms
	lim := bucket.Limit{Algorithm: bucket.TokenBucket, Capacity: 50, Rate: bucket.Rate{N: 100, Per: time.Second}}
	perToken := time.Second / 100
	keys := []string{"a", "b", "c"}
	limitOf := func(string, bucket.Limit) (bucket.Limit, bool, bool) { return lim, false, true }
	debt := func(s *bucket.Store, key string, now time.Time) time.Duration {
		e, ok := s.SnapshotAt(now, "l", key)
		if !ok || e.Snapshot.Full {
			return 0
		}
		return max(0, e.Snapshot.UntilFull)
	}
	// admitted is a take the owner admitted, its report, and whether a
	// flush has run since the report reached the log.
	type admitted struct {
		at                time.Time
		key               string
		cost              int64
		after             bucket.State
		reported, flushed bool
	}

	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		owner, replica := bucket.NewStore(bucket.DefaultConfig()), bucket.NewStore(bucket.DefaultConfig())
		log := newChangeLog(cfg, nil)
		log.resync(false)
		var taken, pending []*admitted
		// report hands the pending reports to the log, each with
		// probability p, in a random order.
		report := func(p float64) {
			rng.Shuffle(len(pending), func(i, j int) { pending[i], pending[j] = pending[j], pending[i] })
			kept := pending[:0]
			for _, a := range pending {
				if rng.Float64() >= p {
					kept = append(kept, a)
					continue
				}
				log.Bucket("l", a.key, a.at, a.after, false)
				a.reported = true
			}
			pending = kept
		}
		now := time.Unix(1_800_000_000, 0)
		nextFlush := now.Add(cfg.Interval)
		var shallow, deep, pairs int
		for range 4000 {
			// Mostly below the rate, in bursts now and then: the
			// buckets spend most of their time a token or two from
			// full, where takes go unrecorded, and sometimes deeper.
			gap := time.Duration(rng.IntN(40)) * time.Millisecond
			if rng.IntN(10) == 0 {
				gap = time.Duration(rng.IntN(500)) * time.Microsecond
			}
			now = now.Add(gap)
			for !nextFlush.After(now) {
				report(0.5) // the rest report after this flush, in the next batch
				flushModel(log, owner, replica, nextFlush, limitOf)
				for _, a := range taken {
					a.flushed = a.flushed || a.reported
				}
				report(1)
				nextFlush = nextFlush.Add(cfg.Interval)
			}
			key := keys[rng.IntN(len(keys))]
			var recent int64
			for _, a := range taken {
				if a.key == key && (now.Sub(a.at) < cfg.Interval || !a.flushed) {
					recent += a.cost
				}
			}
			if lost := debt(owner, key, now) - debt(replica, key, now); lost > time.Duration(recent)*perToken {
				t.Fatalf("seed %d at %v: a crash would lose %v of key %s's debt, more than the %d tokens (%v) admitted in the last interval or not yet flushed",
					seed, now, lost, key, recent, time.Duration(recent)*perToken)
			}
			n := 1
			if rng.IntN(4) == 0 {
				n, pairs = 2, pairs+1 // two takes of one key at once, reporting in either order
			}
			for range n {
				cost := 1 + int64(rng.IntN(3))
				ds, ok, err := owner.TakeAt(now, []bucket.Check{{Name: "l", Limit: lim, Key: key, Cost: cost}}, nil)
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					continue
				}
				if ds[0].State.FullAt().Sub(now) <= cfg.Interval {
					shallow++
				} else {
					deep++
				}
				a := &admitted{at: now, key: key, cost: cost, after: ds[0].State}
				taken, pending = append(taken, a), append(pending, a)
			}
			if len(taken) > 256 {
				taken = taken[len(taken)-256:]
			}
		}
		if shallow < 500 || deep < 50 || pairs < 500 {
			t.Fatalf("seed %d: %d shallow and %d deep takes, %d pairs; the test needs many of each", seed, shallow, deep, pairs)
		}
	}
}

// flushModel is Cluster.flush's bucket step (batchBuckets) at now, with
// the successor's merge, for one owner and no allotments.
func flushModel(log *changeLog, owner, replica *bucket.Store, now time.Time,
	limitOf func(string, bucket.Limit) (bucket.Limit, bool, bool),
) {
	dirty, leases, _ := log.take()
	var sent []bucket.Entry
	for k, ch := range dirty {
		if ch.full <= now.UnixNano() {
			continue
		}
		e, ok := bucket.Entry{Name: k.Limit, Key: k.Key, Snapshot: ch.after.SnapshotAt(now)}, true
		if ch.after == (bucket.State{}) {
			e, ok = owner.SnapshotAt(now, k.Limit, k.Key)
		}
		if ok && !refilled(e.Snapshot) {
			sent = append(sent, e)
		}
	}
	replica.MergeAt(now, sent, limitOf)
	log.recycle(dirty, leases)
}
