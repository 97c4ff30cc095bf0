package rlqs

import (
	"math"
	"time"

	"github.com/weir-rl/weir/api"
)

// This file is the pure core of one bucket on one stream: what the proxy
// may still admit under the assignments it was sent (its exposure), the
// allotment to ask for, and the assignment that fits what the owner
// granted. Time is an argument; nothing here blocks or runs by itself.
// The bound it keeps is in the package documentation.

// term is one assignment the proxy may still apply: from t on it admits at
// most m + rate·(end − t) requests, and nothing from end on. A token
// bucket holds at most m tokens and refills at rate, so this bounds it
// whatever it holds at t.
type term struct {
	m    int64
	rate float64 // tokens per second
	end  time.Time
}

// potential is what x may still admit from t on.
func (x term) potential(t time.Time) float64 {
	if !t.Before(x.end) {
		return 0
	}
	return float64(x.m) + x.rate*x.end.Sub(t).Seconds()
}

// strategy is a token bucket as sent to the proxy. Envoy reads only whole
// seconds of fill_interval, so fill is a whole number of seconds, and it
// is fixed for a bucket's life on a stream (Envoy compares two strategies
// by max_tokens, tokens_per_fill and fill_interval's nanos only).
type strategy struct {
	maxTokens int64
	perFill   int64
	fill      time.Duration
}

// rate is the refill in tokens per second.
func (s strategy) rate() float64 { return float64(s.perFill) / s.fill.Seconds() }

// kind is what an assignment tells the proxy.
type kind uint8

const (
	kindNone        kind = iota // nothing sent yet
	kindTokenBucket             // quota_assignment_action with a token_bucket
	kindDeny                    // quota_assignment_action with blanket_rule DENY_ALL
	kindAbandon                 // abandon_action
)

// assignment is one bucket action, as the stream sends it.
type assignment struct {
	kind kind
	s    strategy      // kindTokenBucket
	ttl  time.Duration // kindTokenBucket and kindDeny: whole seconds, ≥ 1 s
}

// maxCarry bounds the terms a bucket remembers; more are merged into one
// that bounds them all.
const maxCarry = 8

// exposure is every assignment a proxy may still apply to one bucket: the
// one last sent (cur) and earlier ones that may still be in force until
// the newer one reaches the proxy (carry).
type exposure struct {
	cur   term
	carry []term
}

// at is what the proxy may still admit from t on, summed over the terms;
// it forgets the terms that ended.
func (e *exposure) at(t time.Time) float64 {
	kept := e.carry[:0]
	sum := e.cur.potential(t)
	for _, x := range e.carry {
		if t.Before(x.end) {
			kept = append(kept, x)
			sum += x.potential(t)
		}
	}
	clear(e.carry[len(kept):])
	e.carry = kept
	return sum
}

// carried is the carried terms' potential at t.
func (e *exposure) carried(t time.Time) float64 {
	sum := 0.0
	for _, x := range e.carry {
		sum += x.potential(t)
	}
	return sum
}

// replace makes the current term a carried one that ends by t+margin (the
// latest the next assignment reaches the proxy) and next the current one.
func (e *exposure) replace(t time.Time, margin time.Duration, next term) {
	old := e.cur
	if end := t.Add(margin); old.end.After(end) {
		old.end = end
	}
	if t.Before(old.end) {
		e.carry = append(e.carry, old)
	}
	if len(e.carry) > maxCarry {
		merged := term{}
		for _, x := range e.carry {
			merged.m += x.m
			merged.rate += x.rate
			if x.end.After(merged.end) {
				merged.end = x.end
			}
		}
		e.carry = append(e.carry[:0], merged)
	}
	e.cur = next
}

// params are the stream's settings a bucket's plan uses.
type params struct {
	margin     time.Duration // latest an answer reaches the proxy after it is sent
	defaultTTL time.Duration // the allotment TTL assumed before the first answer
}

// bucket is one bucket id's state on one stream. It is used by one
// goroutine at a time.
type bucket struct {
	limit, key string
	fill       time.Duration // the strategies' fill interval, whole seconds
	exp        exposure
	last       assignment // last sent
	lastAt     time.Time  // when last was sent
	seq        uint64     // Seq of the holding at the owner, 0 for none
	// slack is what the owner counted outstanding at the last answer
	// beyond the exposure then (whole tokens), given back as Unspent with
	// the next ask, less the reserve: the max_tokens of the token bucket
	// then sent, which a proxy may spend and refill between two asks
	// beyond what the exposure at the second counts.
	slack, reserve int64
	ttl            time.Duration
	denied         time.Time // the owner's denial lasts until then
	// Demand: requests (allowed and denied) reported since, for the
	// rate asked with the next allotment.
	count    int64
	since    time.Time
	demand   float64   // requests per second, as last measured
	lastBusy time.Time // last report with a request in it
	// interval is the time between the bucket's last two reports.
	interval   time.Duration
	lastReport time.Time
	lastAsked  time.Time
	// The limit as the owner last described it (zero before).
	capacity int64
	window   time.Duration
}

// limitResp is the limit as last described, for target.
func (b *bucket) limitResp() api.AllotResponse {
	return api.AllotResponse{Capacity: b.capacity, Window: b.window}
}

// observe counts a usage report of n requests at now.
func (b *bucket) observe(now time.Time, n int64) {
	if !b.lastReport.IsZero() && now.After(b.lastReport) {
		b.interval = now.Sub(b.lastReport)
	}
	b.lastReport = now
	b.count = satAdd(b.count, n)
	if n > 0 {
		b.lastBusy = now
	}
}

// measure updates the demand from the requests counted since the last
// measure: at least the new rate, and not less than half the old one, so
// one quiet interval does not take a busy bucket's assignment away.
func (b *bucket) measure(now time.Time) float64 {
	window := max(now.Sub(b.since), time.Second)
	rate := float64(b.count) / window.Seconds()
	b.demand = max(rate, b.demand/2)
	b.count, b.since = 0, now
	return b.demand
}

// target is the strategy the bucket's demand calls for: its rate (at
// most the limit's, at least one token per fill interval) and a tenth of
// a second of it as the burst (at least 1, at most the capacity). The
// burst is small because each refresh holds it back (the reserve).
func (b *bucket) target(demand float64, resp api.AllotResponse) strategy {
	rate := demand
	if resp.Capacity > 0 && resp.Window > 0 {
		rate = min(rate, float64(resp.Capacity)/resp.Window.Seconds())
	}
	per := max(int64(math.Ceil(rate*b.fill.Seconds())), 1)
	m := max(int64(math.Ceil(rate/10)), 1)
	if resp.Capacity > 0 {
		m = min(m, resp.Capacity)
	}
	return strategy{maxTokens: m, perFill: per, fill: b.fill}
}

// keeps reports whether the strategy last sent can be sent again at now
// as the same token bucket: Envoy then keeps the bucket it has and only
// restarts the time to live. That needs the last assignment still in
// force when the new one arrives (sent at lastAt, it ends no earlier than
// lastAt+ttl), else Envoy starts a new, full bucket.
func (b *bucket) keeps(now time.Time, margin time.Duration) bool {
	return b.last.kind == kindTokenBucket && !b.lastAt.Add(b.last.ttl).Before(now.Add(margin))
}

// due reports whether the bucket may ask its owner at now: not within
// the owner's denial, not within minRefresh of its last ask, and not
// before the last assignment has surely reached the proxy (margin after
// it was sent), so that every term carried then has ended (see reserve).
func (b *bucket) due(now time.Time, margin, minRefresh time.Duration) bool {
	switch {
	case now.Before(b.denied), now.Before(b.lastAt.Add(margin)):
		return false
	case !b.lastAsked.IsZero() && now.Sub(b.lastAsked) < minRefresh:
		return false
	}
	return true
}

// want is the allotment to ask for at now, given the exposure: enough for
// the strategy s (the last one when it keeps) over an assignment's life,
// with its reserve, beyond what the stream holds.
func (b *bucket) want(now time.Time, p params, s strategy, keep bool) int64 {
	ttl := b.ttl
	if ttl <= 0 {
		ttl = p.defaultTTL
	}
	ttl = b.capTTL(ttl, p.margin)
	need := 2*float64(s.maxTokens) + s.rate()*(p.margin+ttl).Seconds() - float64(b.unspent(now))
	if keep { // the current term is replaced, the carried ones stay
		need += b.exp.carried(now)
	} else {
		need += b.exp.at(now)
	}
	return max(int64(math.Ceil(need)), 1)
}

// unspent is the Unspent of the next ask at now: what the proxy may still
// admit (rounded up) and the slack, less the reserve. See the package
// documentation for why this never exceeds what the owner counts minus
// what the proxy admitted since the last ask.
func (b *bucket) unspent(now time.Time) int64 {
	return max(satAdd(int64(math.Ceil(b.exp.at(now))), b.slack-b.reserve), 0)
}

// settle records, after an assignment fitted into budget at an ask at
// askedAt, the slack (what the owner counts beyond the exposure then,
// whole tokens) and the reserve (the current token bucket's max_tokens).
func (b *bucket) settle(askedAt time.Time, budget int64) {
	b.slack = max(int64(math.Floor(float64(budget)-b.exp.at(askedAt))), 0)
	b.reserve = b.exp.cur.m
}

// fit chooses the assignment sent at now after an allotment answer to an
// ask at askedAt: the owner counts budget tokens outstanding for this
// holder until askedAt + resp.TTL. The exposure after it, evaluated at
// askedAt, plus the new token bucket's max_tokens (its reserve) is at
// most budget, and it ends by then (see the package documentation). It
// records the assignment, the new exposure, the slack and the reserve.
func (b *bucket) fit(now, askedAt time.Time, budget int64, resp api.AllotResponse, tgt strategy, p params) assignment {
	a := b.fitted(now, askedAt, budget, resp, tgt, p)
	b.settle(askedAt, budget)
	return a
}

// fitted is fit before the slack and reserve are recorded.
func (b *bucket) fitted(now, askedAt time.Time, budget int64, resp api.AllotResponse, tgt strategy, p params) assignment {
	b.ttl = resp.TTL
	maxTTL := b.capTTL(wholeSeconds(askedAt.Add(resp.TTL).Sub(now)-p.margin), p.margin)
	lead := now.Sub(askedAt) + p.margin // a term's end is now + margin + ttl
	if maxTTL >= time.Second {
		carried := b.exp.carried(askedAt)
		// A new strategy: the current bucket may serve until the new one
		// arrives, then Envoy starts the new one full.
		old := b.exp.cur
		if end := now.Add(p.margin); old.end.After(end) {
			old.end = end
		}
		next, nextTTL, nextOK := shrink(float64(budget)-carried-old.potential(askedAt), tgt, lead, maxTTL, b.minTTL(p.margin))
		// The same strategy again: Envoy keeps its bucket, so only the
		// carried terms stay beside it.
		keepTTL := time.Duration(0)
		if b.keeps(now, p.margin) {
			keepTTL = ttlFor(float64(budget)-carried, b.last.s, lead, maxTTL)
		}
		switch {
		case keepTTL >= b.minTTL(p.margin) && (!nextOK || !better(next, b.last.s, tgt)), keepTTL >= time.Second && !nextOK:
			s := b.last.s
			b.exp.cur = term{m: s.maxTokens, rate: s.rate(), end: now.Add(p.margin + keepTTL)}
			return b.record(now, assignment{kind: kindTokenBucket, s: s, ttl: keepTTL})
		case nextOK:
			b.exp.replace(now, p.margin, term{m: next.maxTokens, rate: next.rate(), end: now.Add(p.margin + nextTTL)})
			return b.record(now, assignment{kind: kindTokenBucket, s: next, ttl: nextTTL})
		}
	}
	ttl := time.Second
	if resp.RetryAfter > 0 {
		ttl = max(ceilSeconds(resp.RetryAfter), time.Second)
		b.denied = now.Add(resp.RetryAfter)
	}
	return b.deny(now, ttl, p.margin)
}

// deny records a DENY_ALL blanket sent at now for ttl.
func (b *bucket) deny(now time.Time, ttl, margin time.Duration) assignment {
	b.exp.replace(now, margin, term{})
	return b.record(now, assignment{kind: kindDeny, ttl: ttl})
}

func (b *bucket) record(now time.Time, a assignment) assignment {
	b.last, b.lastAt = a, now
	return a
}

// better reports whether next is worth replacing cur, the strategy in
// force, when the demand calls for tgt: next's rate is more than 1.5
// times cur's, or the demand fell under half of cur's rate (a smaller
// strategy holds less outstanding). Smaller changes keep cur: a new
// strategy costs a fresh burst and the old bucket's until the new one
// arrives.
func better(next, cur, tgt strategy) bool {
	return 2*next.rate() > 3*cur.rate() || 2*tgt.rate() < cur.rate()
}

// ttlFor is the longest whole-second TTL, at most maxTTL, under which s
// fits room with its reserve: 2·max_tokens plus its refill over lead + TTL
// (lead: from the ask to the latest the assignment arrives).
func ttlFor(room float64, s strategy, lead, maxTTL time.Duration) time.Duration {
	spare := room - 2*float64(s.maxTokens)
	if spare < 0 {
		return 0
	}
	secs := spare/s.rate() - lead.Seconds()
	if secs >= maxTTL.Seconds() {
		return maxTTL
	}
	if secs < 1 {
		return 0
	}
	return wholeSeconds(time.Duration(secs * float64(time.Second)))
}

// shrink fits a strategy into room: tgt with the longest TTL it allows
// when that is at least minTTL (so that the next report can extend it),
// else a smaller burst and rate (at least 1 token and 1 token per fill)
// that last minTTL, else one second. ok is false when not even that
// fits.
func shrink(room float64, tgt strategy, lead, maxTTL, minTTL time.Duration) (strategy, time.Duration, bool) {
	if ttl := ttlFor(room, tgt, lead, maxTTL); ttl >= minTTL {
		return tgt, ttl, true
	}
	for _, life := range [...]time.Duration{min(minTTL, maxTTL), time.Second} {
		s := tgt
		s.maxTokens = max(min(s.maxTokens, int64(room/8)), 1)
		s.perFill = min(s.perFill, int64((room-2*float64(s.maxTokens))*s.fill.Seconds()/(lead+life).Seconds()))
		if s.perFill < 1 {
			continue
		}
		s.maxTokens = min(s.maxTokens, max(int64(math.Ceil(s.rate()/10)), 1)) // a tenth of a second of the rate it got
		if ttl := ttlFor(room, s, lead, maxTTL); ttl >= time.Second {
			return s, ttl, true
		}
	}
	return strategy{}, 0, false
}

// ttlReports is how many report intervals an assignment lives at most: it
// survives two lost or late reports. A longer life holds more of the
// bucket's future refill outstanding, which the owner's bucket then cannot
// hold (docs/architecture.md §13.1: L + O ≤ B).
const ttlReports = 3

// capTTL caps ttl at ttlReports report intervals and the margin, in whole
// seconds (at least two); before the bucket's second report, when its
// interval is not known, ttl stands.
func (b *bucket) capTTL(ttl, margin time.Duration) time.Duration {
	if b.interval <= 0 {
		return ttl
	}
	return min(ttl, max(ceilSeconds(ttlReports*b.interval+margin), 2*time.Second))
}

// minTTL is the time to live an assignment needs for the next report to
// extend it: the interval between the bucket's reports and the margin,
// in whole seconds, at least one.
func (b *bucket) minTTL(margin time.Duration) time.Duration {
	return max(ceilSeconds(b.interval+margin), time.Second)
}

// wholeSeconds rounds d down to whole seconds (Envoy reads only the
// seconds of a duration).
func wholeSeconds(d time.Duration) time.Duration {
	if d < 0 {
		return 0
	}
	return d.Truncate(time.Second)
}

// ceilSeconds rounds d up to whole seconds.
func ceilSeconds(d time.Duration) time.Duration {
	if t := d.Truncate(time.Second); t < d {
		return t + time.Second
	}
	return d
}

func satAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
