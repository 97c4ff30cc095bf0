package cluster

import (
	"time"

	"github.com/weir-rl/weir/lease"
	"github.com/weir-rl/weir/node/placement"
	"github.com/weir-rl/weir/transport"
)

// The batches a flush or a sync fills, one per successor, and their reuse
// from one flush to the next (changeLog.spareBatches).

// replBatch is what one successor gets in one flush.
type replBatch struct {
	st      transport.State
	dropped []transport.Key
	buckets []keyID // to requeue on failure
	leases  []keyID
	oldest  time.Time
}

// reset empties b for another flush, keeping its slices' room unless
// one grew past most entries (a resync's batch holds every owned key; the
// collector takes it back instead). Entries are cleared, not just cut,
// so that an emptied batch holds on to no key.
func (b *replBatch) reset(most int) {
	b.st.Buckets = emptied(b.st.Buckets, most)
	b.st.Holdings = emptied(b.st.Holdings, most)
	b.st.Leases = lease.Handoff{Leases: emptied(b.st.Leases.Leases, most)}
	b.dropped = emptied(b.dropped, most)
	b.buckets = emptied(b.buckets, most)
	b.leases = emptied(b.leases, most)
	b.oldest = time.Time{}
}

// emptied returns s cleared and cut to length 0, or nil when its room is
// over most.
func emptied[T any](s []T, most int) []T {
	if cap(s) > most {
		return nil
	}
	clear(s)
	return s[:0]
}

// replBatches are one flush's batches by successor address, built from
// one placement snapshot at one now.
type replBatches struct {
	snap   *placement.Snapshot
	now    time.Time
	byAddr map[string]*replBatch
	spare  []*replBatch // emptied batches to fill before making new ones
}

// batches starts a flush's batches on the log's spare ones. The caller
// holds r.sending and hands them back with keep once sent.
func (r *changeLog) batches(snap *placement.Snapshot, now time.Time) *replBatches {
	spare := r.spareBatches
	r.spareBatches = nil
	return &replBatches{snap: snap, now: now, byAddr: map[string]*replBatch{}, spare: spare}
}

// keep empties the batches of bs, sent or given up, for the next flush.
// The caller holds r.sending.
func (r *changeLog) keep(bs *replBatches) {
	most := 4 * r.cfg.MaxBatch
	spare := bs.spare
	for _, b := range bs.byAddr {
		b.reset(most)
		spare = append(spare, b)
	}
	r.spareBatches = spare
}

// of returns the batch of the successor of (limit, key), or nil when this
// node does not own the key (any more) or it has no live successor.
func (bs *replBatches) of(limit, key string) *replBatch {
	p, ok := bs.snap.Successor(limit, key)
	if !ok {
		return nil
	}
	return bs.to(p.Addr)
}

// to returns the batch of the successor at addr, started if need be.
func (bs *replBatches) to(addr string) *replBatch {
	b := bs.byAddr[addr]
	if b == nil {
		if n := len(bs.spare); n > 0 {
			b, bs.spare = bs.spare[n-1], bs.spare[:n-1]
		} else {
			b = &replBatch{}
		}
		b.oldest = bs.now
		bs.byAddr[addr] = b
	}
	return b
}
