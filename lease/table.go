package lease

import (
	cryptorand "crypto/rand"
	"fmt"
	"io"
	"strings"
	"time"
)

// lease is one held permit.
type lease struct {
	timer         // at is the expiry; seq is the fencing token
	id     string // the encoded lease id, key of Table.leases
	b      *bucket
	holder string
	ttl    time.Duration
	bi     int // position in b.leases
}

func (l *lease) grant() Grant {
	return Grant{
		ID: l.id, Limit: l.b.limit, Key: l.b.key, Holder: l.holder,
		Fencing: l.seq, Expires: l.at, TTL: l.ttl,
	}
}

// waiter is one parked Acquire, linked into its bucket's FIFO queue.
type waiter struct {
	timer      // at is the deadline; seq is the ticket
	b          *bucket
	holder     string
	ttl        time.Duration // already resolved by Params.TTL
	prev, next *waiter
}

// bucket is the state of one (limit, key): its leases, its queue and the
// latest Params seen for it. A bucket with no lease and no waiter is
// deleted; nothing about a key outlives its last lease, because fencing
// tokens come from the table-wide counter.
type bucket struct {
	limit, key string
	p          Params // zero for a bucket created by Import until a step passes Params
	leases     []*lease
	head, tail *waiter
	queued     int
}

type bucketKey struct{ limit, key string }

// Table holds every lease and every parked waiter of one node, for many
// (limit, key). It is a pure state machine: time is an argument of each
// step, it starts no goroutine and arms no timer; the node calls Expire at
// the instant Next reports, and acts on the Events each step returns.
//
// Fencing tokens come from one counter for the whole table, so they strictly
// increase per (limit, key) — and across all keys — for as long as the table
// lives, with no per-key state kept after a key's last lease ends.
//
// Time never runs backwards inside a Table: a step whose now is before the
// latest now seen is performed at the latest now.
//
// A Table is not safe for concurrent use; the node serialises access (one
// mutex per Table, or one Table per shard). Create one with NewTable; the
// zero Table is not usable.
type Table struct {
	cfg         Config
	now         time.Time // the latest now seen; never decreases
	nextFencing uint64    // the next fencing token to issue
	nextTicket  uint64    // the last waiter ticket issued
	buckets     map[bucketKey]*bucket
	leases      map[string]*lease
	waiters     map[uint64]*waiter
	timers      timerHeap
}

// NewTable returns an empty Table sized by c, or an error wrapping
// ErrInvalid when c does not validate.
func NewTable(c Config) (*Table, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Rand == nil {
		c.Rand = cryptorand.Reader // kept in cfg: nonce reads from it
	}
	return &Table{
		cfg:         c,
		nextFencing: c.FirstFencing,
		buckets:     make(map[bucketKey]*bucket),
		leases:      make(map[string]*lease),
		waiters:     make(map[uint64]*waiter),
	}, nil
}

// Acquire asks for one permit of (r.Limit, r.Key) under p at now. It first
// performs Expire(now) and returns those Events (also when it returns an
// error). Then, under p (which the key keeps for later steps), it first
// hands permits p allows to the key's waiters in FIFO order, then:
//
//   - fewer than p.Permits leases held: a lease is granted (Status Granted),
//     with a fencing token above every token issued before and an expiry
//     of now + p.TTL(r.TTL);
//   - otherwise, with p.Wait(r.Wait) > 0 and room in the key's queue: the
//     caller is parked (Status Queued) until a permit reaches it (an
//     Events.Granted with its ticket from a later step) or its deadline
//     passes (an Events.Dropped);
//   - otherwise it is refused (ReasonBusy, or ReasonQueueFull when the queue
//     is full) with a RetryAfter hint.
//
// The error is ErrInvalid for bad r or p, and ErrOverloaded when the table
// is at Config.MaxLeases (for a grant) or Config.MaxWaiters (for a park).
func (t *Table) Acquire(now time.Time, r Request, p Params) (Outcome, Events, error) {
	if err := p.Validate(); err != nil {
		return Outcome{}, Events{}, err
	}
	if err := r.validate(); err != nil {
		return Outcome{}, Events{}, err
	}
	var ev Events
	t.advance(now, &ev)
	b := t.buckets[bucketKey{r.Limit, r.Key}]
	if b != nil {
		b.p = p
		t.serve(b, &ev)
	}
	held := int64(0)
	if b != nil {
		held = int64(len(b.leases))
	}
	if held < p.Permits {
		if len(t.leases) >= t.cfg.MaxLeases {
			return Outcome{Held: held}, ev, fmt.Errorf("%w: %d leases held", ErrOverloaded, len(t.leases))
		}
		if b == nil {
			b = t.newBucket(r.Limit, r.Key, p)
		}
		l := t.issue(b, r.Holder, p.TTL(r.TTL))
		return Outcome{Status: Granted, Grant: l.grant(), Held: held + 1}, ev, nil
	}
	refused := Outcome{Status: Refused, Reason: ReasonBusy, RetryAfter: t.retryAfter(b), Held: held}
	wait := p.Wait(r.Wait)
	if wait <= 0 {
		return refused, ev, nil
	}
	if b.queued >= p.QueueLength {
		refused.Reason = ReasonQueueFull
		return refused, ev, nil
	}
	if len(t.waiters) >= t.cfg.MaxWaiters {
		return Outcome{Held: held}, ev, fmt.Errorf("%w: %d waiters parked", ErrOverloaded, len(t.waiters))
	}
	w := t.park(b, r.Holder, p.TTL(r.TTL), t.now.Add(wait))
	return Outcome{Status: Queued, Waiter: w.seq, Deadline: w.at, Held: held}, ev, nil
}

// Renew extends lease id to now + p.TTL(ttl), keeping its fencing token, and
// returns it. p must be the Params of the lease's limit (ParseID names it).
// It first performs Expire(now) and returns those Events, also on error. A
// lease that expired (Expires <= now), was released or exported, or never
// existed is ErrNotFound: renewal cannot resurrect a lease whose permit may
// already be someone else's. A negative ttl or invalid p is ErrInvalid.
func (t *Table) Renew(now time.Time, id string, ttl time.Duration, p Params) (Grant, Events, error) {
	if err := p.Validate(); err != nil {
		return Grant{}, Events{}, err
	}
	if ttl < 0 {
		return Grant{}, Events{}, fmt.Errorf("%w: negative ttl %v", ErrInvalid, ttl)
	}
	var ev Events
	t.advance(now, &ev)
	l := t.leases[id]
	if l == nil {
		return Grant{}, ev, ErrNotFound
	}
	l.ttl = p.TTL(ttl)
	l.at = t.now.Add(l.ttl)
	t.timers.fix(l.idx)
	l.b.p = p
	t.serve(l.b, &ev)
	return l.grant(), ev, nil
}

// Release gives lease id back at now and reports whether it was held. It
// first performs Expire(now). The freed permit goes at once to the key's
// first parked waiter (Events.Granted). Releasing an unknown, expired or
// already released lease changes nothing and reports false: releasing twice
// is harmless.
func (t *Table) Release(now time.Time, id string) (bool, Events) {
	var ev Events
	t.advance(now, &ev)
	l := t.leases[id]
	if l == nil {
		return false, ev
	}
	b := l.b
	t.drop(l)
	t.serve(b, &ev)
	t.gc(b)
	return true, ev
}

// Expire advances the table to now and returns what happened on the way,
// replayed in time order: leases whose Expires <= now expire, each freed
// permit goes to the first waiter of its key still parked at that instant,
// and waiters whose deadline <= now are dropped. A lease granted to a waiter
// here lives from now (not from the instant its permit freed), so a late
// call never shortens the lease the holder is told about.
func (t *Table) Expire(now time.Time) Events {
	var ev Events
	t.advance(now, &ev)
	return ev
}

// Cancel removes a parked waiter whose caller gave up (its context ended)
// and reports whether it was still parked. False means the ticket is
// unknown or was already granted or dropped; if it was granted, the node
// must Release the lease it delivered for that ticket, or the permit stays
// held until it expires.
func (t *Table) Cancel(ticket uint64) bool {
	w := t.waiters[ticket]
	if w == nil {
		return false
	}
	b := w.b
	t.unpark(w)
	t.gc(b)
	return true
}

// Next returns the earliest instant at which Expire has work (a lease
// expiry or a waiter deadline), for the node's timer; ok is false when the
// table holds nothing that expires.
func (t *Table) Next() (at time.Time, ok bool) {
	if len(t.timers) == 0 {
		return time.Time{}, false
	}
	return t.timers[0].at, true
}

// Held returns the number of leases of (limit, key) as of the last step.
// It may exceed the key's Permits after Permits shrank or an Import.
func (t *Table) Held(limit, key string) int64 {
	if b := t.buckets[bucketKey{limit, key}]; b != nil {
		return int64(len(b.leases))
	}
	return 0
}

// Holds reports whether lease id is in the table as of the last step (it
// may have expired since; Renew tells).
func (t *Table) Holds(id string) bool {
	_, ok := t.leases[id]
	return ok
}

// Queued returns the number of waiters parked for (limit, key).
func (t *Table) Queued(limit, key string) int {
	if b := t.buckets[bucketKey{limit, key}]; b != nil {
		return b.queued
	}
	return 0
}

// Len returns the number of leases in the table as of the last step.
func (t *Table) Len() int { return len(t.leases) }

// Waiting returns the number of parked waiters in the table.
func (t *Table) Waiting() int { return len(t.waiters) }

// Keys returns the number of (limit, key) with a lease or a waiter.
func (t *Table) Keys() int { return len(t.buckets) }

// advance moves the table's clock to now (never backwards) and replays every
// timer due by then in time order.
func (t *Table) advance(now time.Time, ev *Events) {
	if now.After(t.now) {
		t.now = now
	}
	for len(t.timers) > 0 && !t.timers[0].at.After(t.now) {
		top := t.timers[0]
		if w := top.w; w != nil {
			b := w.b
			t.unpark(w)
			ev.Dropped = append(ev.Dropped, w.seq)
			t.gc(b)
			continue
		}
		l := top.l
		b := l.b
		t.drop(l)
		ev.Expired = append(ev.Expired, l.grant())
		t.serve(b, ev)
		t.gc(b)
	}
}

// serve hands free permits of b to its waiters in FIFO order. Waiters are
// served regardless of Config.MaxLeases: they were admitted to the queue
// already, and MaxWaiters bounds them.
func (t *Table) serve(b *bucket, ev *Events) {
	for b.head != nil && int64(len(b.leases)) < b.p.Permits {
		w := b.head
		t.unpark(w)
		g := t.issue(b, w.holder, w.ttl).grant()
		g.Waiter = w.seq
		ev.Granted = append(ev.Granted, g)
	}
}

// issue creates a lease of b living from the table's now for ttl.
func (t *Table) issue(b *bucket, holder string, ttl time.Duration) *lease {
	fencing := t.nextFencing
	t.nextFencing++
	l := &lease{
		timer:  timer{at: t.now.Add(ttl), seq: fencing},
		id:     makeID(b.limit, b.key, fencing, t.nonce()),
		b:      b,
		holder: holder,
		ttl:    ttl,
	}
	t.insert(l)
	return l
}

// nonce returns NonceBytes from the table's random source.
func (t *Table) nonce() []byte {
	var n [NonceBytes]byte
	if _, err := io.ReadFull(t.cfg.Rand, n[:]); err != nil {
		panic("lease: Config.Rand failed: " + err.Error())
	}
	return n[:]
}

// insert links l into its bucket, the id index and the timer heap.
func (t *Table) insert(l *lease) {
	l.l = l
	l.bi = len(l.b.leases)
	l.b.leases = append(l.b.leases, l)
	t.leases[l.id] = l
	t.timers.push(&l.timer)
}

// drop unlinks l from its bucket, the id index and the timer heap.
func (t *Table) drop(l *lease) {
	b := l.b
	last := len(b.leases) - 1
	if l.bi != last {
		b.leases[l.bi] = b.leases[last]
		b.leases[l.bi].bi = l.bi
	}
	b.leases[last] = nil
	b.leases = b.leases[:last]
	delete(t.leases, l.id)
	t.timers.remove(&l.timer)
}

// park appends a waiter to b's queue.
func (t *Table) park(b *bucket, holder string, ttl time.Duration, deadline time.Time) *waiter {
	t.nextTicket++
	w := &waiter{timer: timer{at: deadline, seq: t.nextTicket}, b: b, holder: holder, ttl: ttl}
	w.w = w
	if b.tail == nil {
		b.head = w
	} else {
		b.tail.next = w
		w.prev = b.tail
	}
	b.tail = w
	b.queued++
	t.waiters[w.seq] = w
	t.timers.push(&w.timer)
	return w
}

// unpark removes w from its queue, the ticket index and the timer heap.
func (t *Table) unpark(w *waiter) {
	b := w.b
	if w.prev == nil {
		b.head = w.next
	} else {
		w.prev.next = w.next
	}
	if w.next == nil {
		b.tail = w.prev
	} else {
		w.next.prev = w.prev
	}
	w.prev, w.next = nil, nil
	b.queued--
	delete(t.waiters, w.seq)
	t.timers.remove(&w.timer)
}

// newBucket creates and indexes the bucket of (limit, key). The names are
// cloned so that a bucket never pins a caller's request buffer.
func (t *Table) newBucket(limit, key string, p Params) *bucket {
	b := &bucket{limit: strings.Clone(limit), key: strings.Clone(key), p: p}
	t.buckets[bucketKey{b.limit, b.key}] = b
	return b
}

// gc deletes b once it holds no lease and no waiter.
func (t *Table) gc(b *bucket) {
	if len(b.leases) == 0 && b.head == nil {
		delete(t.buckets, bucketKey{b.limit, b.key})
	}
}

// retryAfter is the time until b's earliest lease expiry: no permit frees by
// expiry sooner. Linear in the key's leases, and only on the refusal path.
func (t *Table) retryAfter(b *bucket) time.Duration {
	var first time.Time
	for i, l := range b.leases {
		if i == 0 || l.at.Before(first) {
			first = l.at
		}
	}
	return first.Sub(t.now)
}
