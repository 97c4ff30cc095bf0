// Package dedup remembers recent request ids and their answers for a short,
// bounded window, so that an owner answers a retried take with its first
// decision instead of spending twice.
//
// Cache is a pure core: time is an argument (BeginAt), it starts no
// goroutines and it is not safe for concurrent use; the node shards and
// locks it. Memory is bounded by Config.MaxEntries: when full, the oldest
// entry is evicted early (Evicted counts them), which shortens that id's
// window but never blocks a decision.
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

type queued struct {
	id  string
	at  time.Time
	gen uint64
}

// Cache maps recent ids to answers. The zero value is not usable: call New.
// Not safe for concurrent use.
type Cache[V any] struct {
	cfg     Config
	m       map[string]*entry[V]
	q       []queued // insertion order, which is expiry order
	head    int
	gen     uint64
	evicted uint64
}

// New returns an empty Cache. cfg must be valid (see Config.Validate).
func New[V any](cfg Config) *Cache[V] {
	return &Cache[V]{cfg: cfg, m: make(map[string]*entry[V])}
}

// BeginAt looks id up at now. A Done id returns its answer; a Pending one
// returns the zero V. An unknown id (or one older than the window) is
// recorded as pending and reported Fresh. Expired ids are dropped first, and
// the oldest are evicted while the cache is full.
func (c *Cache[V]) BeginAt(now time.Time, id string) (V, Status) {
	c.expire(now)
	if e, ok := c.m[id]; ok {
		if e.done {
			return e.v, Done
		}
		var zero V
		return zero, Pending
	}
	for len(c.m) >= c.cfg.MaxEntries && c.head < len(c.q) {
		c.pop(true)
	}
	c.gen++
	c.m[id] = &entry[V]{gen: c.gen}
	c.q = append(c.q, queued{id: id, at: now, gen: c.gen})
	var zero V
	return zero, Fresh
}

// Finish stores the answer of a pending id. An id no longer held (evicted,
// expired or aborted) is ignored.
func (c *Cache[V]) Finish(id string, v V) {
	if e, ok := c.m[id]; ok && !e.done {
		e.done, e.v = true, v
	}
}

// Abort forgets a pending id whose decision failed, so that a retry decides
// afresh. A finished id is kept.
func (c *Cache[V]) Abort(id string) {
	if e, ok := c.m[id]; ok && !e.done {
		delete(c.m, id)
	}
}

// Len returns the number of ids held.
func (c *Cache[V]) Len() int { return len(c.m) }

// ExpireAt drops the ids first seen at least Window before now, as BeginAt
// does on its way in. A cache that sees no new id for a while (its callers
// went quiet, or moved to takes without a request id) otherwise holds its
// last burst's answers until the next id arrives, and the garbage
// collector marks them on every cycle. When nothing is left, the table is
// replaced by an empty one too, since a Go map never gives back the room
// it grew to. Time going backwards expires nothing.
func (c *Cache[V]) ExpireAt(now time.Time) {
	c.expire(now)
	if len(c.m) == 0 && c.head > 0 {
		c.m = make(map[string]*entry[V])
		c.q, c.head = nil, 0
	}
}

// Evicted returns how many ids were dropped before their window ended
// because the cache was full.
func (c *Cache[V]) Evicted() uint64 { return c.evicted }

// expire drops the ids first seen at least Window before now. Time going
// backwards expires nothing.
func (c *Cache[V]) expire(now time.Time) {
	for c.head < len(c.q) && now.Sub(c.q[c.head].at) >= c.cfg.Window {
		c.pop(false)
	}
}

// pop removes the oldest queued id; early marks an eviction.
func (c *Cache[V]) pop(early bool) {
	q := c.q[c.head]
	c.q[c.head] = queued{}
	c.head++
	if e, ok := c.m[q.id]; ok && e.gen == q.gen {
		delete(c.m, q.id)
		if early {
			c.evicted++
		}
	}
	if c.head > 64 && c.head*2 >= len(c.q) {
		c.q = append(c.q[:0], c.q[c.head:]...)
		c.head = 0
	}
}
