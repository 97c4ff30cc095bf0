package allot

import (
	"cmp"
	"errors"
	"slices"
	"time"
)

// Key names one bucket: (limit, key).
type Key struct {
	Limit, Key string
}

// Holding is one holder's allotment of one bucket as its owner records it.
type Holding struct {
	// Holder names the holder: a node's name, or a client's id.
	Holder string
	// Tokens are outstanding: granted and not yet known to be spent or
	// returned. The owner's bucket is capped at its capacity minus the
	// sum of its holdings' tokens, so tokens a holder still has cannot be
	// refilled behind its back.
	Tokens int64
	// Expires is when the holding ends on the owner's clock. The holder
	// stops using its tokens earlier (its own deadline runs from when it
	// asked), so what it has not returned by then is lost, the safe side.
	Expires time.Time
	// Demand is the rate the holder last reported, in tokens per second:
	// the weight of its share.
	Demand float64
	// Seq names the version of the holding the holder was last sent; the
	// owner trusts what a holder reports only under the same Seq.
	Seq uint64
}

// ErrFull is a new holding refused because the ledger holds its maximum.
var ErrFull = errors.New("allot: ledger full")

// Ledger is an owner's record of the allotments it granted: per bucket, the
// holdings of its holders, and the owner's own demand for the bucket (the
// takes it decided itself while the bucket had holdings), which weighs
// against the holders' in Share. It is a pure core: time is an argument,
// nothing runs by itself, and it is not safe for concurrent use (the
// engine serializes it per key).
//
// The caller keeps one rule: the owner's bucket is materialized (settled
// under the capacity in force) at every instant the bucket's outstanding
// tokens change: before Put, before Drop, and at the Expires of every
// holding that ends (Expired lists them in order). So a capacity never
// rises over time that passed while it was lower, and the tokens the
// owner and every holder admit over any window never exceed what the
// bucket alone would allow (docs/architecture.md §13).
type Ledger struct {
	max   int
	n     int   // holdings held
	total int64 // their tokens
	books map[Key]*book
}

// book is one bucket's holdings, the claims of holders waiting for tokens,
// and the owner's own demand for it.
type book struct {
	holdings []Holding // by Holder; few
	claims   []claim   // few
	owner    Meter
}

// claim is tokens reserved for a holder that asked while the bucket had
// none to spare for it: the owner's own takes leave them in the bucket
// until the holder comes back for them or the claim expires.
type claim struct {
	holder  string
	tokens  int64
	expires time.Time
}

// NewLedger returns an empty ledger that holds at most limit holdings
// (at least 1).
func NewLedger(limit int) *Ledger {
	return &Ledger{max: max(limit, 1), books: map[Key]*book{}}
}

// Len is the number of holdings and claims held (the ledger's limit
// counts both).
func (l *Ledger) Len() int { return l.n }

// Total is the sum of every holding's tokens.
func (l *Ledger) Total() int64 { return l.total }

// Holds reports whether bucket k has holdings, the cheap test before the
// rest.
func (l *Ledger) Holds(k Key) bool {
	_, ok := l.books[k]
	return ok
}

// Outstanding is the sum of k's holdings' tokens: what the bucket's
// capacity is reduced by. Expired holdings count until the caller drops
// them (Expired).
func (l *Ledger) Outstanding(k Key) int64 {
	b := l.books[k]
	if b == nil {
		return 0
	}
	var n int64
	for _, h := range b.holdings {
		n += h.Tokens
	}
	return n
}

// Get returns holder's holding of k.
func (l *Ledger) Get(k Key, holder string) (Holding, bool) {
	if b := l.books[k]; b != nil {
		if i := b.find(holder); i >= 0 {
			return b.holdings[i], true
		}
	}
	return Holding{}, false
}

// Holdings returns k's holdings, in holder order, in a new slice.
func (l *Ledger) Holdings(k Key) []Holding {
	if b := l.books[k]; b != nil {
		return slices.Clone(b.holdings)
	}
	return nil
}

// Keys returns the buckets that have holdings, in no order.
func (l *Ledger) Keys() []Key {
	out := make([]Key, 0, len(l.books))
	for k := range l.books {
		out = append(out, k)
	}
	return out
}

// Put records h as its holder's holding of k, replacing the one it had.
// A holding of no tokens is dropped instead. It fails with ErrFull when h
// is new and the ledger holds its maximum.
func (l *Ledger) Put(k Key, h Holding) error {
	if h.Tokens <= 0 {
		l.Drop(k, h.Holder)
		return nil
	}
	b := l.books[k]
	if b == nil {
		if l.n >= l.max {
			return ErrFull
		}
		b = &book{}
		l.books[k] = b
	}
	i := b.find(h.Holder)
	if i >= 0 {
		l.total += h.Tokens - b.holdings[i].Tokens
		b.holdings[i] = h
		return nil
	}
	if l.n >= l.max {
		return ErrFull
	}
	i, _ = slices.BinarySearchFunc(b.holdings, h.Holder, byHolder)
	b.holdings = slices.Insert(b.holdings, i, h)
	l.n++
	l.total += h.Tokens
	return nil
}

// Drop removes holder's holding of k and returns it.
func (l *Ledger) Drop(k Key, holder string) (Holding, bool) {
	b := l.books[k]
	if b == nil {
		return Holding{}, false
	}
	i := b.find(holder)
	if i < 0 {
		return Holding{}, false
	}
	h := b.holdings[i]
	b.holdings = slices.Delete(b.holdings, i, i+1)
	l.n--
	l.total -= h.Tokens
	l.gc(k, b)
	return h, true
}

// gc forgets k's book once nothing is left in it.
func (l *Ledger) gc(k Key, b *book) {
	if len(b.holdings) == 0 && len(b.claims) == 0 {
		delete(l.books, k)
	}
}

// Claim reserves tokens of k for holder until expires, replacing the claim
// it had: the owner asks Claimed before its own takes and leaves that many
// in the bucket, so a holder whose share of a near-empty bucket was
// nothing gets its share of the refill when it comes back (TakeClaim)
// instead of the owner's own takes spending every token as it is minted.
// Claims reserve, they debit nothing: losing one (a handover, a restart)
// only gives the tokens to whoever takes first. A claim counts against the
// ledger's limit like a holding; ErrFull when there is no room.
func (l *Ledger) Claim(k Key, holder string, tokens int64, expires time.Time) error {
	b := l.books[k]
	if b != nil {
		for i := range b.claims {
			if b.claims[i].holder == holder {
				b.claims[i] = claim{holder: holder, tokens: tokens, expires: expires}
				return nil
			}
		}
	}
	if l.n >= l.max {
		return ErrFull
	}
	if b == nil {
		b = &book{}
		l.books[k] = b
	}
	b.claims = append(b.claims, claim{holder: holder, tokens: tokens, expires: expires})
	l.n++
	return nil
}

// Claimed is the tokens of k claimed at now by holders other than except
// ("" for every holder); it forgets the claims that expired.
func (l *Ledger) Claimed(now time.Time, k Key, except string) int64 {
	b := l.books[k]
	if b == nil {
		return 0
	}
	var sum int64
	kept := b.claims[:0]
	for _, c := range b.claims {
		if !now.Before(c.expires) {
			l.n--
			continue
		}
		kept = append(kept, c)
		if c.holder != except {
			sum += c.tokens
		}
	}
	clear(b.claims[len(kept):])
	b.claims = kept
	l.gc(k, b)
	return sum
}

// TakeClaim removes holder's claim of k and returns its tokens (0 when it
// has none, or it expired by now).
func (l *Ledger) TakeClaim(now time.Time, k Key, holder string) int64 {
	b := l.books[k]
	if b == nil {
		return 0
	}
	for i, c := range b.claims {
		if c.holder == holder {
			b.claims = slices.Delete(b.claims, i, i+1)
			l.n--
			l.gc(k, b)
			if !now.Before(c.expires) {
				return 0
			}
			return c.tokens
		}
	}
	return 0
}

// Expired returns k's holdings that ended by now, earliest first: the
// caller settles the bucket at each one's Expires, under the capacity in
// force before it, and then drops it.
func (l *Ledger) Expired(now time.Time, k Key) []Holding {
	b := l.books[k]
	if b == nil {
		return nil
	}
	var out []Holding
	for _, h := range b.holdings {
		if !now.Before(h.Expires) {
			out = append(out, h)
		}
	}
	slices.SortFunc(out, func(a, b Holding) int { return a.Expires.Compare(b.Expires) })
	return out
}

// AddOwner counts cost the owner itself decided on k at now (a take while
// k had holdings), for Share; window is the demand meter's window.
func (l *Ledger) AddOwner(now time.Time, k Key, cost int64, window time.Duration) {
	if b := l.books[k]; b != nil {
		b.owner.AddAt(now, cost, window)
	}
}

// Share is holder's share of available tokens of k, Doorman's proportional
// share: available × its demand / (every holder's demand, its own as it
// reports it now, plus the owner's), rounded down, and never more than
// available. A holder alone with an owner that decides nothing itself gets
// everything available.
func (l *Ledger) Share(now time.Time, k Key, holder string, demand float64, available int64, window time.Duration) int64 {
	if available <= 0 || demand <= 0 {
		return 0
	}
	share := int64(float64(available) * l.Fraction(now, k, holder, demand, window))
	return min(max(share, 0), available)
}

// Fraction is holder's part of k's demand at now: its demand over every
// live holder's (its own as it reports it now) plus the owner's, in
// [0, 1]; 0 when its demand is not positive.
func (l *Ledger) Fraction(now time.Time, k Key, holder string, demand float64, window time.Duration) float64 {
	if !(demand > 0) {
		return 0
	}
	total := demand
	if b := l.books[k]; b != nil {
		total += b.owner.RateAt(now, window)
		for _, h := range b.holdings {
			if h.Holder != holder && now.Before(h.Expires) {
				total += h.Demand
			}
		}
	}
	return min(demand/total, 1)
}

// Entry is one holding of one bucket, with its expiry relative to the
// exporter's now: how holdings cross nodes (handoff, replication), so
// clock skew between nodes changes no expiry.
type Entry struct {
	Key    Key
	Holder string
	Tokens int64
	// Remaining is the holding's time left at the exporter's now.
	Remaining time.Duration
	Demand    float64
	Seq       uint64
}

// Export returns the holdings of the buckets pick selects (all when pick
// is nil) as entries relative to now, removing them with remove.
func (l *Ledger) Export(now time.Time, pick func(Key) bool, remove bool) []Entry {
	var out []Entry
	for k, b := range l.books {
		if pick != nil && !pick(k) {
			continue
		}
		for _, h := range b.holdings {
			out = append(out, Entry{Key: k, Holder: h.Holder, Tokens: h.Tokens, Remaining: h.Expires.Sub(now), Demand: h.Demand, Seq: h.Seq})
			if remove {
				l.total -= h.Tokens
			}
		}
		if remove {
			l.n -= len(b.holdings) + len(b.claims)
			delete(l.books, k)
		}
	}
	slices.SortFunc(out, func(a, b Entry) int {
		if c := compareKey(a.Key, b.Key); c != 0 {
			return c
		}
		return cmp.Compare(a.Holder, b.Holder)
	})
	return out
}

// ExportKey returns bucket k's holdings as entries relative to now,
// removing them with remove: Export for one bucket, without a scan.
func (l *Ledger) ExportKey(now time.Time, k Key, remove bool) []Entry {
	b := l.books[k]
	if b == nil {
		return nil
	}
	out := make([]Entry, 0, len(b.holdings))
	for _, h := range b.holdings {
		out = append(out, Entry{Key: k, Holder: h.Holder, Tokens: h.Tokens, Remaining: h.Expires.Sub(now), Demand: h.Demand, Seq: h.Seq})
	}
	if remove {
		for _, h := range b.holdings {
			l.total -= h.Tokens
		}
		l.n -= len(b.holdings) + len(b.claims)
		delete(l.books, k)
	}
	return out
}

// Import takes in handed-over holdings at now, conservatively: of a
// holding this ledger already has, the larger tokens and the later expiry
// win, so a copy arriving twice never raises a capacity; the Seq is the
// entry's, the version its sender last granted. An entry that
// already expired is ignored. It returns the buckets whose outstanding
// tokens changed: the caller settles each before (it calls Import with the
// buckets held against steps). A full ledger keeps what it has and
// reports ErrFull.
func (l *Ledger) Import(now time.Time, es []Entry) error {
	var err error
	for _, e := range es {
		if e.Remaining <= 0 || e.Tokens <= 0 {
			continue
		}
		h := Holding{Holder: e.Holder, Tokens: e.Tokens, Expires: now.Add(e.Remaining), Demand: e.Demand, Seq: e.Seq}
		if old, ok := l.Get(e.Key, e.Holder); ok {
			h.Tokens = max(h.Tokens, old.Tokens)
			if old.Expires.After(h.Expires) {
				h.Expires = old.Expires
			}
		}
		if e := l.Put(e.Key, h); e != nil {
			err = e
		}
	}
	return err
}

func (b *book) find(holder string) int {
	i, ok := slices.BinarySearchFunc(b.holdings, holder, byHolder)
	if !ok {
		return -1
	}
	return i
}

func byHolder(h Holding, holder string) int { return cmp.Compare(h.Holder, holder) }

func compareKey(a, b Key) int {
	return cmp.Or(cmp.Compare(a.Limit, b.Limit), cmp.Compare(a.Key, b.Key))
}
