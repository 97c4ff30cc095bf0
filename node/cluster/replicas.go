package cluster

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-rl/weir/allot"
	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/lease"
	"github.com/weir-rl/weir/node/limits"
	"github.com/weir-rl/weir/node/placement"
	"github.com/weir-rl/weir/ring"
	"github.com/weir-rl/weir/transport"
)

// replicaStore is the successor's side of the stream: the replica state
// this node keeps of keys its peers own. noReplicas is the null object of
// a node with replication off.
type replicaStore interface {
	// apply stores a batch from member from at now.
	apply(now time.Time, f *limits.File, from string, r transport.Replica) error
	// takeBucket removes and returns the replica of bucket (limit, key).
	takeBucket(now time.Time, limit, key string) (bucket.Entry, bool)
	// takeLeases removes and returns the replica of lease key (limit, key).
	takeLeases(now time.Time, limit, key string) (lease.Handoff, bool)
	// current reports whether member name's stream was alive within quiet
	// before at.
	current(name string, at time.Time, quiet time.Duration) bool
	// sweep drops the replicas this node no longer keeps in view v.
	sweep(now time.Time, v *ring.View)
	// adopted counts a replica entry of kind ("bucket" or "lease") that a
	// key was started from.
	adopted(kind string)
	// inspect returns the bucket replica of (limit, key) as of now and the
	// number of leases in its lease replica, changing nothing.
	inspect(now time.Time, limit, key string) (bucket.Entry, bool, int)
	// takeHoldings removes and returns the replica of the allotments
	// granted of bucket (limit, key), relative to now.
	takeHoldings(now time.Time, limit, key string) []allot.Entry
}

// errReplicationOff is a replica batch refused by a node with replication
// off.
var errReplicationOff = errors.New("cluster: replication is off on this node")

// noReplicas keeps nothing and refuses replica batches.
type noReplicas struct{}

func (noReplicas) apply(time.Time, *limits.File, string, transport.Replica) error {
	return errReplicationOff
}

func (noReplicas) takeBucket(time.Time, string, string) (bucket.Entry, bool) {
	return bucket.Entry{}, false
}

func (noReplicas) takeLeases(time.Time, string, string) (lease.Handoff, bool) {
	return lease.Handoff{}, false
}
func (noReplicas) current(string, time.Time, time.Duration) bool { return false }
func (noReplicas) sweep(time.Time, *ring.View)                   {}
func (noReplicas) adopted(string)                                {}
func (noReplicas) inspect(time.Time, string, string) (bucket.Entry, bool, int) {
	return bucket.Entry{}, false, 0
}
func (noReplicas) takeHoldings(time.Time, string, string) []allot.Entry { return nil }

// replicas keeps replica state. Safe for concurrent use.
type replicas struct {
	max     int
	buckets *bucket.Store // replica buckets, aged by this node's clock
	log     *replicaLog   // batches not yet merged into buckets: compact before reading it
	n       atomic.Int64  // lease keys held, for the gauge
	m       *replMetrics

	mu       sync.Mutex             // guards the fields below
	leases   map[keyID]leaseReplica // lease keys by (limit, key)
	heard    map[string]time.Time   // member → last message of its stream
	holdings *allot.Ledger          // allotments the owners granted, by bucket
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
	store := bucket.NewStore(bc)
	return &replicas{
		max: cfg.MaxReplicaKeys, buckets: store, log: newReplicaLog(store, cfg.MaxReplicaKeys/pendingShare),
		leases: map[keyID]leaseReplica{}, heard: map[string]time.Time{},
		holdings: allot.NewLedger(cfg.MaxReplicaKeys),
	}
}

// pendingShare bounds the entries a replica log holds unmerged to this
// fraction of MaxReplicaKeys. A packed entry waiting costs a fraction of a
// stored bucket's memory and one that came as a message (a bucket with an
// inline limit) about twice one, so the log adds at most a quarter to the
// store's bound.
const pendingShare = 8

// len is the number of replica entries held: buckets (merged or waiting
// in the log, where one key may be counted more than once) and lease keys.
func (rs *replicas) len() int { return rs.buckets.Len() + rs.log.len() + int(rs.n.Load()) }

func (rs *replicas) adopted(kind string) { rs.m.adopted.WithLabelValues(kind).Inc() }

// clearHoldings drops the replica of k's allotments. Called with mu held.
func (rs *replicas) clearHoldings(k allot.Key) {
	for _, h := range rs.holdings.Holdings(k) {
		rs.holdings.Drop(k, h.Holder)
	}
}

func (rs *replicas) takeHoldings(now time.Time, limit, key string) []allot.Entry {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	k := allot.Key{Limit: limit, Key: key}
	if !rs.holdings.Holds(k) {
		return nil
	}
	return rs.holdings.Export(now, func(x allot.Key) bool { return x == k }, true)
}

func (rs *replicas) inspect(now time.Time, limit, key string) (bucket.Entry, bool, int) {
	rs.log.compact(now)
	e, ok := rs.buckets.SnapshotAt(now, limit, key)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return e, ok, len(rs.leases[keyID{Limit: limit, Key: key}].h.Leases)
}

func (rs *replicas) apply(now time.Time, f *limits.File, from string, r transport.Replica) error {
	rs.log.add(now, f, r)
	st, dropped := r.State, r.Dropped
	var byKey map[keyID][]lease.Snapshot
	for _, l := range st.Leases.Leases {
		if byKey == nil {
			byKey = map[keyID][]lease.Snapshot{}
		}
		k := keyID{Limit: l.Limit, Key: l.Key}
		byKey[k] = append(byKey[k], l)
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.heard[from] = now
	for _, d := range dropped {
		delete(rs.leases, d)
		rs.clearHoldings(allot.Key{Limit: d.Limit, Key: d.Key})
	}
	// The owner sends a bucket with every allotment granted of it: its
	// replica of them is replaced. Bounded: past MaxReplicaKeys a takeover
	// knows fewer (ErrFull ignored).
	for _, b := range st.Buckets {
		rs.clearHoldings(allot.Key{Limit: b.Name, Key: b.Key})
	}
	_ = rs.holdings.Import(now, st.Holdings)
	for k, ls := range byKey {
		if _, ok := rs.leases[k]; !ok && len(rs.leases) >= rs.max {
			continue // bounded: this key's takeover grants only a share
		}
		rs.leases[k] = leaseReplica{from: from, h: lease.Handoff{NextFencing: st.Leases.NextFencing, Leases: ls}, at: now}
	}
	rs.n.Store(int64(len(rs.leases)))
	return nil
}

func (rs *replicas) current(name string, at time.Time, quiet time.Duration) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	h, ok := rs.heard[name]
	return ok && at.Sub(h) <= quiet
}

func (rs *replicas) takeBucket(now time.Time, limit, key string) (bucket.Entry, bool) {
	if rs.buckets.Len() == 0 && rs.log.len() == 0 {
		return bucket.Entry{}, false
	}
	rs.log.compact(now)
	return rs.buckets.ExtractAt(now, limit, key)
}

// takeLeases returns the replica's leases with their remaining time aged
// to now (expired ones left out).
func (rs *replicas) takeLeases(now time.Time, limit, key string) (lease.Handoff, bool) {
	if rs.n.Load() == 0 {
		return lease.Handoff{}, false
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	k := keyID{Limit: limit, Key: key}
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

// sweep drops the replicas of keys whose owner is alive, is not this node,
// and has another successor. Replicas of failed owners stay until adopted
// or forgotten with the failure.
func (rs *replicas) sweep(now time.Time, v *ring.View) {
	without := map[string]*ring.View{}
	keep := func(limit, key string) bool {
		hk := ring.KeySum(limit, key)
		o, ok := v.OwnerSum(hk)
		if !ok || o.Name == v.Self || o.State != ring.Alive {
			return true
		}
		w, ok := without[o.Name]
		if !ok {
			w = v.Without(o.Name)
			without[o.Name] = w
		}
		s, ok := w.OwnerSum(hk)
		return ok && s.Name == v.Self
	}
	rs.log.compact(now)
	rs.buckets.ExportAt(now, func(name, key string) bool { return !keep(name, key) }, true)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for k := range rs.leases {
		if !keep(k.Limit, k.Key) {
			delete(rs.leases, k)
		}
	}
	rs.n.Store(int64(len(rs.leases)))
}

// adopt starts (limit, key), which this node now decides as its owner and
// holds no state for, from its replica, if it keeps one: the bucket merged
// conservatively into the owner store, the leases imported with their
// remaining time.
func (c *Cluster) adopt(limit, key string) {
	now := c.now()
	if hs := c.replicas.takeHoldings(now, limit, key); len(hs) > 0 {
		if err := c.run.Holdings.ImportHoldings(now, hs); err != nil {
			c.log.Warn("allotment replica not all recorded", "err", err)
		}
		c.replicas.adopted("holding")
	}
	if e, ok := c.replicas.takeBucket(now, limit, key); ok {
		c.run.Holdings.MergeBuckets(now, []bucket.Entry{e})
		c.replicas.adopted("bucket")
	}
	if h, ok := c.replicas.takeLeases(now, limit, key); ok {
		if err := c.run.Holdings.ImportLeases(now, h); err != nil {
			c.log.Warn("lease replica rejected", "err", err)
		}
		c.replicas.adopted("lease")
		c.repl.Lease(limit, key, now) // also when every replica lease expired: the successor drops its copy
	}
}

// replicaCurrent reports whether this node's replica of member failed's
// leases was current when its failure was noticed at: its stream (batches
// or heartbeats) was heard within the detection spread plus two
// heartbeats before. Then the replica names every lease but those of the
// stream's last interval, and the lease ceiling is not needed.
func (c *Cluster) replicaCurrent(snap *placement.Snapshot) func(failed string, at time.Time) bool {
	quiet := c.rules.Timing.DetectionSpread(snap.Known()) + 2*c.cfg.Replication.heartbeat()
	return func(failed string, at time.Time) bool { return c.replicas.current(failed, at, quiet) }
}

// replMetrics are the collectors of replication.
type replMetrics struct {
	lag     prometheus.Gauge
	bytes   prometheus.Counter
	entries *prometheus.CounterVec // kind: bucket|lease|dropped
	errors  prometheus.Counter
	adopted *prometheus.CounterVec // kind: bucket|lease
}

func newReplMetrics(reg prometheus.Registerer, held func() int) *replMetrics {
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
	gauge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "weir_replica_entries", Help: "Replica entries this node keeps for its peers: buckets, merged or still in its replica log (a key there may count more than once), and lease keys.",
	}, func() float64 { return float64(held()) })
	reg.MustRegister(m.lag, m.bytes, m.entries, m.errors, m.adopted, gauge)
	return m
}
