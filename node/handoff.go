package node

import (
	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/lease"
	"github.com/weir-rl/weir/transport"
)

// This file converts the state that crosses nodes (handoff and
// replication) between the cores' snapshots and the peer messages
// (transport.BucketState, transport.LeaseState; peer.proto). Every
// quantity is relative to the sender's now.

// bucketEntry is the handoff entry of one exported bucket.
func bucketEntry(e bucket.Entry) transport.HandoffEntry {
	s := e.Snapshot
	return transport.HandoffEntry{
		Kind: transport.HandoffBucket, Limit: e.Name, Key: e.Key,
		Bucket: transport.BucketState{
			Algorithm: uint8(s.Algorithm), Full: s.Full, Count: s.Count, Frac: s.Frac, Prev: s.Prev,
			Ahead: s.Ahead, Since: s.Since, Left: s.Left, UntilFull: s.UntilFull,
		},
	}
}

// bucketOf returns the bucket a handoff entry carries; ok is false for an
// entry of another kind or an algorithm this version does not know.
func bucketOf(e transport.HandoffEntry) (bucket.Entry, bool) {
	b := e.Bucket
	if e.Kind != transport.HandoffBucket || b.Algorithm > uint8(bucket.FixedWindow) {
		return bucket.Entry{}, false
	}
	return bucket.Entry{Name: e.Limit, Key: e.Key, Snapshot: bucket.Snapshot{
		Algorithm: bucket.Algorithm(b.Algorithm), Full: b.Full, Count: b.Count, Frac: b.Frac, Prev: b.Prev,
		Ahead: b.Ahead, Since: b.Since, Left: b.Left, UntilFull: b.UntilFull,
	}}, true
}

// leaseEntries are the handoff entries of an exported lease table part:
// each lease with its remaining time, and the sender's fencing floor.
func leaseEntries(h lease.Handoff) []transport.HandoffEntry {
	out := make([]transport.HandoffEntry, 0, len(h.Leases))
	for _, l := range h.Leases {
		out = append(out, transport.HandoffEntry{
			Kind: transport.HandoffLease, Limit: l.Limit, Key: l.Key,
			Lease: transport.LeaseState{
				ID: l.ID, Holder: l.Holder, Fencing: l.Fencing, TTL: l.TTL,
				Remaining: l.Remaining, NextFencing: h.NextFencing,
			},
		})
	}
	return out
}

// leaseHandoff collects the lease entries of entries into a lease.Handoff
// whose fencing floor is the highest one sent.
func leaseHandoff(entries []transport.HandoffEntry) lease.Handoff {
	var h lease.Handoff
	for _, e := range entries {
		if e.Kind != transport.HandoffLease {
			continue
		}
		l := e.Lease
		h.Leases = append(h.Leases, lease.Snapshot{
			ID: l.ID, Limit: e.Limit, Key: e.Key, Holder: l.Holder,
			Fencing: l.Fencing, TTL: l.TTL, Remaining: l.Remaining,
		})
		h.NextFencing = max(h.NextFencing, l.NextFencing)
	}
	return h
}
