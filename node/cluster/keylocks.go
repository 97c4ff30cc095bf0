package cluster

import (
	"slices"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/weir-rl/weir/allot"
	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/bucket"
)

// keyLocks are striped locks over (limit, key): a decision holds its keys'
// stripes for reading from its ownership check to its debit, and a handover
// holds the stripe for writing while it marks the key moved and extracts
// its bucket. So a take under way either lands in the extracted state or
// sees the mark and goes to the new owner; it never debits a fresh bucket
// left behind.
type keyLocks struct {
	rw [64]sync.RWMutex
	// runlocks are rw's RUnlock method values, made once by initUnlocks,
	// so a one-check Hold returns its release without allocating.
	runlocks [64]func()
}

// initUnlocks makes the RUnlock method values of l's stripes.
func (l *keyLocks) initUnlocks() {
	for i := range l.rw {
		l.runlocks[i] = l.rw[i].RUnlock
	}
}

func stripe(limit, key string) int {
	return int(xxhash.Sum64String(limit+"\x00"+key) % 64)
}

// Hold implements engine.Router. A take of one check, the common case,
// allocates nothing; more checks lock their stripes in order.
func (c *Cluster) Hold(checks []api.Check) (func(), bool) {
	if len(checks) == 1 {
		ch := checks[0]
		i := stripe(ch.Limit, ch.Key)
		c.locks.rw[i].RLock()
		_, moved := c.movedTo(ch.Limit, ch.Key)
		return c.locks.runlocks[i], !moved
	}
	var idx [8]int
	stripes := idx[:0]
	for _, ch := range checks {
		stripes = append(stripes, stripe(ch.Limit, ch.Key))
	}
	slices.Sort(stripes)
	held := slices.Clone(slices.Compact(stripes)) // idx stays on the stack
	for _, i := range held {
		c.locks.rw[i].RLock()
	}
	release := func() {
		for _, i := range held {
			c.locks.rw[i].RUnlock()
		}
	}
	for _, ch := range checks {
		if _, moved := c.movedTo(ch.Limit, ch.Key); moved {
			return release, false
		}
	}
	return release, true
}

// handOver marks (limit, key) moved to member to and removes its bucket
// and the allotments granted of it, returning them, with no decision on
// the key in between: the bucket and the holdings that cap it leave
// together. When this node holds neither because it handed them to the
// same member already (under a mark that still holds), it returns that
// earlier state again (markMoved).
func (c *Cluster) handOver(now time.Time, limit, key, to string) (bucket.Entry, bool, []allot.Entry) {
	l := &c.locks.rw[stripe(limit, key)]
	l.Lock()
	defer l.Unlock()
	e, ok := c.run.Holdings.ExtractBucket(now, limit, key)
	hs := c.run.Holdings.ExtractHoldings(now, limit, key)
	gave := c.markMoved(limit, key, to, handed{bucket: e, ok: ok, holdings: hs})
	return gave.bucket, gave.ok, gave.holdings
}
