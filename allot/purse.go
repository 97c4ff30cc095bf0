package allot

import (
	"hash/maphash"
	"math"
	"time"
)

// Policy is how a holder uses allotments of one limit.
type Policy struct {
	// Threshold is the demand, in tokens per second at this holder, from
	// which it asks the bucket's owner for an allotment.
	Threshold float64
	// Horizon is how much of the holder's demand one allotment covers: it
	// asks for demand × Horizon tokens, and again when fewer than half of
	// that are left.
	Horizon time.Duration
	// TTL is an allotment's life, from when the holder asked.
	TTL time.Duration
	// MaxTokens bounds one allotment (a share of the bucket's capacity).
	MaxTokens int64
}

// PurseConfig bounds a Purse. Zero fields mean their defaults.
type PurseConfig struct {
	// Window is the demand meter's window. Default 100ms.
	Window time.Duration
	// Idle is how long a held allotment may see no take before IdleAt
	// hands it back for returning. Default 1s.
	Idle time.Duration
	// Slots is the number of keys whose demand is metered at once,
	// direct-mapped by hash: a key with demand holds its slot against a
	// colder one. Default 1024.
	Slots int
	// MaxHeld bounds the keys holding an allotment at once. Default 1024.
	MaxHeld int
}

// withDefaults fills zero fields.
func (c PurseConfig) withDefaults() PurseConfig {
	if c.Window <= 0 {
		c.Window = 100 * time.Millisecond
	}
	if c.Idle <= 0 {
		c.Idle = time.Second
	}
	if c.Slots <= 0 {
		c.Slots = 1024
	}
	if c.MaxHeld <= 0 {
		c.MaxHeld = 1024
	}
	return c
}

// Kind is how a holder's take was decided.
type Kind uint8

const (
	// Miss means the holder has no usable allotment for the key: the
	// owner decides the take.
	Miss Kind = iota
	// Allowed means the take was spent from the allotment.
	Allowed
	// Denied means the owner refused an allotment because the bucket was
	// empty, and that denial still holds: the take is denied here.
	Denied
)

// Outcome is a holder's local decision.
type Outcome struct {
	Kind Kind
	// Remaining is the allotment's tokens left after the take.
	Remaining int64
	// RetryAfter is, for Denied, how long the owner's denial still holds.
	RetryAfter time.Duration
}

// Ask is what a holder asks a bucket's owner for: Want more tokens, its
// Demand (tokens per second), the tokens of its current allotment still
// unspent when it asked (an upper bound of what it will spend of them,
// since it keeps spending while the ask is in flight), and the Seq of the
// owner's last answer that those tokens belong to.
type Ask struct {
	Want    int64
	Demand  float64
	Unspent int64
	Seq     uint64
}

// Purse is a holder's allotments: per bucket, the tokens its owner granted
// it, until when, and a denial to keep until its retry-after; and the
// demand it meters per key to decide when to ask. A pure core: time is an
// argument, and it is not safe for concurrent use (the engine and the Go
// client lock it).
type Purse struct {
	cfg   PurseConfig
	seed  maphash.Seed
	slots []slot
	held  map[Key]*held
}

// slot meters one key's demand.
type slot struct {
	key   Key
	meter Meter
	last  time.Time // last take
}

// held is one key's allotment at the holder.
type held struct {
	tokens      int64
	expires     time.Time // holder clock: no take at or after it
	deniedUntil time.Time // a denial kept from the owner
	asking      bool      // an ask is in flight
	nextAsk     time.Time // no ask before this (after a refusal of tokens or a failure)
	last        time.Time // last take
	seq         uint64    // the owner's last answer
	// contended: the owner's last refusal (a denial, or a claim to wait
	// for) has not been followed by a grant of everything asked. While it
	// holds, a take the allotment cannot cover is denied here for backoff
	// rather than forwarded: the owner has just said the key has no token
	// to spare, and the next ask is on its way.
	contended bool
	backoff   time.Duration
	want      int64 // the last ask's Want
}

// NewPurse returns an empty purse.
func NewPurse(cfg PurseConfig) *Purse {
	cfg = cfg.withDefaults()
	return &Purse{cfg: cfg, seed: maphash.MakeSeed(), slots: make([]slot, cfg.Slots), held: map[Key]*held{}}
}

// Len is the number of keys holding an allotment or a denial.
func (p *Purse) Len() int { return len(p.held) }

// meter counts cost asked of k at now and returns k's demand.
func (p *Purse) meter(now time.Time, k Key, cost int64) float64 {
	s := &p.slots[maphash.String(p.seed, k.Limit+"\x00"+k.Key)%uint64(len(p.slots))]
	if s.key != k {
		// A colder or idle key gives its slot up.
		if s.key != (Key{}) && now.Sub(s.last) < p.cfg.Idle && s.meter.RateAt(now, p.cfg.Window) > 0 {
			return 0 // the slot is busy: k is not metered for now
		}
		*s = slot{key: k}
	}
	s.meter.AddAt(now, cost, p.cfg.Window)
	s.last = now
	return s.meter.RateAt(now, p.cfg.Window)
}

// Tokens is what k's allotment has left to spend at now: none once it
// expired.
func (p *Purse) Tokens(now time.Time, k Key) int64 {
	if h := p.held[k]; h != nil && now.Before(h.expires) {
		return h.tokens
	}
	return 0
}

// Demand is k's metered demand at now, in tokens per second.
func (p *Purse) Demand(now time.Time, k Key) float64 {
	s := &p.slots[maphash.String(p.seed, k.Limit+"\x00"+k.Key)%uint64(len(p.slots))]
	if s.key != k {
		return 0
	}
	return s.meter.RateAt(now, p.cfg.Window)
}

// TakeAt decides a take of cost on k at now from k's allotment: Allowed
// while tokens last (and before the allotment expires), Denied while an
// owner's denial holds and, after it, until the owner grants everything
// asked again (the key is contended: a take the allotment cannot cover is
// denied here, for the last denial's length, not forwarded), Miss
// otherwise. It meters the demand in every case.
func (p *Purse) TakeAt(now time.Time, k Key, cost int64) Outcome {
	p.meter(now, k, cost)
	h := p.held[k]
	if h == nil {
		return Outcome{}
	}
	h.last = now
	if h.tokens >= cost && now.Before(h.expires) {
		h.tokens -= cost
		return Outcome{Kind: Allowed, Remaining: h.tokens}
	}
	if now.Before(h.deniedUntil) {
		return Outcome{Kind: Denied, RetryAfter: h.deniedUntil.Sub(now)}
	}
	if h.contended {
		return Outcome{Kind: Denied, RetryAfter: h.backoff}
	}
	return Outcome{}
}

// TakeAllAt decides a take of costs[i] on every ks[i] at now as one step:
// Allowed (every key spent) when every key's allotment covers its cost,
// Denied (nothing spent) when an owner's denial holds for one of them and
// the others cannot all be spent, Miss otherwise (nothing spent). The keys
// must be distinct.
func (p *Purse) TakeAllAt(now time.Time, ks []Key, costs []int64) Outcome {
	for i, k := range ks {
		p.meter(now, k, costs[i])
	}
	all := true
	var retry time.Duration
	for i, k := range ks {
		h := p.held[k]
		if h == nil || h.tokens < costs[i] || !now.Before(h.expires) {
			all = false
			switch {
			case h != nil && now.Before(h.deniedUntil):
				retry = max(retry, h.deniedUntil.Sub(now))
			case h != nil && h.contended:
				retry = max(retry, h.backoff)
			}
		}
	}
	switch {
	case all:
		remaining := int64(math.MaxInt64)
		for i, k := range ks {
			h := p.held[k]
			h.tokens -= costs[i]
			h.last = now
			remaining = min(remaining, h.tokens)
		}
		return Outcome{Kind: Allowed, Remaining: remaining}
	case retry > 0:
		return Outcome{Kind: Denied, RetryAfter: retry}
	}
	return Outcome{}
}

// Refund gives cost back to k's allotment: the undo of an Allowed take
// whose request another check denied.
func (p *Purse) Refund(k Key, cost int64) {
	if h := p.held[k]; h != nil {
		h.tokens += cost
	}
}

// AskAt reports whether the holder should ask k's owner for an allotment
// now, under policy pol, and what to ask: when no ask is in flight, no
// denial holds, and either its demand reached the threshold with no
// allotment held, or the allotment it holds runs low (fewer tokens than
// half its demand over the horizon) or has less than a third of its life
// left while the demand lasts. It marks the ask in flight; the caller
// reports the answer with GrantedAt, DeniedAt or FailedAt.
func (p *Purse) AskAt(now time.Time, k Key, pol Policy) (Ask, bool) {
	demand := p.Demand(now, k)
	h := p.held[k]
	if h == nil {
		if demand < pol.Threshold || demand <= 0 || len(p.held) >= p.cfg.MaxHeld {
			return Ask{}, false
		}
		h = &held{last: now}
		p.held[k] = h
	}
	if h.asking || now.Before(h.deniedUntil) || now.Before(h.nextAsk) {
		return Ask{}, false
	}
	want := int64(math.Ceil(demand * pol.Horizon.Seconds()))
	want = min(max(want, 1), max(pol.MaxTokens, 1))
	live := now.Before(h.expires)
	low := !live || h.tokens*2 < want || h.expires.Sub(now) < pol.TTL/3
	if !low || (demand < pol.Threshold && h.tokens == 0) {
		return Ask{}, false
	}
	unspent := int64(0)
	if live {
		unspent = h.tokens
	}
	h.asking, h.want = true, want
	return Ask{Want: want, Demand: demand, Unspent: unspent, Seq: h.seq}, true
}

// GrantedAt records the owner's answer seq to the ask sent at sent: tokens
// more, the whole allotment (what is left and what came) usable until
// sent + ttl on the holder's clock. Measured from the ask, not from the
// answer, the holder's deadline comes before the owner's. No tokens
// (the owner's share for it was none) waits a window before asking again.
func (p *Purse) GrantedAt(now, sent time.Time, k Key, tokens int64, ttl time.Duration, seq uint64) {
	h := p.held[k]
	if h == nil {
		return // returned while the ask was in flight: the grant is lost until it expires, the safe side
	}
	h.asking, h.seq = false, seq
	if !now.Before(h.expires) {
		h.tokens = 0 // what was left expired before the answer
	}
	h.tokens += tokens
	h.expires = sent.Add(ttl)
	if tokens == 0 {
		h.nextAsk = now.Add(p.cfg.Window)
	}
	if tokens >= h.want {
		h.contended = false
	}
}

// DeniedAt records the owner's answer seq refusing an allotment because
// the bucket is empty for retry more: takes beyond the tokens still held
// are denied here until then.
func (p *Purse) DeniedAt(now time.Time, k Key, retry time.Duration, seq uint64) {
	if h := p.held[k]; h != nil {
		h.asking, h.seq = false, seq
		h.deniedUntil = now.Add(retry)
		h.contended, h.backoff = true, max(retry, time.Millisecond)
	}
}

// FailedAt records that an ask got no answer (the owner unreachable, or it
// refused for another reason): the tokens held stay usable until they
// expire, and the next ask waits a window.
func (p *Purse) FailedAt(now time.Time, k Key) {
	if h := p.held[k]; h != nil {
		h.asking = false
		h.nextAsk = now.Add(p.cfg.Window)
	}
}

// Return takes k's allotment back from use and returns its unspent tokens
// for the owner (none once it expired) with the Seq of the owner's last
// answer; the holder forgets the key.
func (p *Purse) Return(now time.Time, k Key) (unspent int64, seq uint64) {
	h := p.held[k]
	if h == nil {
		return 0, 0
	}
	delete(p.held, k)
	if !now.Before(h.expires) {
		return 0, h.seq
	}
	return h.tokens, h.seq
}

// IdleAt returns the keys to give back at now: allotments that saw no take
// for Idle (their unspent tokens go back to the owner with Return), and
// keys whose allotment expired or whose denial ended with nothing held
// (Return forgets them, returning nothing). Keys with an ask in flight
// wait for its answer.
func (p *Purse) IdleAt(now time.Time) []Key {
	var out []Key
	for k, h := range p.held {
		if h.asking {
			continue
		}
		idle := now.Sub(h.last) >= p.cfg.Idle
		spent := (h.tokens == 0 || !now.Before(h.expires)) && !now.Before(h.deniedUntil)
		if idle || (spent && now.Sub(h.last) >= p.cfg.Window) {
			out = append(out, k)
		}
	}
	return out
}

// Keys returns every key held, for returning them all (a holder that
// leaves or closes).
func (p *Purse) Keys() []Key {
	out := make([]Key, 0, len(p.held))
	for k := range p.held {
		out = append(out, k)
	}
	return out
}
