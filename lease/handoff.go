package lease

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Snapshot is one lease as it crosses nodes: on a handoff when ownership of
// its key moves, or in the replication stream to the key's next node.
// Its lifetime is relative (Remaining), never the sender's absolute clock,
// so clock skew between nodes cannot lengthen or shorten it (docs/architecture.md §7).
type Snapshot struct {
	// ID, Limit, Key, Holder, Fencing and TTL are the lease's Grant fields.
	ID         string
	Limit, Key string
	Holder     string
	Fencing    uint64
	TTL        time.Duration
	// Remaining is the lease's time left on the sender at export; the
	// receiver's copy expires at its own now + Remaining.
	Remaining time.Duration
}

// Handoff is what one Table passes to another: leases, and the sender's
// fencing floor so that the receiver never issues a token at or below one
// the sender issued — also for keys that hold no lease at the moment.
type Handoff struct {
	// NextFencing is the sender's next fencing token (NextFencing()).
	NextFencing uint64
	// Leases are the exported leases, ordered by Limit, Key, Fencing.
	Leases []Snapshot
}

// Export snapshots the leases of every (limit, key) for which pick returns
// true (all when pick is nil), after performing Expire(now), whose Events it
// returns. With remove, the picked keys leave the table: their leases are
// deleted without appearing in Events.Expired, and their parked waiters are
// dropped (Events.Dropped) so the node can send those callers to the new
// owner. Without remove the table does not change (a replication snapshot).
// pick must not call the Table.
func (t *Table) Export(now time.Time, pick func(limit, key string) bool, remove bool) (Handoff, Events) {
	var ev Events
	t.advance(now, &ev)
	h := Handoff{NextFencing: t.nextFencing}
	var picked []*bucket
	for _, b := range t.buckets {
		if pick == nil || pick(b.limit, b.key) {
			picked = append(picked, b)
		}
	}
	slices.SortFunc(picked, func(a, b *bucket) int {
		return cmp.Or(cmp.Compare(a.limit, b.limit), cmp.Compare(a.key, b.key))
	})
	for _, b := range picked {
		start := len(h.Leases)
		for _, l := range b.leases {
			h.Leases = append(h.Leases, Snapshot{
				ID: l.id, Limit: b.limit, Key: b.key, Holder: l.holder,
				Fencing: l.seq, TTL: l.ttl, Remaining: l.at.Sub(t.now),
			})
		}
		slices.SortFunc(h.Leases[start:], func(a, b Snapshot) int { return cmp.Compare(a.Fencing, b.Fencing) })
		if !remove {
			continue
		}
		for len(b.leases) > 0 {
			t.drop(b.leases[len(b.leases)-1])
		}
		for b.head != nil {
			ev.Dropped = append(ev.Dropped, b.head.seq)
			t.unpark(b.head)
		}
		t.gc(b)
	}
	return h, ev
}

// Import takes in leases from another Table (a handoff or a replication
// stream) at now, after performing Expire(now), whose Events it returns. It
// raises the fencing floor to h.NextFencing and above every imported token,
// so tokens keep strictly increasing per key across the ownership change.
// Each snapshot with Remaining > 0 becomes a lease expiring at now +
// Remaining; one whose ID is already held replaces it (imports are
// idempotent); one already run out only raises the floor. Imported leases
// count against their key's permits and are accepted even beyond
// Config.MaxLeases: dropping them would let the new owner over-grant.
//
// A malformed handoff (an ID that does not decode to its Limit, Key and
// Fencing, a negative TTL, a token or floor above MaxFencing) is
// ErrInvalid and nothing is imported.
func (t *Table) Import(now time.Time, h Handoff) (Events, error) {
	if h.NextFencing > MaxFencing {
		return Events{}, fmt.Errorf("%w: fencing floor %d above 2^63", ErrInvalid, h.NextFencing)
	}
	for i, s := range h.Leases {
		limit, key, fencing, ok := parseID(s.ID)
		switch {
		case !ok || limit != s.Limit || key != s.Key || fencing != s.Fencing:
			return Events{}, fmt.Errorf("%w: lease %d: id does not match its limit, key and fencing token", ErrInvalid, i)
		case s.Fencing >= MaxFencing:
			return Events{}, fmt.Errorf("%w: lease %d: fencing token %d above 2^63", ErrInvalid, i, s.Fencing)
		case s.TTL < 0:
			return Events{}, fmt.Errorf("%w: lease %d: negative ttl", ErrInvalid, i)
		}
	}
	var ev Events
	t.advance(now, &ev)
	t.nextFencing = max(t.nextFencing, h.NextFencing)
	for _, s := range h.Leases {
		t.nextFencing = max(t.nextFencing, s.Fencing+1)
		if s.Remaining <= 0 {
			continue
		}
		if l := t.leases[s.ID]; l != nil {
			l.holder, l.ttl = s.Holder, s.TTL
			l.at = t.now.Add(s.Remaining)
			t.timers.fix(l.idx)
			continue
		}
		b := t.buckets[bucketKey{s.Limit, s.Key}]
		if b == nil {
			b = t.newBucket(s.Limit, s.Key, Params{})
		}
		t.insert(&lease{
			timer:  timer{at: t.now.Add(s.Remaining), seq: s.Fencing},
			id:     s.ID,
			b:      b,
			holder: s.Holder,
			ttl:    s.TTL,
		})
	}
	return ev, nil
}

// NextFencing returns the fencing token the table will issue next. Every
// token issued so far is below it. A node persists or replicates it so that
// a successor can RaiseFencing past it.
func (t *Table) NextFencing() uint64 { return t.nextFencing }

// RaiseFencing makes the next fencing token at least next; it never lowers
// it. A node calls it when it learns another node's floor outside a Handoff
// (a replicated floor after the owner crashed). next above MaxFencing is
// ErrInvalid.
func (t *Table) RaiseFencing(next uint64) error {
	if next > MaxFencing {
		return fmt.Errorf("%w: fencing floor %d above 2^63", ErrInvalid, next)
	}
	t.nextFencing = max(t.nextFencing, next)
	return nil
}
