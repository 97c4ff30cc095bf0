// Package dedup remembers recent request ids and their answers for a short,
// bounded window, so that an owner answers a retried take with its first
// decision instead of spending twice.
//
// Cache is a pure core: time is an argument (BeginAt), it starts no
// goroutines and it is not safe for concurrent use; the node shards and
// locks it. Memory is bounded by Config.MaxEntries: when full, the oldest
// entry is evicted early (Evicted counts them), which shortens that id's
// window but never blocks a decision.
//
// Entries are held by value, and the cache adds no pointer of its own:
// with an id type and an answer type free of pointers, its tables are
// memory the garbage collector never scans, however many ids it holds.
package dedup

import (
	"errors"
	"hash/maphash"
	"time"
)

// Config bounds a Cache.
type Config struct {
	// Window is how long an id is remembered after it was first seen.
	// Default 10 s; at least 1 ms. A client's retries must fall within it
	// (the Go client's retries end well before).
	Window time.Duration
	// MaxEntries bounds the ids held at once. Default 65,536; from 1 to
	// MaxMaxEntries.
	MaxEntries int
}

// MaxMaxEntries is the largest MaxEntries: the index keeps a ring
// position (up to twice MaxEntries) in 32 bits.
const MaxMaxEntries = 1 << 30

// DefaultConfig returns a 10 s window over at most 65,536 ids.
func DefaultConfig() Config { return Config{Window: 10 * time.Second, MaxEntries: 1 << 16} }

// Validate reports a field out of range. It changes nothing.
func (c Config) Validate() error {
	switch {
	case c.Window < time.Millisecond:
		return errors.New("dedup: Window must be at least 1ms")
	case c.MaxEntries < 1 || c.MaxEntries > MaxMaxEntries:
		return errors.New("dedup: MaxEntries must be from 1 to 2^30")
	}
	return nil
}

// Status is what BeginAt found.
type Status uint8

const (
	// Fresh means the id was not known; it is now recorded as pending and the
	// caller must decide, then call Finish (or Abort).
	Fresh Status = iota
	// Pending means a decision for the id is in progress.
	Pending
	// Done means the id was decided; BeginAt returned its answer.
	Done
)

// String returns "fresh", "pending" or "done".
func (s Status) String() string {
	switch s {
	case Pending:
		return "pending"
	case Done:
		return "done"
	}
	return "fresh"
}

// slot is one id in the ring: its answer, and whether it is still held
// (live). An id aborted, recorded again by Put, or dropped leaves a dead
// slot that pop skips.
type slot[K comparable, V any] struct {
	id   K
	at   int64  // first seen, Unix nanoseconds: a time.Time would add a pointer
	h    uint64 // hash of id
	live bool   // held: the index points here
	done bool
	v    V
}

// Cache maps recent ids of type K to answers of type V. The zero value is
// not usable: call New. Not safe for concurrent use.
//
// Ids live in a ring in insertion order, which is expiry order, and an
// open-addressing index (linear probing, backward-shift deletion) finds
// them. Unlike a Go map, which leaves a tombstone per delete and
// reallocates its tables to clear them, the index does not change size
// while ids arrive and expire at a steady rate: a stream of ids allocates
// nothing once the ring has grown.
type Cache[K comparable, V any] struct {
	cfg  Config
	seed maphash.Seed
	// q is the ring: n slots from q[head], wrapping. It grows by doubling
	// to maxRing and is reused after.
	q       []slot[K, V]
	head, n int
	maxRing int // twice MaxEntries rounded up to a power of two: room for as many dead slots as live ones
	live    int // ids held
	// idx has twice as many entries as q, so it is at most half full. An
	// entry is 0 (empty) or the top 32 bits of an id's hash (which also
	// give its home position) above the id's ring position plus one.
	idx     []uint64
	evicted uint64
}

// New returns an empty Cache. cfg must be valid (see Config.Validate).
func New[K comparable, V any](cfg Config) *Cache[K, V] {
	r := 16
	for r < 2*cfg.MaxEntries {
		r *= 2
	}
	return &Cache[K, V]{cfg: cfg, seed: maphash.MakeSeed(), maxRing: r}
}

// BeginAt looks id up at now. A Done id returns its answer; a Pending one
// returns the zero V. An unknown id (or one older than the window) is
// recorded as pending and reported Fresh. Expired ids are dropped first, and
// the oldest are evicted while the cache is full.
func (c *Cache[K, V]) BeginAt(now time.Time, id K) (V, Status) {
	c.expire(now)
	h := c.hash(id)
	v, st := c.status(c.find(id, h))
	if st == Fresh {
		c.makeRoom()
		c.record(now, id, h, false, v)
	}
	return v, st
}

// Lookup is BeginAt that records nothing: an unknown id is reported Fresh
// and stays unknown.
func (c *Cache[K, V]) Lookup(now time.Time, id K) (V, Status) {
	c.expire(now)
	return c.status(c.find(id, c.hash(id)))
}

// status is what the slot at ring position p (-1: none) says.
func (c *Cache[K, V]) status(p int) (V, Status) {
	var zero V
	switch {
	case p < 0:
		return zero, Fresh
	case !c.q[p].done:
		return zero, Pending
	}
	return c.q[p].v, Done
}

// Put records id as decided at now with answer v, replacing whatever id
// held, for a caller that keeps some answers in a second cache beside the
// one whose BeginAt saw the id. Its window starts at now.
func (c *Cache[K, V]) Put(now time.Time, id K, v V) {
	c.expire(now)
	h := c.hash(id)
	if p := c.find(id, h); p >= 0 {
		c.drop(p) // its slot stays in the ring, dead
	} else {
		c.makeRoom()
	}
	c.record(now, id, h, true, v)
}

// makeRoom evicts the oldest ids while the cache is full.
func (c *Cache[K, V]) makeRoom() {
	for c.live >= c.cfg.MaxEntries && c.n > 0 {
		c.pop(true)
	}
}

// record holds id with its answer, first seen at now.
func (c *Cache[K, V]) record(now time.Time, id K, h uint64, done bool, v V) {
	p := c.push()
	c.q[p] = slot[K, V]{id: id, at: now.UnixNano(), h: h, live: true, done: done, v: v}
	c.index(h, p)
	c.live++
}

// Finish stores the answer of a pending id. An id no longer held (evicted,
// expired or aborted) is ignored.
func (c *Cache[K, V]) Finish(id K, v V) {
	if p := c.find(id, c.hash(id)); p >= 0 && !c.q[p].done {
		c.q[p].done, c.q[p].v = true, v
	}
}

// Abort forgets a pending id whose decision failed, so that a retry decides
// afresh. A finished id is kept.
func (c *Cache[K, V]) Abort(id K) {
	if p := c.find(id, c.hash(id)); p >= 0 && !c.q[p].done {
		c.drop(p)
	}
}

// Len returns the number of ids held.
func (c *Cache[K, V]) Len() int { return c.live }

// ExpireAt drops the ids first seen at least Window before now, as BeginAt
// does on its way in. A cache that sees no new id for a while (its callers
// went quiet, or moved to takes without a request id) otherwise holds its
// last burst's answers until the next id arrives, and the garbage
// collector marks them on every cycle. When nothing is left, the ring and
// index are given back too. Time going backwards expires nothing.
func (c *Cache[K, V]) ExpireAt(now time.Time) {
	c.expire(now)
	if c.live == 0 && c.n == 0 && c.q != nil {
		c.q, c.idx, c.head = nil, nil, 0
	}
}

// Evicted returns how many ids were dropped before their window ended
// because the cache was full.
func (c *Cache[K, V]) Evicted() uint64 { return c.evicted }

// expire drops the ids first seen at least Window before now. Time going
// backwards expires nothing.
func (c *Cache[K, V]) expire(now time.Time) {
	cut := now.UnixNano() - int64(c.cfg.Window)
	for c.n > 0 && c.q[c.head].at <= cut {
		c.pop(false)
	}
}

// push makes room for one more slot at the ring's tail and returns its
// position: it grows the ring or, when it is at maxRing, drops the oldest
// slot first.
func (c *Cache[K, V]) push() int {
	if c.n == len(c.q) {
		if len(c.q) < c.maxRing {
			c.grow()
		} else {
			c.pop(true)
		}
	}
	p := (c.head + c.n) & (len(c.q) - 1)
	c.n++
	return p
}

// grow doubles the ring, laying its slots out from position 0, and
// rebuilds the index for the new positions.
func (c *Cache[K, V]) grow() {
	next := make([]slot[K, V], max(16, 2*len(c.q)))
	for i := range c.n {
		next[i] = c.q[(c.head+i)&(len(c.q)-1)]
	}
	c.q, c.head = next, 0
	c.idx = make([]uint64, 2*len(next))
	for p := range c.n {
		if c.q[p].live {
			c.index(c.q[p].h, p)
		}
	}
}

// pop removes the oldest slot; early marks an eviction of a held id.
func (c *Cache[K, V]) pop(early bool) {
	if c.q[c.head].live {
		c.drop(c.head)
		if early {
			c.evicted++
		}
	}
	c.q[c.head] = slot[K, V]{} // let go of what V points to
	c.head = (c.head + 1) & (len(c.q) - 1)
	c.n--
}

func (c *Cache[K, V]) hash(id K) uint64 { return maphash.Comparable(c.seed, id) }

// home is where the index entry of a hash starts probing.
func (c *Cache[K, V]) home(tag uint64) int { return int(tag) & (len(c.idx) - 1) }

// find returns the ring position of the held id with hash h, or -1.
func (c *Cache[K, V]) find(id K, h uint64) int {
	if c.live == 0 {
		return -1
	}
	tag, mask := h>>32, len(c.idx)-1
	for i := c.home(tag); ; i = (i + 1) & mask {
		e := c.idx[i]
		if e == 0 {
			return -1
		}
		if e>>32 == tag {
			if p := int(uint32(e)) - 1; c.q[p].id == id {
				return p
			}
		}
	}
}

// index adds the id at ring position p, with hash h, to the index.
func (c *Cache[K, V]) index(h uint64, p int) {
	tag, mask := h>>32, len(c.idx)-1
	i := c.home(tag)
	for c.idx[i] != 0 {
		i = (i + 1) & mask
	}
	c.idx[i] = tag<<32 | uint64(p+1)
}

// drop forgets the held id at ring position p: its slot goes dead and its
// index entry is removed, shifting later entries of its probe run back so
// that no lookup ever needs a tombstone.
func (c *Cache[K, V]) drop(p int) {
	c.q[p].live = false
	c.live--
	mask := len(c.idx) - 1
	want := uint64(p + 1)
	i := c.home(c.q[p].h >> 32)
	for uint32(c.idx[i]) != uint32(want) {
		i = (i + 1) & mask
	}
	for j := i; ; {
		j = (j + 1) & mask
		e := c.idx[j]
		if e == 0 {
			break
		}
		// e may move back to i unless its home lies cyclically in (i, j].
		if h := c.home(e >> 32); (j-h)&mask >= (j-i)&mask {
			c.idx[i] = e
			i = j
		}
	}
	c.idx[i] = 0
}
