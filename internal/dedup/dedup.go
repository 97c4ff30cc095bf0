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
	"time"
)

// Config bounds a Cache.
type Config struct {
	// Window is how long an id is remembered after it was first seen.
	// Default 10 s; at least 1 ms. A client's retries must fall within it
	// (the Go client's retries end well before).
	Window time.Duration
	// MaxEntries bounds the ids held at once. Default 65,536; at least 1.
	MaxEntries int
}

// DefaultConfig returns a 10 s window over at most 65,536 ids.
func DefaultConfig() Config { return Config{Window: 10 * time.Second, MaxEntries: 1 << 16} }

// Validate reports a field out of range. It changes nothing.
func (c Config) Validate() error {
	switch {
	case c.Window < time.Millisecond:
		return errors.New("dedup: Window must be at least 1ms")
	case c.MaxEntries < 1:
		return errors.New("dedup: MaxEntries must be at least 1")
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

type entry[V any] struct {
	gen  uint64
	done bool
	v    V
}

type queued[K comparable] struct {
	id  K
	at  int64 // Unix nanoseconds: a time.Time would add a pointer
	gen uint64
}

// Cache maps recent ids of type K to answers of type V. The zero value is
// not usable: call New. Not safe for concurrent use.
type Cache[K comparable, V any] struct {
	cfg Config
	m   map[K]entry[V]
	// q is a ring of ids in insertion order, which is expiry order: n of
	// them from q[head], wrapping. It grows by doubling to maxRing and is
	// reused after, so a steady stream of ids allocates nothing. It may
	// also hold ids already gone from m (aborted, or recorded again by
	// Put), which pop skips.
	q       []queued[K]
	head, n int
	maxRing int // twice MaxEntries rounded up to a power of two: room for as many stale ids as live ones
	gen     uint64
	evicted uint64
}

// New returns an empty Cache. cfg must be valid (see Config.Validate).
func New[K comparable, V any](cfg Config) *Cache[K, V] {
	r := 16
	for r < 2*cfg.MaxEntries {
		r *= 2
	}
	return &Cache[K, V]{cfg: cfg, m: make(map[K]entry[V]), maxRing: r}
}

// BeginAt looks id up at now. A Done id returns its answer; a Pending one
// returns the zero V. An unknown id (or one older than the window) is
// recorded as pending and reported Fresh. Expired ids are dropped first, and
// the oldest are evicted while the cache is full.
func (c *Cache[K, V]) BeginAt(now time.Time, id K) (V, Status) {
	v, st := c.Lookup(now, id)
	if st == Fresh {
		c.makeRoom()
		c.record(now, id, entry[V]{})
	}
	return v, st
}

// Lookup is BeginAt that records nothing: an unknown id is reported Fresh
// and stays unknown.
func (c *Cache[K, V]) Lookup(now time.Time, id K) (V, Status) {
	c.expire(now)
	var zero V
	e, ok := c.m[id]
	switch {
	case !ok:
		return zero, Fresh
	case !e.done:
		return zero, Pending
	}
	return e.v, Done
}

// Put records id as decided at now with answer v, replacing whatever id
// held, for a caller that keeps some answers in a second cache beside the
// one whose BeginAt saw the id. Its window starts at now.
func (c *Cache[K, V]) Put(now time.Time, id K, v V) {
	c.expire(now)
	if _, ok := c.m[id]; !ok {
		c.makeRoom()
	}
	// An earlier record of id keeps its queue slot under the old
	// generation; pop skips it.
	c.record(now, id, entry[V]{done: true, v: v})
}

// makeRoom evicts the oldest ids while the cache is full.
func (c *Cache[K, V]) makeRoom() {
	for len(c.m) >= c.cfg.MaxEntries && c.n > 0 {
		c.pop(true)
	}
}

// record holds e for id under a new generation, first seen at now.
func (c *Cache[K, V]) record(now time.Time, id K, e entry[V]) {
	c.gen++
	e.gen = c.gen
	c.m[id] = e
	c.push(queued[K]{id: id, at: now.UnixNano(), gen: c.gen})
}

// Finish stores the answer of a pending id. An id no longer held (evicted,
// expired or aborted) is ignored.
func (c *Cache[K, V]) Finish(id K, v V) {
	if e, ok := c.m[id]; ok && !e.done {
		e.done, e.v = true, v
		c.m[id] = e
	}
}

// Abort forgets a pending id whose decision failed, so that a retry decides
// afresh. A finished id is kept.
func (c *Cache[K, V]) Abort(id K) {
	if e, ok := c.m[id]; ok && !e.done {
		delete(c.m, id)
	}
}

// Len returns the number of ids held.
func (c *Cache[K, V]) Len() int { return len(c.m) }

// ExpireAt drops the ids first seen at least Window before now, as BeginAt
// does on its way in. A cache that sees no new id for a while (its callers
// went quiet, or moved to takes without a request id) otherwise holds its
// last burst's answers until the next id arrives, and the garbage
// collector marks them on every cycle. When nothing is left, the table is
// replaced by an empty one too, since a Go map never gives back the room
// it grew to. Time going backwards expires nothing.
func (c *Cache[K, V]) ExpireAt(now time.Time) {
	c.expire(now)
	if len(c.m) == 0 && c.n == 0 && c.q != nil {
		c.m = make(map[K]entry[V])
		c.q, c.head = nil, 0
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

// push appends q to the ring, growing it, or, when it is at maxRing,
// dropping the oldest id first.
func (c *Cache[K, V]) push(q queued[K]) {
	if c.n == len(c.q) {
		if len(c.q) < c.maxRing {
			next := make([]queued[K], max(16, 2*len(c.q)))
			for i := range c.n {
				next[i] = c.q[(c.head+i)&(len(c.q)-1)]
			}
			c.q, c.head = next, 0
		} else {
			c.pop(true)
		}
	}
	c.q[(c.head+c.n)&(len(c.q)-1)] = q
	c.n++
}

// pop removes the oldest queued id; early marks an eviction.
func (c *Cache[K, V]) pop(early bool) {
	q := c.q[c.head]
	c.q[c.head] = queued[K]{}
	c.head = (c.head + 1) & (len(c.q) - 1)
	c.n--
	if e, ok := c.m[q.id]; ok && e.gen == q.gen {
		delete(c.m, q.id)
		if early {
			c.evicted++
		}
	}
}
