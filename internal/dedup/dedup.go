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
// nothing once the ring holds the window.
//
// The ring is held in chunks, allocated as its tail first reaches them and
// let go (one kept spare) once its head has left them, so it holds memory
// for the ids of about one window, and a slot never moves: growing costs
// only the memory it adds. (A ring that doubled by copying spent about a
// third of this cache's time in a short load test in that copy, the first
// touch of the new pages, while holding its caller's lock.)
type Cache[K comparable, V any] struct {
	cfg  Config
	seed maphash.Seed
	// The ring: n slots from position head, wrapping at maxRing, position
	// p in chunks[p/chunkLen].
	chunks  []*[chunkLen]slot[K, V] // nil until the ring reaches them
	spare   *[chunkLen]slot[K, V]   // an emptied chunk, reused before allocating one
	head, n int
	maxRing int // twice MaxEntries rounded up to a power of two: room for as many dead slots as live ones
	live    int // ids held
	// idx has at least twice as many entries as ids held, so it is at most
	// half full. An entry is 0 (empty) or the top 32 bits of an id's hash
	// (which also give its home position) above the id's ring position
	// plus one.
	idx     []uint64
	evicted uint64
}

// chunkLen is the slots of a chunk of the ring, chunkShift its log2.
const (
	chunkShift = 10
	chunkLen   = 1 << chunkShift
)

// New returns an empty Cache. cfg must be valid (see Config.Validate).
func New[K comparable, V any](cfg Config) *Cache[K, V] {
	r := 16
	for r < 2*cfg.MaxEntries {
		r *= 2
	}
	return &Cache[K, V]{cfg: cfg, seed: maphash.MakeSeed(), maxRing: r}
}

// at returns the slot at ring position p, whose chunk is allocated.
func (c *Cache[K, V]) at(p int) *slot[K, V] {
	return &c.chunks[uint(p)>>chunkShift][uint(p)&(chunkLen-1)]
}

// chunkSlots is the ring positions a chunk holds: chunkLen, or all of
// them in a ring smaller than that.
func (c *Cache[K, V]) chunkSlots() int { return min(chunkLen, c.maxRing) }

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
	case !c.at(p).done:
		return zero, Pending
	}
	return c.at(p).v, Done
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
	*c.at(p) = slot[K, V]{id: id, at: now.UnixNano(), h: h, live: true, done: done, v: v}
	if 2*(c.live+1) > len(c.idx) {
		c.growIndex()
	}
	c.index(h, p)
	c.live++
}

// Finish stores the answer of a pending id. An id no longer held (evicted,
// expired or aborted) is ignored.
func (c *Cache[K, V]) Finish(id K, v V) {
	if p := c.find(id, c.hash(id)); p >= 0 {
		if s := c.at(p); !s.done {
			s.done, s.v = true, v
		}
	}
}

// Abort forgets a pending id whose decision failed, so that a retry decides
// afresh. A finished id is kept.
func (c *Cache[K, V]) Abort(id K) {
	if p := c.find(id, c.hash(id)); p >= 0 && !c.at(p).done {
		c.drop(p)
	}
}

// Len returns the number of ids held.
func (c *Cache[K, V]) Len() int { return c.live }

// ExpireAt drops the ids first seen at least Window before now, as BeginAt
// does on its way in. A cache that sees no new id for a while (its callers
// went quiet, or moved to takes without a request id) otherwise holds its
// last burst's answers until the next id arrives, and the garbage
// collector marks them on every cycle. When nothing is left, the ring's
// chunks and the index are given back too. Time going backwards expires
// nothing.
func (c *Cache[K, V]) ExpireAt(now time.Time) {
	c.expire(now)
	if c.live == 0 && c.n == 0 && c.chunks != nil {
		c.chunks, c.spare, c.idx, c.head = nil, nil, nil, 0
	}
}

// Evicted returns how many ids were dropped before their window ended
// because the cache was full.
func (c *Cache[K, V]) Evicted() uint64 { return c.evicted }

// expire drops the ids first seen at least Window before now. Time going
// backwards expires nothing.
func (c *Cache[K, V]) expire(now time.Time) {
	cut := now.UnixNano() - int64(c.cfg.Window)
	for c.n > 0 && c.at(c.head).at <= cut {
		c.pop(false)
	}
}

// push makes room for one more slot at the ring's tail and returns its
// position, allocating its chunk when the ring first reaches it. A ring
// at maxRing drops its oldest slot first.
func (c *Cache[K, V]) push() int {
	if c.n == c.maxRing {
		c.pop(true)
	}
	p := (c.head + c.n) & (c.maxRing - 1)
	if c.chunks == nil {
		c.chunks = make([]*[chunkLen]slot[K, V], (c.maxRing+chunkLen-1)/chunkLen)
	}
	if k := p / chunkLen; c.chunks[k] == nil {
		c.chunks[k], c.spare = c.spare, nil
		if c.chunks[k] == nil {
			c.chunks[k] = new([chunkLen]slot[K, V])
		}
	}
	c.n++
	return p
}

// growIndex doubles the index (to at least 32 entries). An entry's home
// is in the entry itself, so the slots are not read.
func (c *Cache[K, V]) growIndex() {
	old := c.idx
	c.idx = make([]uint64, max(32, 2*len(old)))
	for _, e := range old {
		if e != 0 {
			c.place(e)
		}
	}
}

// pop removes the oldest slot; early marks an eviction of a held id. A
// chunk the head leaves is let go, kept as the spare if there is none,
// unless the ring still has slots in it (it wraps all the way round).
func (c *Cache[K, V]) pop(early bool) {
	s := c.at(c.head)
	if s.live {
		c.drop(c.head)
		if early {
			c.evicted++
		}
	}
	*s = slot[K, V]{} // let go of what V points to; a spare chunk is all zero
	k := c.head / chunkLen
	c.head = (c.head + 1) & (c.maxRing - 1)
	c.n--
	if cs := c.chunkSlots(); c.head&(cs-1) == 0 && c.n <= c.maxRing-cs {
		if c.spare == nil {
			c.spare = c.chunks[k]
		}
		c.chunks[k] = nil
	}
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
			if p := int(uint32(e)) - 1; c.at(p).id == id {
				return p
			}
		}
	}
}

// index adds the id at ring position p, with hash h, to the index.
func (c *Cache[K, V]) index(h uint64, p int) { c.place(h>>32<<32 | uint64(p+1)) }

// place puts index entry e in the first empty place from its home.
func (c *Cache[K, V]) place(e uint64) {
	mask := len(c.idx) - 1
	i := c.home(e >> 32)
	for c.idx[i] != 0 {
		i = (i + 1) & mask
	}
	c.idx[i] = e
}

// drop forgets the held id at ring position p: its slot goes dead and its
// index entry is removed, shifting later entries of its probe run back so
// that no lookup ever needs a tombstone.
func (c *Cache[K, V]) drop(p int) {
	c.at(p).live = false
	c.live--
	mask := len(c.idx) - 1
	want := uint64(p + 1)
	i := c.home(c.at(p).h >> 32)
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
