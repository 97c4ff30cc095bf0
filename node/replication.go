package node

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/lease"
	"github.com/weir-rl/weir/node/limits"
	"github.com/weir-rl/weir/node/placement"
	"github.com/weir-rl/weir/ring"
	"github.com/weir-rl/weir/transport"
)

// Replication: each owner streams the changes of the buckets and lease
// keys it owns to each key's successor (placement.Snapshot.Successor, the
// member that takes the key over if the owner fails), every
// ReplicationConfig.Interval or sooner at MaxBatch, as relative
// quantities like handoff. The successor keeps them as replica state,
// never used while the owner decides: only when this node decides a key
// as its owner and holds no state for it does it adopt the replica
// (conservatively merged: the fewer tokens wins), so a crash costs the
// debits of the last interval instead of a full bucket.

// replicator is the owner's side: the keys changed since the last batch.
// Safe for concurrent use; touch is on the decision path.
type replicator struct {
	cfg ReplicationConfig

	mu     sync.Mutex             // guards the fields below
	dirty  map[movedKey]time.Time // bucket keys changed, with their first change
	leases map[movedKey]time.Time // lease keys changed
	resync bool                   // send every owned key (the ring changed)
	kick   chan struct{}          // a batch is full: flush before the tick
	// The last batch's maps, emptied by recycle, for take to reuse.
	spareDirty, spareLeases map[movedKey]time.Time
}

func newReplicator(cfg ReplicationConfig) *replicator {
	return &replicator{
		cfg: cfg, dirty: map[movedKey]time.Time{}, leases: map[movedKey]time.Time{},
		kick: make(chan struct{}, 1), resync: true,
	}
}

// touch records that the bucket (limit, key) changed at now.
func (r *replicator) touch(limit, key string, now time.Time) {
	r.mark(false, limit, key, now)
}

// touchLease records that the lease key (limit, key) changed at now.
func (r *replicator) touchLease(limit, key string, now time.Time) {
	r.mark(true, limit, key, now)
}

func (r *replicator) mark(lease bool, limit, key string, now time.Time) {
	k := movedKey{limit, key}
	r.mu.Lock()
	m := r.dirty
	if lease {
		m = r.leases
	}
	if _, ok := m[k]; !ok {
		m[k] = now
	}
	full := len(r.dirty)+len(r.leases) >= r.cfg.MaxBatch
	r.mu.Unlock()
	if full {
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
}

// take returns the changed keys and whether everything must be sent, and
// starts a new batch. The caller hands the two maps back with recycle once
// it is done with them.
func (r *replicator) take() (buckets, leases map[movedKey]time.Time, resync bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	buckets, leases, resync = r.dirty, r.leases, r.resync
	r.dirty, r.leases, r.resync = orNew(r.spareDirty), orNew(r.spareLeases), false
	r.spareDirty, r.spareLeases = nil, nil
	return buckets, leases, resync
}

// orNew returns m, or a new map when m is nil.
func orNew(m map[movedKey]time.Time) map[movedKey]time.Time {
	if m == nil {
		return map[movedKey]time.Time{}
	}
	return m
}

// recycle keeps the maps of a batch for the next one, so a steady stream
// of changes allocates no maps. A map grown far past a batch (a resync
// holds every owned key) is left to the collector instead.
func (r *replicator) recycle(buckets, leases map[movedKey]time.Time) {
	keep := func(m map[movedKey]time.Time) map[movedKey]time.Time {
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
// or before at.
func (r *replicator) requeue(buckets, leases []movedKey, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range buckets {
		if old, ok := r.dirty[k]; !ok || at.Before(old) {
			r.dirty[k] = at
		}
	}
	for _, k := range leases {
		if old, ok := r.leases[k]; !ok || at.Before(old) {
			r.leases[k] = at
		}
	}
}

// resyncAll asks the next batch to send every owned key: the ring changed,
// so successors may have too.
func (r *replicator) resyncAll() {
	r.mu.Lock()
	r.resync = true
	r.mu.Unlock()
}

// replicas is the successor's side: the replica state this node keeps of
// keys its peers own. Safe for concurrent use.
type replicas struct {
	max     int
	buckets *bucket.Store // replica buckets, aged by this node's clock
	n       atomic.Int64  // lease keys held, for the gauge

	mu     sync.Mutex                // guards the fields below
	leases map[movedKey]leaseReplica // lease keys by (limit, key)
	heard  map[string]time.Time      // member → last message of its stream
}

// leaseReplica is the lease table part of one key, as its owner last sent
// it, and when it arrived.
type leaseReplica struct {
	from string
	h    lease.Handoff
	at   time.Time
}

func newReplicas(cfg ReplicationConfig) *replicas {
	bc := bucket.DefaultConfig()
	bc.MaxBuckets = cfg.MaxReplicaKeys
	return &replicas{
		max: cfg.MaxReplicaKeys, buckets: bucket.NewStore(bc),
		leases: map[movedKey]leaseReplica{}, heard: map[string]time.Time{},
	}
}

// len is the number of replica entries held: buckets and lease keys.
func (rs *replicas) len() int { return rs.buckets.Len() + int(rs.n.Load()) }

// apply stores a batch from member from at now.
func (rs *replicas) apply(now time.Time, f *limits.File, from string, entries []transport.HandoffEntry, dropped []transport.Check) {
	bs := make([]bucket.Entry, 0, len(entries))
	var byKey map[movedKey][]transport.HandoffEntry
	for _, e := range entries {
		if b, ok := bucketOf(e); ok {
			bs = append(bs, b)
		} else if e.Kind == transport.HandoffLease {
			if byKey == nil {
				byKey = map[movedKey][]transport.HandoffEntry{}
			}
			k := movedKey{e.Limit, e.Key}
			byKey[k] = append(byKey[k], e)
		}
	}
	if len(bs) > 0 {
		rs.buckets.MergeAt(now, bs, bucketLimit(f))
	}
	for _, d := range dropped {
		_, _ = rs.buckets.ExtractAt(now, d.Limit, d.Key)
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.heard[from] = now
	for _, d := range dropped {
		delete(rs.leases, movedKey{d.Limit, d.Key})
	}
	for k, es := range byKey {
		if _, ok := rs.leases[k]; !ok && len(rs.leases) >= rs.max {
			continue // bounded: this key's takeover grants only a share
		}
		rs.leases[k] = leaseReplica{from: from, h: leaseHandoff(es), at: now}
	}
	rs.n.Store(int64(len(rs.leases)))
}

// current reports whether member name's stream was alive within quiet
// before at: its replica then holds everything but its last interval.
func (rs *replicas) current(name string, at time.Time, quiet time.Duration) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	h, ok := rs.heard[name]
	return ok && at.Sub(h) <= quiet
}

// takeBucket removes and returns the replica of bucket (limit, key) as of
// now.
func (rs *replicas) takeBucket(now time.Time, limit, key string) (bucket.Entry, bool) {
	if rs.buckets.Len() == 0 {
		return bucket.Entry{}, false
	}
	return rs.buckets.ExtractAt(now, limit, key)
}

// takeLeases removes and returns the replica of lease key (limit, key),
// its leases' remaining time aged to now (expired ones left out).
func (rs *replicas) takeLeases(now time.Time, limit, key string) (lease.Handoff, bool) {
	if rs.n.Load() == 0 {
		return lease.Handoff{}, false
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	k := movedKey{limit, key}
	lr, ok := rs.leases[k]
	if !ok {
		return lease.Handoff{}, false
	}
	delete(rs.leases, k)
	rs.n.Store(int64(len(rs.leases)))
	h := lease.Handoff{NextFencing: lr.h.NextFencing}
	age := now.Sub(lr.at)
	for _, l := range lr.h.Leases {
		if l.Remaining -= age; l.Remaining > 0 {
			h.Leases = append(h.Leases, l)
		}
	}
	return h, true
}

// sweep drops the replicas this node no longer keeps in view v: keys whose
// owner is alive, is not this node, and has another successor. Replicas of
// failed owners stay until adopted or forgotten with the failure.
func (rs *replicas) sweep(now time.Time, v *ring.View) {
	without := map[string]*ring.View{}
	keep := func(limit, key string) bool {
		hk := ring.HashKey(limit, key)
		o, ok := v.Owner(hk)
		if !ok || o.Name == v.Self || o.State != ring.Alive {
			return true
		}
		w, ok := without[o.Name]
		if !ok {
			w = v.Without(o.Name)
			without[o.Name] = w
		}
		s, ok := w.Owner(hk)
		return ok && s.Name == v.Self
	}
	rs.buckets.ExportAt(now, func(name, key string) bool { return !keep(name, key) }, true)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for k := range rs.leases {
		if !keep(k.limit, k.key) {
			delete(rs.leases, k)
		}
	}
	rs.n.Store(int64(len(rs.leases)))
}

// bucketLimit looks a rate limit's bucket policy up in f.
func bucketLimit(f *limits.File) func(name string) (bucket.Limit, bool) {
	return func(name string) (bucket.Limit, bool) {
		l, ok := f.Lookup(name)
		if !ok || l.Kind != limits.KindRate {
			return bucket.Limit{}, false
		}
		return l.Bucket, true
	}
}

// replMetrics are the collectors of replication.
type replMetrics struct {
	lag     prometheus.Gauge
	bytes   prometheus.Counter
	entries *prometheus.CounterVec // kind: bucket|lease|dropped
	errors  prometheus.Counter
	adopted *prometheus.CounterVec // kind: bucket|lease
}

func newReplMetrics(reg prometheus.Registerer, held func() float64) *replMetrics {
	m := &replMetrics{
		lag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "weir_replication_lag_seconds",
			Help: "Age of the oldest change in the last replication batch when its successor stored it.",
		}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_replication_sent_bytes_total", Help: "Bytes of replication messages sent to successors.",
		}),
		entries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_replication_sent_entries_total", Help: "Replication entries sent to successors, by kind (bucket, lease, dropped).",
		}, []string{"kind"}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_replication_errors_total", Help: "Replication batches a successor did not acknowledge (resent with the next batch).",
		}),
		adopted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_replica_adopted_total", Help: "Replica entries this node started a key from after taking it over, by kind.",
		}, []string{"kind"}),
	}
	held2 := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "weir_replica_entries", Help: "Replica entries (buckets and lease keys) this node keeps for its peers.",
	}, held)
	reg.MustRegister(m.lag, m.bytes, m.entries, m.errors, m.adopted, held2)
	return m
}

// replicate runs the owner's stream until ctx ends: a batch every
// interval (or when MaxBatch keys changed), a heartbeat to every live peer
// when there was nothing to send for a while.
func (c *cluster) replicate(ctx context.Context) {
	t := time.NewTicker(c.repl.cfg.Interval)
	defer t.Stop()
	var beat time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.repl.kick:
		}
		sent := c.flush(ctx)
		if now := c.now(); now.Sub(beat) >= c.repl.cfg.heartbeat() {
			c.heartbeat(ctx, sent)
			beat = now
		}
	}
}

// replBatch is what one successor gets in one flush.
type replBatch struct {
	entries []transport.HandoffEntry
	dropped []transport.Check
	buckets []movedKey // to requeue on failure
	leases  []movedKey
	oldest  time.Time
}

// flush sends the changes since the last flush to their successors and
// returns the addresses it sent to.
func (c *cluster) flush(ctx context.Context) map[string]bool {
	dirtyB, dirtyL, resync := c.repl.take()
	snap := c.placement()
	now := c.now()
	batches := map[string]*replBatch{}
	batchOf := func(limit, key string) *replBatch {
		p, ok := snap.Successor(limit, key)
		if !ok {
			return nil
		}
		b := batches[p.Addr]
		if b == nil {
			b = &replBatch{oldest: now}
			batches[p.Addr] = b
		}
		return b
	}
	if resync {
		for _, e := range c.store.ExportAt(now, nil, false) {
			dirtyB[movedKey{e.Name, e.Key}] = now
		}
		for _, l := range c.leases.export(now, nil, false).Leases {
			dirtyL[movedKey{l.Limit, l.Key}] = now
		}
	}
	for k, at := range dirtyB {
		e, held := c.store.SnapshotAt(now, k.limit, k.key)
		if held && refilled(e.Snapshot) {
			continue // the replica refills to full by itself: nothing to send
		}
		b := batchOf(k.limit, k.key)
		if b == nil {
			continue // not ours (any more), or no live successor
		}
		b.buckets = append(b.buckets, k)
		b.oldest = minTime(b.oldest, at)
		if held {
			b.entries = append(b.entries, bucketEntry(e))
		} else {
			b.dropped = append(b.dropped, transport.Check{Limit: k.limit, Key: k.key})
		}
	}
	if len(dirtyL) > 0 {
		h := c.leases.export(now, func(l, k string) bool { _, ok := dirtyL[movedKey{l, k}]; return ok }, false)
		held := map[movedKey][]lease.Snapshot{}
		for _, l := range h.Leases {
			k := movedKey{l.Limit, l.Key}
			held[k] = append(held[k], l)
		}
		for k, at := range dirtyL {
			b := batchOf(k.limit, k.key)
			if b == nil {
				continue
			}
			b.leases = append(b.leases, k)
			b.oldest = minTime(b.oldest, at)
			if ls, ok := held[k]; ok {
				b.entries = append(b.entries, leaseEntries(lease.Handoff{NextFencing: h.NextFencing, Leases: ls})...)
			} else {
				b.dropped = append(b.dropped, transport.Check{Limit: k.limit, Key: k.key})
			}
		}
	}
	c.repl.recycle(dirtyB, dirtyL)
	sent := map[string]bool{}
	for addr, b := range batches {
		n, err := c.pool.Replicate(ctx, addr, b.entries, b.dropped)
		c.rm.bytes.Add(float64(n))
		if err != nil {
			c.rm.errors.Inc()
			c.repl.requeue(b.buckets, b.leases, b.oldest)
			continue
		}
		sent[addr] = true
		c.rm.lag.Set(c.now().Sub(b.oldest).Seconds())
		for _, e := range b.entries {
			if e.Kind == transport.HandoffBucket {
				c.rm.entries.WithLabelValues("bucket").Inc()
			} else {
				c.rm.entries.WithLabelValues("lease").Inc()
			}
		}
		c.rm.entries.WithLabelValues("dropped").Add(float64(len(b.dropped)))
	}
	return sent
}

// heartbeat tells every live peer not sent to in this round that this
// node's stream is alive, so a successor can tell a replica that is
// current from one whose owner went quiet before it failed.
func (c *cluster) heartbeat(ctx context.Context, sent map[string]bool) {
	v := c.ring.View()
	for _, m := range v.Members {
		addr := m.Meta.GRPCAddr
		if m.Name == c.self || m.State != ring.Alive || addr == "" || sent[addr] {
			continue
		}
		if n, err := c.pool.Replicate(ctx, addr, nil, nil); err == nil {
			c.rm.bytes.Add(float64(n))
		}
	}
}

// replicaIn stores a batch of replica state from member from.
func (c *cluster) replicaIn(from string, entries []transport.HandoffEntry, dropped []transport.Check) {
	c.replicas.apply(c.now(), c.limits(), from, entries, dropped)
}

// adopt starts (limit, key), which this node now decides as its owner and
// holds no state for, from its replica, if it keeps one: the bucket merged
// conservatively into the owner store, the leases imported with their
// remaining time.
func (c *cluster) adopt(limit, key string) {
	if c.replicas == nil {
		return
	}
	now := c.now()
	if e, ok := c.replicas.takeBucket(now, limit, key); ok {
		c.store.MergeAt(now, []bucket.Entry{e}, bucketLimit(c.limits()))
		c.rm.adopted.WithLabelValues("bucket").Inc()
		c.repl.touch(limit, key, now)
	}
	if h, ok := c.replicas.takeLeases(now, limit, key); ok {
		if err := c.leases.importFrom(now, h); err != nil {
			c.log.Warn("lease replica rejected", "err", err)
		}
		c.rm.adopted.WithLabelValues("lease").Inc()
		c.repl.touchLease(limit, key, now)
	}
}

// replicaCurrent reports whether this node's replica of member failed's
// leases was current when its failure was noticed at: its stream (batches
// or heartbeats) was heard within the detection spread plus two
// heartbeats before. Then the replica names every lease but those of the
// stream's last interval, and the lease ceiling is not needed.
func (c *cluster) replicaCurrent(snap *placement.Snapshot) func(failed string, at time.Time) bool {
	if c.replicas == nil {
		return nil
	}
	quiet := c.rules.Timing.DetectionSpread(snap.Known()) + 2*c.repl.cfg.heartbeat()
	return func(failed string, at time.Time) bool { return c.replicas.current(failed, at, quiet) }
}

// refilled reports a bucket that holds no debt at the flush: it is not
// sent. The successor holds either no replica of it, which counts as full,
// or an older one that its own clock has refilled by now at the same rate
// (the owner's state only ever has fewer tokens than that older state aged,
// save for refunds, which leave the replica on the safe side: fewer
// tokens). So a key replicates only while it is in debt, and keys that
// refill within an interval, most keys of most limits, cost the successor
// nothing.
func refilled(s bucket.Snapshot) bool { return s.Full || s.UntilFull <= 0 }

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
