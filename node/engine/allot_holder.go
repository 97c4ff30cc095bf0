package engine

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-rl/weir/allot"
	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/node/limits"
	"github.com/weir-rl/weir/node/placement"
)

// This file is the holder's side of allotments (package allot): a node
// that is not a key's owner decides the key's takes from the allotment the
// owner granted it, asks for one when the key's demand here reaches the
// limit's threshold, refreshes it before it runs dry, keeps the owner's
// denial until its retry-after, and returns what is left when the key goes
// idle and on shutdown.

// purseShards spreads the holder's keys over this many locked purses.
const purseShards = 16

// purses are this node's allotments as a holder. Safe for concurrent use:
// each shard's mutex guards its purse.
type purses struct {
	shards [purseShards]purseShard
}

type purseShard struct {
	mu sync.Mutex
	p  *allot.Purse
	_  [48]byte // keep shards off one cache line
}

func newPurses() *purses {
	ps := &purses{}
	for i := range ps.shards {
		ps.shards[i].p = allot.NewPurse(allot.PurseConfig{Window: allotWindow, Slots: 256, MaxHeld: 256})
	}
	return ps
}

func (ps *purses) shard(k allot.Key) *purseShard {
	return &ps.shards[xxhash.Sum64String(k.Limit+"\x00"+k.Key)%purseShards]
}

// ask is an allotment ask waiting for the driver: what to ask the owner at
// addr for, and when the holder decided to ask.
type ask struct {
	k    allot.Key
	a    allot.Ask
	addr string
	sent time.Time
}

// holderMetrics count the holder's side of allotments.
type holderMetrics struct {
	asks, failed, returns prometheus.Counter
	denials               prometheus.Counter // takes denied here from a kept denial
}

func newHolderMetrics(reg prometheus.Registerer) *holderMetrics {
	m := &holderMetrics{
		asks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_allotment_asks_total", Help: "Allotments this node asked of a key's owner as a holder (first asks and refreshes).",
		}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_allotment_ask_failures_total", Help: "Allotment asks that got no answer (the owner unreachable or refusing); the holder forwards meanwhile.",
		}),
		returns: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_allotment_holder_returns_total", Help: "Allotments this node gave back as a holder (idle, leaving or shutting down).",
		}),
		denials: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_allotment_local_denials_total", Help: "Takes this node denied as a holder from a denial the owner gave it, without asking the owner again.",
		}),
	}
	reg.MustRegister(m.asks, m.failed, m.returns, m.denials)
	return m
}

// policy is l's allotments as a holder applies them.
func policy(l *limits.Limit) allot.Policy {
	a := l.Allotments
	return allot.Policy{Threshold: a.Threshold, Horizon: a.Horizon, TTL: a.TTL, MaxTokens: l.MaxAllotment()}
}

// allotted reports whether every check of g may be decided from an
// allotment: limits with allotments, no shadow or inline limit, one check
// per key.
func allotted(rs []resolved, g *group) bool {
	for j, i := range g.idx {
		l := rs[i].limit
		if !l.Allotments.Auto || l.Shadow || l.Inline {
			return false
		}
		for _, i2 := range g.idx[:j] {
			if rs[i2].check.Key == rs[i].check.Key && rs[i2].limit == l {
				return false
			}
		}
	}
	return true
}

// fromAllotment decides g, a group forwarded to the owner at g.place.Addr
// whose every check allots, from this node's allotments: allowed when they
// cover every check (the Spend is the allotments' debits), denied while an
// owner's denial holds, and not decided (false) otherwise, so the owner
// decides. Either way it meters the demand and asks the owner for (more)
// allotment when it is due.
func (e *Engine) fromAllotment(rs []resolved, g *group, results []api.Result, sp *Spend) (decided, allowed bool) {
	now := e.now()
	var kbuf [4]allot.Key
	var cbuf [4]int64
	ks, costs := kbuf[:0], cbuf[:0]
	for _, i := range g.idx {
		ks = append(ks, allot.Key{Limit: rs[i].limit.Name, Key: rs[i].check.Key})
		costs = append(costs, rs[i].check.Cost)
	}
	var out allot.Outcome
	var lbuf [4]int64
	left := lbuf[:]
	if len(ks) > len(lbuf) {
		left = make([]int64, len(ks))
	}
	left = left[:len(ks)]
	if len(ks) == 1 {
		sh := e.purses.shard(ks[0])
		sh.mu.Lock()
		out = sh.p.TakeAt(now, ks[0], costs[0])
		left[0] = out.Remaining
		sh.mu.Unlock()
	} else {
		out = e.takeAllAllotted(now, ks, costs, left)
	}
	for j, i := range g.idx {
		e.maybeAsk(now, ks[j], rs[i].limit, g.place.Addr)
	}
	switch out.Kind {
	case allot.Allowed:
		for j, i := range g.idx {
			results[i] = allotResult(rs[i].limit, true, left[j], 0)
		}
		if sp != nil {
			*sp = Spend{Where: Allotment}
			for j, i := range g.idx {
				sp.Debits = append(sp.Debits, bucket.Check{Name: ks[j].Limit, Key: ks[j].Key, Cost: costs[j], Limit: rs[i].limit.Bucket})
			}
		}
		return true, true
	case allot.Denied:
		e.hm.denials.Inc()
		for _, i := range g.idx {
			results[i] = allotResult(rs[i].limit, false, 0, out.RetryAfter)
		}
		return true, false
	}
	return false, false
}

// takeAllAllotted is a multi-check take from allotments in several purse
// shards: every shard involved is locked, in order, for the one step.
func (e *Engine) takeAllAllotted(now time.Time, ks []allot.Key, costs []int64, left []int64) allot.Outcome {
	var order []int
	for _, k := range ks {
		order = append(order, int(xxhash.Sum64String(k.Limit+"\x00"+k.Key)%purseShards))
	}
	slices.Sort(order)
	order = slices.Compact(order)
	for _, s := range order {
		e.purses.shards[s].mu.Lock()
	}
	defer func() {
		for _, s := range order {
			e.purses.shards[s].mu.Unlock()
		}
	}()
	// Each purse decides its own keys; a step over several purses is
	// allowed only when each is, and undone in those that were.
	var out allot.Outcome
	taken := make([]bool, len(ks))
	for j, k := range ks {
		o := e.purses.shard(k).p.TakeAllAt(now, []allot.Key{k}, []int64{costs[j]})
		switch o.Kind {
		case allot.Allowed:
			taken[j], left[j] = true, o.Remaining
			continue
		case allot.Denied:
			out = o
		}
		for j2, t := range taken {
			if t {
				e.purses.shard(ks[j2]).p.Refund(ks[j2], costs[j2])
			}
		}
		if out.Kind != allot.Denied {
			out = allot.Outcome{}
		}
		return out
	}
	return allot.Outcome{Kind: allot.Allowed}
}

// allotResult is the answer to a check decided from an allotment: the
// holder's tokens left, and, for a denial, how long the owner's denial
// holds. They describe the holder's slice, not the owner's bucket: reset
// is what a bucket at that level would take to refill at the limit's rate.
func allotResult(l *limits.Limit, allowed bool, remaining int64, retry time.Duration) api.Result {
	b := l.Bucket
	reset := time.Duration(0)
	if deficit := b.Capacity - remaining; deficit > 0 && b.Rate.N > 0 {
		reset = time.Duration(float64(deficit) * float64(b.Rate.Per) / float64(b.Rate.N))
	}
	return api.Result{
		Limit: l.Name, Allowed: allowed, Remaining: remaining, Capacity: b.Capacity,
		RetryAfter: retry, ResetAfter: max(reset, retry), Source: api.SourceAllotment, Window: b.PolicyWindow(),
	}
}

// maybeAsk queues an ask for k at the owner at addr when its purse says
// one is due. A full queue drops the ask (the purse retries after a
// window).
func (e *Engine) maybeAsk(now time.Time, k allot.Key, l *limits.Limit, addr string) {
	sh := e.purses.shard(k)
	sh.mu.Lock()
	a, ok := sh.p.AskAt(now, k, policy(l))
	sh.mu.Unlock()
	if !ok {
		return
	}
	select {
	case e.asks <- ask{k: k, a: a, addr: addr, sent: now}:
	default:
		sh.mu.Lock()
		sh.p.FailedAt(now, k)
		sh.mu.Unlock()
	}
}

// allotDriver sends queued asks to owners (at most maxAsking at once) and,
// every window, returns the allotments gone idle, until ctx ends.
func (e *Engine) allotDriver(ctx context.Context) {
	const maxAsking = 8
	sem := make(chan struct{}, maxAsking)
	var wg sync.WaitGroup
	defer wg.Wait()
	t := time.NewTicker(allotWindow)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case a := <-e.asks:
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Go(func() {
				defer func() { <-sem }()
				e.askOwner(ctx, a)
			})
		case <-t.C:
			e.returnIdle(ctx)
		}
	}
}

// askOwner sends one ask and records the answer in the key's purse.
func (e *Engine) askOwner(ctx context.Context, a ask) {
	e.hm.asks.Inc()
	resp, err := e.peers.Allot(ctx, a.addr, api.AllotRequest{
		Limit: a.k.Limit, Key: a.k.Key, Holder: e.holder, Want: a.a.Want, Demand: a.a.Demand, Unspent: a.a.Unspent, Seq: a.a.Seq,
	})
	now := e.now()
	sh := e.purses.shard(a.k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	switch {
	case err != nil:
		e.hm.failed.Inc()
		sh.p.FailedAt(now, a.k)
	case resp.Tokens == 0 && resp.RetryAfter > 0:
		sh.p.DeniedAt(now, a.k, resp.RetryAfter, resp.Seq)
	default:
		sh.p.GrantedAt(now, a.sent, a.k, resp.Tokens, resp.TTL, resp.Seq)
	}
}

// returnIdle returns the allotments that saw no take for a while, and
// forgets spent ones.
func (e *Engine) returnIdle(ctx context.Context) {
	now := e.now()
	for i := range e.purses.shards {
		sh := &e.purses.shards[i]
		sh.mu.Lock()
		rs := takeBack(now, sh.p, sh.p.IdleAt(now))
		sh.mu.Unlock()
		e.giveBack(ctx, rs)
	}
}

// ReturnAll gives every allotment this node holds back to its owner, as
// it leaves or shuts down, within ctx.
func (e *Engine) ReturnAll(ctx context.Context) {
	now := e.now()
	for i := range e.purses.shards {
		sh := &e.purses.shards[i]
		sh.mu.Lock()
		rs := takeBack(now, sh.p, sh.p.Keys())
		sh.mu.Unlock()
		e.giveBack(ctx, rs)
	}
}

// takeBack takes keys' allotments out of use in p and returns what to
// give back of them. The caller holds p's lock.
func takeBack(now time.Time, p *allot.Purse, keys []allot.Key) []api.ReturnRequest {
	var out []api.ReturnRequest
	for _, k := range keys {
		if unspent, seq := p.Return(now, k); unspent > 0 {
			out = append(out, api.ReturnRequest{Limit: k.Limit, Key: k.Key, Unspent: unspent, Seq: seq})
		}
	}
	return out
}

// giveBack returns unspent tokens to their owners, best effort: tokens an
// owner never gets back are lost, the safe side.
func (e *Engine) giveBack(ctx context.Context, rs []api.ReturnRequest) {
	for _, r := range rs {
		e.hm.returns.Inc()
		r.Holder = e.holder
		switch p := e.router.Place(r.Limit, r.Key); {
		case p.DecidesHere():
			_ = e.ServeReturn(r)
		case p.Kind == placement.Forward:
			_ = e.peers.Return(ctx, p.Addr, r)
		}
	}
}
