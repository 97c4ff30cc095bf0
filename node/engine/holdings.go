package engine

import (
	"time"

	"github.com/weir-rl/weir/allot"
	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/lease"
)

// This file is the engine's owner state as the cluster hands it over: the
// buckets and leases this node owns, exported to a new owner, taken in from
// an old one, snapshotted for the replication stream. State taken in is
// reported to Changes like any step's.

// HasBucket reports whether this node holds state for the owner bucket
// (limit, key).
func (e *Engine) HasBucket(limit, key string) bool { return e.store.Has(limit, key) }

// ExportBuckets snapshots the owner buckets pick selects (all when pick is
// nil) as of now, removing them with remove (bucket.Store.ExportAt).
func (e *Engine) ExportBuckets(now time.Time, pick func(limit, key string) bool, remove bool) []bucket.Entry {
	return e.store.ExportAt(now, pick, remove)
}

// ExtractBucket removes the owner bucket (limit, key) and returns its
// state as of now. The caller holds the key against concurrent steps
// (Router.Hold's counterpart).
func (e *Engine) ExtractBucket(now time.Time, limit, key string) (bucket.Entry, bool) {
	return e.store.ExtractAt(now, limit, key)
}

// SnapshotBucket returns the state of the owner bucket (limit, key) as of
// now without changing it; false when this node holds none.
func (e *Engine) SnapshotBucket(now time.Time, limit, key string) (bucket.Entry, bool) {
	return e.store.SnapshotAt(now, limit, key)
}

// MergeBuckets folds handed-over bucket states into the owner store under
// the limits in force, conservatively (the fewer tokens wins), so a state
// arriving twice never mints tokens; an inline limit's state is merged
// under the definition it carries (limits.File.MergeBucket); states of
// limits no longer in force are dropped.
func (e *Engine) MergeBuckets(now time.Time, entries []bucket.Entry) {
	if len(entries) == 0 {
		return
	}
	for _, b := range entries {
		e.changes.Bucket(b.Name, b.Key, now, bucket.State{}, false)
	}
	e.store.MergeAt(now, entries, e.limits().MergeBucket)
}

// ExportLeases snapshots the owner leases of the keys pick selects (all
// when pick is nil), removing them with remove (lease.Table.Export).
func (e *Engine) ExportLeases(now time.Time, pick func(limit, key string) bool, remove bool) lease.Handoff {
	return e.leases.export(now, pick, remove)
}

// ImportLeases takes in handed-over leases with their remaining time and
// raises the fencing floor above the sender's.
func (e *Engine) ImportLeases(now time.Time, h lease.Handoff) error {
	if len(h.Leases) == 0 {
		return nil
	}
	err := e.leases.importFrom(now, h)
	for _, l := range h.Leases {
		e.changes.Lease(l.Limit, l.Key, now)
	}
	return err
}

// ExportHoldings returns the allotments this node granted as an owner for
// the buckets pick selects (all when pick is nil), relative to now,
// removing them with remove (a handover: they go with their buckets, whose
// capacity they reduce). Holdings that expired by now are left out.
func (e *Engine) ExportHoldings(now time.Time, pick func(limit, key string) bool, remove bool) []allot.Entry {
	e.ledger.mu.Lock()
	defer e.ledger.mu.Unlock()
	var sel func(allot.Key) bool
	if pick != nil {
		sel = func(k allot.Key) bool { return pick(k.Limit, k.Key) }
	}
	es := e.ledger.l.Export(now, sel, remove)
	if remove {
		e.ledger.n.Store(int64(e.ledger.l.Len()))
		e.ledger.tokens.Store(e.ledger.l.Total())
	}
	out := es[:0]
	for _, en := range es {
		if en.Remaining > 0 {
			out = append(out, en)
		}
	}
	return out
}

// ExtractHoldings removes the allotments of bucket (limit, key) and
// returns those still running at now: a handover of one key.
func (e *Engine) ExtractHoldings(now time.Time, limit, key string) []allot.Entry {
	e.ledger.mu.Lock()
	defer e.ledger.mu.Unlock()
	es := e.ledger.l.ExportKey(now, allot.Key{Limit: limit, Key: key}, true)
	e.ledger.n.Store(int64(e.ledger.l.Len()))
	e.ledger.tokens.Store(e.ledger.l.Total())
	out := es[:0]
	for _, en := range es {
		if en.Remaining > 0 {
			out = append(out, en)
		}
	}
	return out
}

// ImportHoldings takes in allotments handed over with their buckets,
// conservatively (allot.Ledger.Import): the larger tokens and the later
// expiry win. The keys' next steps decide by the capacity they reduce.
func (e *Engine) ImportHoldings(now time.Time, es []allot.Entry) error {
	if len(es) == 0 {
		return nil
	}
	e.ledger.mu.Lock()
	err := e.ledger.l.Import(now, es)
	e.ledger.n.Store(int64(e.ledger.l.Len()))
	e.ledger.tokens.Store(e.ledger.l.Total())
	e.ledger.mu.Unlock()
	for _, en := range es {
		e.changes.Bucket(en.Key.Limit, en.Key.Key, now, bucket.State{}, false)
	}
	return err
}

// HasHoldings reports whether this node records allotments of bucket
// (limit, key) as its owner: the bucket must then be replicated with
// them even when it holds no debt.
func (e *Engine) HasHoldings(limit, key string) bool {
	if e.ledger.n.Load() == 0 {
		return false
	}
	e.ledger.mu.Lock()
	defer e.ledger.mu.Unlock()
	return e.ledger.l.Holds(allot.Key{Limit: limit, Key: key})
}
