package cluster

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/node/limits"
	"github.com/weir-rl/weir/transport"
)

// replicaLog holds the bucket part of replica batches as they arrived,
// merged into the replica store only when something reads the store: a
// takeover adopting a key, the sweep of a new view, an inspection, or the
// log outgrowing its bound. A replica is insurance that is claimed only
// when an owner fails; merging every entry on arrival costs the successor
// a store lookup per replicated take (a cache miss on a busy node), while
// most entries describe buckets that are full again long before anything
// reads them.
//
// A batch whose every bucket is full again by now is dropped unmerged:
// the store keeps the fewer tokens of a replica and its update
// (Store.MergeAt), and a full bucket has the most, so merging it would
// change nothing. Its dropped keys are still removed from the store, in
// order. What the store holds after compact is therefore exactly what
// merging each batch on arrival would have left, and every reader compacts
// first. Safe for concurrent use.
type replicaLog struct {
	store *bucket.Store
	bound int          // entries held before the log is merged whole
	n     atomic.Int64 // entries held: lets a reader skip the lock when there are none

	mu sync.Mutex     // guards q and serialises merging, so batches land in arrival order
	q  []pendingBatch // oldest first
}

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

// newReplicaLog returns a log in front of store that merges itself whole
// once it holds more than bound entries.
func newReplicaLog(store *bucket.Store, bound int) *replicaLog {
	return &replicaLog{store: store, bound: max(1, bound)}
}

// add records the buckets and dropped keys of batch r, arrived at now
// under f, first dropping the batches at the log's head that are full
// again by now. It merges the whole log when it holds more than its bound,
// so that the memory it holds is bounded like the store's.
func (l *replicaLog) add(now time.Time, f *limits.File, r transport.Replica) {
	b := pendingBatch{at: now, f: f, buckets: r.State.Buckets, packed: r.Packed, dropped: r.Dropped}
	if b.len() == 0 {
		return
	}
	until := r.Packed.UntilFull()
	for i := range b.buckets {
		if s := &b.buckets[i].Snapshot; !refilled(*s) {
			until = max(until, s.UntilFull)
		}
	}
	b.full = now.Add(until)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expire(now)
	l.q = append(l.q, b)
	if l.n.Add(int64(b.len())) > int64(l.bound) {
		l.mergeAll()
	}
}

// compact merges every batch held into the store, in arrival order. A
// reader of the store calls it first.
func (l *replicaLog) compact(now time.Time) {
	if l.n.Load() == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expire(now)
	l.mergeAll()
}

// len returns the entries held, not yet merged.
func (l *replicaLog) len() int { return int(l.n.Load()) }

// expire drops the batches at the head that are full again by now,
// removing their dropped keys from the store. Called with mu held.
func (l *replicaLog) expire(now time.Time) {
	i := 0
	for ; i < len(l.q) && !l.q[i].full.After(now); i++ {
		l.drop(l.q[i].at, l.q[i].dropped)
		l.n.Add(-int64(l.q[i].len()))
		l.q[i] = pendingBatch{}
	}
	l.q = l.q[i:]
	if len(l.q) == 0 {
		l.q = l.q[:0:0] // let the emptied backing array go
	}
}

// mergeAll merges every batch into the store. Called with mu held.
func (l *replicaLog) mergeAll() {
	var scratch []bucket.Entry
	for i := range l.q {
		b := &l.q[i]
		if len(b.buckets) > 0 {
			l.store.MergeAt(b.at, b.buckets, b.f.MergeBucket)
		}
		if b.packed.Len() > 0 {
			scratch = b.packed.AppendTo(scratch[:0])
			l.store.MergeAt(b.at, scratch, b.f.MergeBucket)
		}
		l.drop(b.at, b.dropped)
	}
	clear(l.q)
	l.q = l.q[:0]
	l.n.Store(0)
}

// drop removes keys from the store, which holds nothing to remove when it
// is empty.
func (l *replicaLog) drop(at time.Time, keys []transport.Key) {
	if l.store.Len() == 0 {
		return
	}
	for _, k := range keys {
		_, _ = l.store.ExtractAt(at, k.Limit, k.Key)
	}
}
