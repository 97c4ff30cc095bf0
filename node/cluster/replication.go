package cluster

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-rl/weir/allot"
	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/lease"
	"github.com/weir-rl/weir/node/engine"
	"github.com/weir-rl/weir/ring"
	"github.com/weir-rl/weir/transport"
)

// Replication: each owner streams the changes of the buckets and lease
// keys it owns to each key's successor (placement.Snapshot.Successor, the
// member that takes the key over if the owner fails), every
// ReplicationConfig.Interval or sooner at MaxBatch, as relative quantities
// like handoff. The successor keeps them as replica state (replicas.go),
// never used while the owner decides: only when this node decides a key as
// its owner and holds no state for it does it adopt the replica
// (conservatively merged: the fewer tokens wins), so a crash costs the
// debits of the last interval instead of a full bucket.

// replication is the owner's side of the stream: the changes the engine
// reports, and the loop that sends them. noReplication is the null object
// of a node with replication off.
type replication interface {
	// Bucket and Lease record changes (engine.Changes).
	Bucket(limit, key string, now time.Time, after bucket.State, carried bool)
	Lease(limit, key string, now time.Time)
	// resync asks the next batch to send every owned key: the ring
	// changed, so successors may have too. alone says whether the ring
	// has no other live member, in which case no change is recorded
	// until it has one (the resync then covers what was not recorded).
	resync(alone bool)
	// stream sends batches until ctx ends; with replication off it
	// returns at once.
	stream(ctx context.Context, c *Cluster)
	// sync sends one owned key's state to its successor now
	// (engine.Changes.Sync); with replication off it sends nothing.
	sync(ctx context.Context, c *Cluster, limit, key string) error
}

// noReplication records nothing and sends nothing.
type noReplication struct{ engine.NoChanges }

func (noReplication) resync(bool)                                          {}
func (noReplication) stream(context.Context, *Cluster)                     {}
func (noReplication) sync(context.Context, *Cluster, string, string) error { return nil }

// changeLog is the owner's record of the keys changed since the last
// batch. Safe for concurrent use; Bucket and Lease are on the decision
// path.
//
// One mutex guards the keys. Sharding them 16 ways by a hash of the key,
// each shard with its own lock, was measured slower, not faster, at two
// Ps: BenchmarkChangeLogBucketParallel 72.6 ns against 66.0 (the serial
// call 59 ns against 52, the hash). What the parallel call pays over the
// serial one is the shared map's memory, not the lock.
type changeLog struct {
	cfg ReplicationConfig
	m   *replMetrics
	// sending serializes flush and sync, each from its snapshot to its
	// last send, so a successor never gets an older state of a key after
	// a newer one.
	sending sync.Mutex
	// alone is set while the ring has no other live member: every key
	// lacks a successor, so mark records nothing (a lone node's takes pay
	// no map insert, and its flushes no snapshot per key). It is cleared
	// before the resync that follows a peer's arrival, and a change is
	// marked after the store changed, so a change mark skipped while
	// alone is in the store before that resync's flush exports it.
	alone atomic.Bool

	mu     sync.Mutex       // guards the fields below
	dirty  map[keyID]change // bucket keys changed
	leases map[keyID]change // lease keys changed
	all    bool             // send every owned key (the ring changed)
	kick   chan struct{}    // a batch is full: flush before the tick
	// The last batch's maps, emptied by recycle, for take to reuse.
	spareDirty, spareLeases map[keyID]change
	// spareBatches are the emptied successor batches of the last flush
	// or sync, for the next to fill (replBatches.to). Guarded by sending,
	// which every flush and sync holds from its first batch to its last
	// send. A batch is up to thousands of entries a second per successor;
	// grown afresh each flush, copying as it doubled, it was 4 % of the
	// replicating nodes' CPU when every key was in debt
	// (BenchmarkFlushBatches).
	spareBatches []*replBatch
}

// change is what the log keeps of one changed key until its batch.
type change struct {
	// first is the instant of the key's first change in the batch.
	first time.Time
	// full is the latest instant, in Unix ns, from which the bucket holds
	// no debt after its changes in the batch (engine.Changes.Bucket), or
	// unknownFull when one of them did not say: the flush then looks the
	// bucket up. A key whose full has passed and that has no allotments
	// is skipped without a lookup, as refilled (refilled).
	full int64
	// after is the state the key's one change in the batch left, which
	// the flush sends without looking the bucket up; the zero State when
	// the flush must look it up: the key changed more than once in the
	// batch, or once but not by a take, or its bucket carries an inline
	// limit. A second change voids it, whatever the states say: two takes
	// of one bucket may report in another order than the store made them,
	// so the later report need not hold the later state. With one change
	// per batch there is no order to get wrong. A take that lands in the
	// store before the flush but reports after it is in the next batch,
	// and the successor keeps the fewer tokens of two states of a key
	// (bucket.Store.MergeAt), so a state sent late is harmless.
	after bucket.State
}

// unknownFull is a change.full that says nothing: a lease key's, a
// refund's, a key a resync or a failed batch adds.
const unknownFull = math.MaxInt64

// unknown is the change of a key changed at at, its full unknown.
func unknown(at time.Time) change { return change{first: at, full: unknownFull} }

func newChangeLog(cfg ReplicationConfig, m *replMetrics) *changeLog {
	return &changeLog{
		cfg: cfg, m: m, dirty: map[keyID]change{}, leases: map[keyID]change{},
		kick: make(chan struct{}, 1), all: true,
	}
}

// Bucket implements engine.Changes. A take that leaves its bucket at
// most one Interval from full (full - now <= Interval) is not recorded:
// the bucket then holds at most an Interval's refill of debt, gone within
// an Interval unless another take comes, and a take that leaves more is
// recorded and sends the bucket's whole state. So what a crash can lose
// by an unrecorded take is debt taken within the Interval before it, in
// the bound replication keeps (a crash costs the debits of the last
// interval). The flush would mostly have found such a bucket refilled
// and sent nothing; skipping it here spares the decision path the map
// insert, which under a generous limit (the bench limit leaves each take
// a nanosecond of debt) was replication's whole cost.
func (r *changeLog) Bucket(limit, key string, now time.Time, after bucket.State, carried bool) {
	c := unknown(now)
	if after != (bucket.State{}) {
		c.full = after.FullAt().UnixNano()
		if c.full-now.UnixNano() <= int64(r.cfg.Interval) {
			return
		}
		if !carried {
			c.after = after
		}
	}
	r.mark(false, limit, key, c)
}

// Lease implements engine.Changes.
func (r *changeLog) Lease(limit, key string, now time.Time) {
	r.mark(true, limit, key, unknown(now))
}

func (r *changeLog) mark(lease bool, limit, key string, c change) {
	if r.alone.Load() {
		return
	}
	k := keyID{Limit: limit, Key: key}
	r.mu.Lock()
	m := r.dirty
	if lease {
		m = r.leases
	}
	if was, ok := m[k]; !ok {
		m[k] = c
	} else {
		m[k] = change{first: was.first, full: max(was.full, c.full)} // after voided: see change.after
	}
	batchFull := len(r.dirty)+len(r.leases) >= r.cfg.MaxBatch
	r.mu.Unlock()
	if batchFull {
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
}

// take returns the changed keys and whether everything must be sent, and
// starts a new batch. The caller hands the two maps back with recycle once
// it is done with them.
func (r *changeLog) take() (buckets, leases map[keyID]change, all bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	buckets, leases, all = r.dirty, r.leases, r.all
	r.dirty, r.leases, r.all = orNew(r.spareDirty), orNew(r.spareLeases), false
	r.spareDirty, r.spareLeases = nil, nil
	return buckets, leases, all
}

// orNew returns m, or a new map when m is nil.
func orNew(m map[keyID]change) map[keyID]change {
	if m == nil {
		return map[keyID]change{}
	}
	return m
}

// recycle keeps the maps of a batch for the next one, so a steady stream
// of changes allocates no maps. A map grown far past a batch (a resync
// holds every owned key) is left to the collector instead.
func (r *changeLog) recycle(buckets, leases map[keyID]change) {
	keep := func(m map[keyID]change) map[keyID]change {
		if len(m) > 4*r.cfg.MaxBatch {
			return nil
		}
		clear(m)
		return m
	}
	buckets, leases = keep(buckets), keep(leases)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spareDirty, r.spareLeases = buckets, leases
}

// requeue puts keys of a batch that was not delivered back, as changed at
// or before at, to be looked up at the next flush. A key changed again
// since keeps the full its new changes recorded, which bounds its state
// then as well, but not the state its new change left: that change may
// have reported after an earlier take of the key whose report was in the
// batch lost, so only the store has the latest state.
func (r *changeLog) requeue(buckets, leases []keyID, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	again := func(m map[keyID]change, k keyID) {
		c, ok := m[k]
		if !ok {
			m[k] = unknown(at)
			return
		}
		c.first, c.after = minTime(c.first, at), bucket.State{}
		m[k] = c
	}
	for _, k := range buckets {
		again(r.dirty, k)
	}
	for _, k := range leases {
		again(r.leases, k)
	}
}

// resync implements replication.
func (r *changeLog) resync(alone bool) {
	if !alone {
		r.alone.Store(false)
	}
	r.mu.Lock()
	r.all = true
	r.mu.Unlock()
	if alone {
		r.alone.Store(true)
	}
}

// stream implements replication: a batch every interval (or when MaxBatch
// keys changed), a heartbeat to every live peer when there was nothing to
// send for a while.
func (r *changeLog) stream(ctx context.Context, c *Cluster) {
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	var beat time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.kick:
		}
		sent := c.flush(ctx, r)
		if now := c.now(); now.Sub(beat) >= r.cfg.heartbeat() {
			c.heartbeat(ctx, r, sent)
			beat = now
		}
	}
}

// flush sends the changes r recorded since the last flush to their
// successors and returns the addresses it sent to.
func (c *Cluster) flush(ctx context.Context, r *changeLog) map[string]bool {
	r.sending.Lock()
	defer r.sending.Unlock()
	dirtyB, dirtyL, all := r.take()
	now := c.now()
	owner := c.run.Holdings
	if all {
		for _, e := range owner.ExportBuckets(now, nil, false) {
			dirtyB[keyID{Limit: e.Name, Key: e.Key}] = unknown(now)
		}
		for _, l := range owner.ExportLeases(now, nil, false).Leases {
			dirtyL[keyID{Limit: l.Limit, Key: l.Key}] = unknown(now)
		}
	}
	bs := r.batches(c.placement(), now)
	defer r.keep(bs)
	c.batchBuckets(bs, dirtyB, c.holdingsOf(now, dirtyB))
	c.batchLeases(bs, dirtyL)
	r.recycle(dirtyB, dirtyL)
	sent := map[string]bool{}
	for addr, b := range bs.byAddr {
		n, err := c.pool.Replicate(ctx, addr, b.st, b.dropped)
		r.m.bytes.Add(float64(n))
		if err != nil {
			r.m.errors.Inc()
			r.requeue(b.buckets, b.leases, b.oldest)
			continue
		}
		sent[addr] = true
		r.m.lag.Set(c.now().Sub(b.oldest).Seconds())
		r.m.entries.WithLabelValues("bucket").Add(float64(len(b.st.Buckets)))
		r.m.entries.WithLabelValues("lease").Add(float64(len(b.st.Leases.Leases)))
		r.m.entries.WithLabelValues("dropped").Add(float64(len(b.dropped)))
	}
	return sent
}

// sync implements replication: (limit, key) with its allotments to the
// key's successor, now. A key this node does not own, or without a live
// successor, sends nothing.
func (r *changeLog) sync(ctx context.Context, c *Cluster, limit, key string) error {
	r.sending.Lock()
	defer r.sending.Unlock()
	now := c.now()
	dirty := map[keyID]change{{Limit: limit, Key: key}: unknown(now)}
	bs := r.batches(c.placement(), now)
	defer r.keep(bs)
	c.batchBuckets(bs, dirty, c.holdingsOf(now, dirty))
	for addr, b := range bs.byAddr {
		n, err := c.pool.Replicate(ctx, addr, b.st, b.dropped)
		r.m.bytes.Add(float64(n))
		if err != nil {
			r.m.errors.Inc()
			return err
		}
		r.m.entries.WithLabelValues("bucket").Add(float64(len(b.st.Buckets)))
	}
	return nil
}

// holdingsOf returns the allotments granted of the dirty buckets, by key.
func (c *Cluster) holdingsOf(now time.Time, dirty map[keyID]change) map[keyID][]allot.Entry {
	out := map[keyID][]allot.Entry{}
	for _, h := range c.run.Holdings.ExportHoldings(now, func(l, k string) bool { _, ok := dirty[keyID{Limit: l, Key: k}]; return ok }, false) {
		k := keyID{Limit: h.Key.Limit, Key: h.Key.Key}
		out[k] = append(out[k], h)
	}
	return out
}

// batchBuckets adds the changed buckets still in debt, or with allotments
// granted of them, to their successors' batches with those allotments
// (the successor replaces its replica of the key's allotments by them),
// and those no longer held as dropped. A key its changes say is full by
// now, without allotments, costs no lookup at all.
func (c *Cluster) batchBuckets(bs *replBatches, dirty map[keyID]change, holdings map[keyID][]allot.Entry) {
	now := bs.now.UnixNano()
	for k, ch := range dirty {
		hs := holdings[k]
		if ch.full <= now && len(hs) == 0 {
			continue // refilled since its last take: as below, without the lookups
		}
		p, ok := bs.snap.Successor(k.Limit, k.Key)
		if !ok {
			continue // nobody to send it to, so no snapshot either
		}
		e, held := c.snapshotOf(bs.now, k, ch)
		if held && refilled(e.Snapshot) && len(hs) == 0 {
			continue // the replica refills to full by itself: nothing to send
		}
		b := bs.to(p.Addr)
		b.buckets = append(b.buckets, k)
		b.oldest = minTime(b.oldest, ch.first)
		b.st.Holdings = append(b.st.Holdings, hs...)
		switch {
		case held:
			b.st.Buckets = append(b.st.Buckets, e)
		case len(hs) > 0:
			// Held out entirely, the bucket may have been evicted full
			// under its reduced capacity: a missing bucket with holdings.
			b.st.Buckets = append(b.st.Buckets, bucket.Entry{Name: k.Limit, Key: k.Key, Snapshot: bucket.Snapshot{Full: true}})
		default:
			b.dropped = append(b.dropped, k)
		}
	}
}

// snapshotOf is the state of the changed bucket k to send at now: the
// state its one change in the batch left (change.after), else the store's.
// held is false when the store holds no such bucket.
func (c *Cluster) snapshotOf(now time.Time, k keyID, ch change) (e bucket.Entry, held bool) {
	if ch.after == (bucket.State{}) {
		return c.run.Holdings.SnapshotBucket(now, k.Limit, k.Key)
	}
	return bucket.Entry{Name: k.Limit, Key: k.Key, Snapshot: ch.after.SnapshotAt(now)}, true
}

// batchLeases adds the leases of the changed lease keys to their
// successors' batches, and keys that hold no lease any more as dropped.
func (c *Cluster) batchLeases(bs *replBatches, dirty map[keyID]change) {
	if len(dirty) == 0 {
		return
	}
	h := c.run.Holdings.ExportLeases(bs.now, func(l, k string) bool { _, ok := dirty[keyID{Limit: l, Key: k}]; return ok }, false)
	held := map[keyID][]lease.Snapshot{}
	for _, l := range h.Leases {
		k := keyID{Limit: l.Limit, Key: l.Key}
		held[k] = append(held[k], l)
	}
	for k, ch := range dirty {
		b := bs.of(k.Limit, k.Key)
		if b == nil {
			continue
		}
		b.leases = append(b.leases, k)
		b.oldest = minTime(b.oldest, ch.first)
		if ls, ok := held[k]; ok {
			b.st.Leases.Leases = append(b.st.Leases.Leases, ls...)
			b.st.Leases.NextFencing = h.NextFencing
		} else {
			b.dropped = append(b.dropped, k)
		}
	}
}

// heartbeat tells every live peer not sent to in this round that this
// node's stream is alive, so a successor can tell a replica that is
// current from one whose owner went quiet before it failed.
func (c *Cluster) heartbeat(ctx context.Context, r *changeLog, sent map[string]bool) {
	v := c.ring.View()
	for _, m := range v.Members {
		addr := m.Meta.GRPCAddr
		if m.Name == c.self || m.State != ring.Alive || addr == "" || sent[addr] {
			continue
		}
		if n, err := c.pool.Replicate(ctx, addr, transport.State{}, nil); err == nil {
			r.m.bytes.Add(float64(n))
		}
	}
}

// refilled reports a bucket that holds no debt at the flush: it is not
// sent. The successor holds either no replica of it, which counts as full,
// or an older one that its own clock has refilled by now at the same rate
// (the owner's state only ever has fewer tokens than that older state aged,
// save for refunds, which leave the replica on the safe side: fewer
// tokens). So a key replicates only while it is in debt, and keys that
// refill within an interval, most keys of most limits, cost the successor
// nothing.
func refilled(s bucket.Snapshot) bool { return !s.InDebtAfter(0) }

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
