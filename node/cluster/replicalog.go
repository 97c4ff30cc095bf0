package cluster

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/node/limits"
	"github.com/weir-rl/weir/transport"
)

// replicaLog holds the bucket part of replica batches as they arrived and
// merges them into the replica store late, and only the buckets still in
// debt then. A replica is insurance that is claimed only when an owner
// fails; merging every entry on arrival costs the successor a store
// lookup per replicated take (a cache miss on a busy node), while most
// entries describe buckets that are full again soon after.
//
// Batches are settled in arrival order, each at its arrival instant: when
// every bucket in it is full again (it is then only dropped), when it has
// waited logHorizon, when the log holds more than its bound, and, for the
// whole log, before anything reads the store (a takeover adopting a key,
// the sweep of a new view, an inspection). Settling merges the batch's
// buckets that are not full again by then and removes its dropped keys.
// Leaving out a bucket that is full again changes nothing: the store keeps
// the fewer tokens of a replica and its update (Store.MergeAt), a full
// bucket has the most, and a later update of the key, from the owner's
// later state, has no more tokens than this one aged. What a reader finds
// is therefore exactly what merging each batch on arrival would have left
// (TestReplicaLogIsEagerMerge). Safe for concurrent use.
type replicaLog struct {
	store *bucket.Store
	bound int          // entries held before the log is settled whole
	n     atomic.Int64 // entries held: lets a reader skip the lock when there are none

	mu      sync.Mutex     // guards q and scratch, and serialises settling, so batches land in arrival order
	q       []pendingBatch // oldest first
	scratch []bucket.Entry // the buckets of the batch being settled
}

// logHorizon is how long a batch waits in the log at most. A batch of
// buckets whose debt is shorter is dropped unmerged; a longer wait would
// hold more memory for the few buckets deeper in debt, such as a hot key's,
// that a batch nearly always has under skewed load.
const logHorizon = 2 * time.Second

// pendingBatch is one batch's buckets and dropped keys as they arrived.
type pendingBatch struct {
	at      time.Time    // arrival, the instant its entries are merged at
	f       *limits.File // the limits in force at arrival
	buckets []bucket.Entry
	packed  transport.Packed
	dropped []transport.Key
	full    time.Time // by then every bucket in it is full again
}

// len is the number of entries b holds.
func (b *pendingBatch) len() int { return len(b.buckets) + b.packed.Len() + len(b.dropped) }

// newReplicaLog returns a log in front of store that settles itself whole
// once it holds more than bound entries.
func newReplicaLog(store *bucket.Store, bound int) *replicaLog {
	return &replicaLog{store: store, bound: max(1, bound)}
}

// add records the buckets and dropped keys of batch r, arrived at now
// under f, first settling the batches at the log's head that are due. It
// settles the whole log when it holds more than its bound, so that the
// memory it holds is bounded like the store's.
func (l *replicaLog) add(now time.Time, f *limits.File, r transport.Replica) {
	b := pendingBatch{at: now, f: f, buckets: r.State.Buckets, packed: r.Packed, dropped: r.Dropped}
	if b.len() == 0 {
		return
	}
	until := r.Packed.UntilFull()
	for i := range b.buckets {
		if s := &b.buckets[i].Snapshot; s.InDebtAfter(until) {
			until = s.UntilFull
		}
	}
	b.full = now.Add(until)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.settleDue(now)
	l.q = append(l.q, b)
	if l.n.Add(int64(b.len())) > int64(l.bound) {
		l.settleAll(now)
	}
}

// compact settles every batch held. A reader of the store calls it first.
func (l *replicaLog) compact(now time.Time) {
	if l.n.Load() == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.settleAll(now)
}

// len returns the entries held, not yet settled.
func (l *replicaLog) len() int { return int(l.n.Load()) }

// settleDue settles the batches at the head that are full again by now or
// have waited logHorizon. Called with mu held.
func (l *replicaLog) settleDue(now time.Time) {
	i := 0
	for ; i < len(l.q); i++ {
		b := &l.q[i]
		if b.full.After(now) && b.at.Add(logHorizon).After(now) {
			break
		}
		l.settle(b, now)
	}
	l.pop(i)
}

// settleAll settles every batch. Called with mu held.
func (l *replicaLog) settleAll(now time.Time) {
	for i := range l.q {
		l.settle(&l.q[i], now)
	}
	l.pop(len(l.q))
}

// pop removes the first n batches, settled. Called with mu held.
func (l *replicaLog) pop(n int) {
	for i := range n {
		l.n.Add(-int64(l.q[i].len()))
		l.q[i] = pendingBatch{}
	}
	l.q = l.q[n:]
	if len(l.q) == 0 {
		l.q = l.q[:0:0] // let the emptied backing array go
	}
}

// settle merges b's buckets that are still in debt at now, at b's arrival,
// and removes its dropped keys from the store. Called with mu held.
func (l *replicaLog) settle(b *pendingBatch, now time.Time) {
	if b.full.After(now) {
		waited := now.Sub(b.at)
		l.scratch = l.scratch[:0]
		for _, e := range b.buckets {
			if e.Snapshot.InDebtAfter(waited) {
				l.scratch = append(l.scratch, e)
			}
		}
		l.scratch = b.packed.AppendInDebt(l.scratch, waited)
		if len(l.scratch) > 0 {
			l.store.MergeAt(b.at, l.scratch, b.f.MergeBucket)
		}
		clear(l.scratch) // let go of the keys
	}
	if len(b.dropped) > 0 && l.store.Len() > 0 { // an empty store holds nothing to remove
		for _, k := range b.dropped {
			_, _ = l.store.ExtractAt(b.at, k.Limit, k.Key)
		}
	}
}
