package engine

import (
	"time"

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
// arriving twice never mints tokens; states of limits no longer in force
// are dropped.
func (e *Engine) MergeBuckets(now time.Time, entries []bucket.Entry) {
	if len(entries) == 0 {
		return
	}
	for _, b := range entries {
		e.changes.Bucket(b.Name, b.Key, now)
	}
	e.store.MergeAt(now, entries, e.limits().RateBucket)
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
