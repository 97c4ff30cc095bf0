package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/allot"
	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/api/weirv1"
)

// AllotOptions turn on allotments (Options.Allot): the client asks a hot
// key's owner for a slice of its bucket, debited at the owner first, and
// decides that key's takes in this process until the slice is spent or
// expires, refreshing it before it runs dry and returning what is left
// when the key goes idle and on Close. What the client and every other
// holder admit together never exceeds what the bucket allows. It needs a
// token with the allot scope and limits with allotments: auto; a limit
// whose owner refuses (no allot scope, allotments off) is decided by its
// owner as usual, and asked again after a minute.
type AllotOptions struct {
	// On turns allotments on. Off by default: a client that holds
	// allotments is trusted with its budget (the allot scope), and tokens
	// it holds when its process dies are lost until they expire.
	On bool
	// Holder names this client's allotments at the owners, 1 to 512
	// bytes. Default: 128 random bits, hex; one per Client.
	Holder string
	// Threshold is a key's demand, in tokens per second in this process,
	// from which the client asks for an allotment. Default 50; zero or
	// more.
	Threshold float64
	// Horizon is how much demand one allotment covers: the client asks for
	// demand × Horizon tokens (the owner grants at most a quarter of the
	// capacity and the key's share). Default 50 ms; 1 ms to 10 s.
	Horizon time.Duration
	// MaxKeys bounds the keys holding an allotment at once. Default 1024.
	MaxKeys int
}

// Allotment defaults and bounds.
const (
	defaultAllotThreshold = 50.0
	defaultAllotHorizon   = 50 * time.Millisecond
	defaultAllotTTL       = 2 * time.Second // until the first answer tells the limit's
	allotWindow           = 100 * time.Millisecond
	allotAskTimeout       = time.Second
	allotCloseTimeout     = 2 * time.Second
	allotOffFor           = time.Minute // a limit whose owner refused allotments
	maxHolderBytes        = 512
	maxAllotChecks        = 4
)

// validate reports the first field out of range.
func (o AllotOptions) validate() error {
	switch {
	case len(o.Holder) > maxHolderBytes:
		return errors.New("client: AllotOptions.Holder must be at most 512 bytes")
	case math.IsNaN(o.Threshold) || math.IsInf(o.Threshold, 0) || o.Threshold < 0:
		return errors.New("client: AllotOptions.Threshold must be a finite rate, zero or more")
	case o.Horizon != 0 && (o.Horizon < time.Millisecond || o.Horizon > 10*time.Second):
		return errors.New("client: AllotOptions.Horizon must be in [1ms, 10s]")
	case o.MaxKeys < 0:
		return errors.New("client: AllotOptions.MaxKeys must not be negative")
	}
	return nil
}

// withDefaults fills zero fields.
func (o AllotOptions) withDefaults() AllotOptions {
	if o.Holder == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		o.Holder = hex.EncodeToString(b[:])
	}
	if o.Threshold == 0 {
		o.Threshold = defaultAllotThreshold
	}
	if o.Horizon == 0 {
		o.Horizon = defaultAllotHorizon
	}
	if o.MaxKeys == 0 {
		o.MaxKeys = 1024
	}
	return o
}

// allotter is a client's allotments: a purse (package allot) under one
// lock, what it learned of each limit from the owners' answers, and the
// goroutines that ask and return. With allotments off it decides nothing
// (take reports false), so the client needs no nil checks.
type allotter struct {
	on    bool
	opts  AllotOptions
	r     *router
	clock Clock

	ctx    context.Context // the sweeper's life
	cancel context.CancelFunc
	wg     sync.WaitGroup // the sweeper and the asks in flight

	mu     sync.Mutex // guards the fields below
	p      *allot.Purse
	limits map[string]*allotLimit
	closed bool

	allotted, asks, failures, returns atomic.Uint64
}

// allotLimit is what the client knows of one limit's allotments.
type allotLimit struct {
	ttl      time.Duration
	capacity int64
	window   time.Duration
	offUntil time.Time // the owner refused allotments of the limit
}

// newAllotter returns the allotter of a client with opts; with
// allotments off it is inert and starts nothing.
func newAllotter(r *router, opts Options) *allotter {
	a := &allotter{on: opts.Allot.On, r: r, clock: opts.Clock}
	if !a.on {
		return a
	}
	a.opts = opts.Allot.withDefaults()
	a.p = allot.NewPurse(allot.PurseConfig{Window: allotWindow, MaxHeld: a.opts.MaxKeys, Slots: max(1024, a.opts.MaxKeys)})
	a.limits = map[string]*allotLimit{}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.wg.Add(1)
	go a.sweep()
	return a
}

// take decides checks from this client's allotments when it can: ok is
// false when the owner must decide (allotments off, an inline limit, no
// allotment held, a limit that refused allotments). Either way it meters
// the demand and asks owners for allotments when due.
func (a *allotter) take(checks []api.Check) (resp api.TakeResponse, ok bool) {
	if !a.on || len(checks) == 0 || len(checks) > maxAllotChecks {
		return resp, false
	}
	var kbuf [maxAllotChecks]allot.Key
	var cbuf [maxAllotChecks]int64
	ks, costs := kbuf[:0], cbuf[:0]
	for _, ch := range checks {
		k := allot.Key{Limit: ch.Limit, Key: ch.Key}
		if ch.Inline != nil || ch.Cost < 0 || slices.Contains(ks, k) {
			return resp, false
		}
		ks, costs = append(ks, k), append(costs, max(ch.Cost, 1))
	}
	now := a.clock.Now()
	a.mu.Lock()
	for _, k := range ks {
		if l := a.limits[k.Limit]; a.closed || (l != nil && now.Before(l.offUntil)) {
			a.mu.Unlock()
			return resp, false
		}
	}
	out := a.p.TakeAllAt(now, ks, costs)
	if out.Kind != allot.Miss {
		resp = a.answer(now, ks, out)
	}
	due := a.dueLocked(now, ks)
	a.mu.Unlock()
	for _, q := range due {
		go a.ask(q, now)
	}
	if out.Kind == allot.Miss {
		return resp, false
	}
	a.allotted.Add(1)
	return resp, true
}

// answer is the response to a take decided from allotments: per check,
// the tokens left in this client's allotment (not in the owner's bucket),
// and, for a denial, how long the owner's denial holds. The caller holds
// a.mu.
func (a *allotter) answer(now time.Time, ks []allot.Key, out allot.Outcome) api.TakeResponse {
	resp := api.TakeResponse{Allowed: out.Kind == allot.Allowed, RetryAfter: out.RetryAfter, Results: make([]api.Result, len(ks))}
	if v := a.r.view.Load(); v != nil {
		resp.RingEpoch = v.epoch
	}
	for i, k := range ks {
		l := a.limit(k.Limit)
		left := int64(0)
		if resp.Allowed {
			left = a.p.Tokens(now, k)
		}
		reset := out.RetryAfter
		if l.capacity > 0 && left < l.capacity {
			reset = max(reset, time.Duration(float64(l.capacity-left)/float64(l.capacity)*float64(l.window)))
		}
		resp.Results[i] = api.Result{
			Limit: k.Limit, Allowed: resp.Allowed, Remaining: left, Capacity: l.capacity,
			RetryAfter: out.RetryAfter, ResetAfter: reset, Source: api.SourceAllotment, Window: l.window,
		}
	}
	return resp
}

// limit returns what is known of name, creating its entry. The caller
// holds a.mu.
func (a *allotter) limit(name string) *allotLimit {
	l := a.limits[name]
	if l == nil {
		if len(a.limits) >= 4*a.opts.MaxKeys {
			clear(a.limits) // bounded: the entries are relearned from the next answers
		}
		l = &allotLimit{ttl: defaultAllotTTL}
		a.limits[name] = l
	}
	return l
}

// query is one ask due: the key and what to ask its owner.
type query struct {
	k   allot.Key
	ask allot.Ask
}

// dueLocked returns the asks due for ks at now, marked in flight in the
// purse. The caller holds a.mu.
func (a *allotter) dueLocked(now time.Time, ks []allot.Key) []query {
	var out []query
	for _, k := range ks {
		l := a.limit(k.Limit)
		maxTokens := int64(math.MaxInt64)
		if l.capacity > 0 {
			maxTokens = max(1, l.capacity/4)
		}
		pol := allot.Policy{Threshold: a.opts.Threshold, Horizon: a.opts.Horizon, TTL: l.ttl, MaxTokens: maxTokens}
		if q, ok := a.p.AskAt(now, k, pol); ok {
			a.wg.Add(1)
			out = append(out, query{k: k, ask: q})
		}
	}
	return out
}

// ask sends one ask to the key's owner (or any member, which forwards)
// and records the answer. sent is when the client decided to ask: the
// allotment's life counts from then, so the client stops using it before
// the owner forgets it.
func (a *allotter) ask(q query, sent time.Time) {
	defer a.wg.Done()
	a.asks.Add(1)
	m, _ := a.r.pickFor(q.k.Limit, q.k.Key)
	// Not the sweeper's context: Close waits for asks in flight rather
	// than abandon a grant the owner may have made.
	ctx, cancel := context.WithTimeout(context.Background(), allotAskTimeout)
	resp, err := m.rpc.Allot(ctx, &weirv1.AllotRequest{
		Limit: q.k.Limit, Key: q.k.Key, Holder: a.opts.Holder,
		Want: q.ask.Want, Demand: q.ask.Demand, Unspent: q.ask.Unspent, Seq: q.ask.Seq,
	})
	cancel()
	now := a.clock.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.failures.Add(1)
		a.p.FailedAt(now, q.k)
		if refused(err) {
			a.limit(q.k.Limit).offUntil = now.Add(allotOffFor)
			a.p.Return(now, q.k) // nothing is held of a limit that does not allot
		}
		return
	}
	l := a.limit(q.k.Limit)
	l.capacity, l.window = resp.GetCapacity(), api.MillisDuration(resp.GetWindowMs())
	l.ttl = api.MillisDuration(resp.GetTtlMs())
	if resp.GetTokens() == 0 && resp.GetRetryAfterMs() > 0 {
		a.p.DeniedAt(now, q.k, api.MillisDuration(resp.GetRetryAfterMs()), resp.GetSeq())
		return
	}
	a.p.GrantedAt(now, sent, q.k, resp.GetTokens(), l.ttl, resp.GetSeq())
}

// refused reports whether err is the service saying no to allotments of
// the limit (no allot scope, allotments off, an unknown limit), as
// opposed to a failure worth retrying soon.
func refused(err error) bool {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.PermissionDenied, codes.Unauthenticated, codes.NotFound, codes.Unimplemented:
		return true
	}
	return false
}

// sweep returns, every window, the allotments that went idle, until the
// allotter closes.
func (a *allotter) sweep() {
	defer a.wg.Done()
	t := time.NewTicker(allotWindow)
	defer t.Stop()
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-t.C:
			a.returnKeys(a.ctx, func(p *allot.Purse, now time.Time) []allot.Key { return p.IdleAt(now) })
		}
	}
}

// returnKeys takes the keys pick names out of use and gives their unspent
// tokens back to their owners, best effort: tokens an owner never gets
// back are lost until the allotment expires there, the safe side.
func (a *allotter) returnKeys(ctx context.Context, pick func(*allot.Purse, time.Time) []allot.Key) {
	now := a.clock.Now()
	var out []*weirv1.ReturnRequest
	a.mu.Lock()
	for _, k := range pick(a.p, now) {
		if unspent, seq := a.p.Return(now, k); unspent > 0 {
			out = append(out, &weirv1.ReturnRequest{Limit: k.Limit, Key: k.Key, Holder: a.opts.Holder, Unspent: unspent, Seq: seq})
		}
	}
	a.mu.Unlock()
	for _, req := range out {
		a.returns.Add(1)
		m, _ := a.r.pickFor(req.GetLimit(), req.GetKey())
		cctx, cancel := context.WithTimeout(ctx, allotAskTimeout)
		_, _ = m.rpc.Return(cctx, req)
		cancel()
	}
}

// close stops asking, waits for the asks in flight, and returns every
// allotment held, within allotCloseTimeout.
func (a *allotter) close() {
	if !a.on {
		return
	}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return
	}
	a.closed = true
	a.mu.Unlock()
	a.cancel()
	a.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), allotCloseTimeout)
	defer cancel()
	a.returnKeys(ctx, func(p *allot.Purse, _ time.Time) []allot.Key { return p.Keys() })
}
