package engine

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/weir-rl/weir/allot"
	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/node/limits"
	"github.com/weir-rl/weir/node/placement"
)

// This file is the owner's steps on allotments: grant (with refresh and
// denial), the undo of a grant its successor never confirmed, and return.

// grant is one ServeAllot step as made, for its undo: the holding before
// and the one recorded, and the tokens debited for it.
type grant struct {
	k           allot.Key
	l           bucket.Limit
	before      allot.Holding // before.Holder empty: there was none
	after       allot.Holding
	tokens      int64
	trustedLeft int64 // the holder's unspent tokens, as trusted
}

// ServeAllot is the owner's step for an allotment, once the cluster has
// placed (limit, key) here and fetched its state: it settles the bucket
// under the capacity in force, grants the holder its share of what the
// bucket holds (Doorman's proportional share by demand, at most Want and
// a quarter of capacity), debits it, and records the holding: the holder's
// unspent tokens plus the grant, until TTL from now, under a new Seq. The
// holder's Unspent is trusted only under the Seq of the holding recorded
// (else the whole holding stays outstanding). Before it answers, the key's
// successor gets the new state (Changes.Sync); when it cannot, the grant
// is undone and the ask fails as unavailable. An empty bucket is answered
// with RetryAfter: the time until one token. ErrNotOwner means the key was
// handed over meanwhile.
func (e *Engine) ServeAllot(ctx context.Context, req api.AllotRequest) (api.AllotResponse, error) {
	l, err := e.allotLimit(req.Limit)
	if err != nil {
		return api.AllotResponse{}, err
	}
	release, ok := e.router.Hold([]api.Check{{Limit: l.Name, Key: req.Key}})
	defer release()
	if !ok {
		return api.AllotResponse{}, ErrNotOwner
	}
	stripe := &e.ledger.locks[allotStripe(l.Name, req.Key)]
	stripe.Lock()
	g, resp, err := e.grantLocked(l, req)
	stripe.Unlock()
	if err != nil || g.after.Tokens == 0 {
		return resp, err
	}
	if err := e.changes.Sync(ctx, l.Name, req.Key); err != nil {
		stripe.Lock()
		e.undoGrant(g)
		stripe.Unlock()
		return api.AllotResponse{}, api.Errorf(api.CodeUnavailable, "the key's successor did not confirm the allotment: %v", err)
	}
	switch {
	case g.tokens > 0 && g.before.Holder != "":
		e.om.refreshes.Inc()
	case g.tokens > 0:
		e.om.grants.Inc()
	}
	return resp, nil
}

// grantLocked is ServeAllot's step under the key's stripe.
func (e *Engine) grantLocked(l *limits.Limit, req api.AllotRequest) (grant, api.AllotResponse, error) {
	now := e.now()
	k := allot.Key{Limit: l.Name, Key: req.Key}
	g := grant{k: k, l: l.Bucket}
	resp := api.AllotResponse{Capacity: l.Bucket.Capacity, Window: l.Bucket.PolicyWindow(), TTL: l.Allotments.TTL}
	c := e.capped(now, l.Name, req.Key, l.Bucket)
	bc := bucket.Check{Name: l.Name, Limit: c, Key: req.Key}
	avail, err := e.store.SettleAt(now, bc)
	if err != nil {
		return g, api.AllotResponse{}, settleError(err)
	}
	e.ledger.mu.Lock()
	before, had := e.ledger.l.Get(k, req.Holder)
	// Tokens other holders claimed are theirs when they come back; this
	// holder's own claim is its share now.
	claimed := e.ledger.l.TakeClaim(now, k, req.Holder)
	reserved := e.ledger.l.Claimed(now, k, req.Holder)
	free := avail - reserved
	share := max(e.ledger.l.Share(now, k, req.Holder, req.Demand, max(free, 0), allotWindow), claimed, min(free, 1))
	others := e.ledger.l.Outstanding(k) - before.Tokens
	e.ledger.mu.Unlock()
	if had {
		g.before = before
	}
	g.trustedLeft = before.Tokens
	if had && req.Seq == before.Seq {
		g.trustedLeft = min(max(req.Unspent, 0), before.Tokens)
	}
	// Holdings never take the whole capacity: the owner keeps a token of
	// it, so the capacity it decides by stays at least 1.
	room := l.Bucket.Capacity - 1 - others - g.trustedLeft
	g.tokens = max(0, min(req.Want, share, l.MaxAllotment(), room, free))
	if g.tokens > 0 {
		bc.Cost = g.tokens
		if _, ok, err := e.store.TakeAt(now, []bucket.Check{bc}, nil); err != nil || !ok {
			g.tokens = 0 // settled and held by the stripe, the take cannot fail: grant nothing if it does
		}
	}
	if g.tokens == 0 && free < 1 {
		resp.RetryAfter = e.claimLocked(now, k, l, req, avail, reserved, bc)
		e.om.denied.Inc()
	}
	g.after = allot.Holding{Holder: req.Holder, Tokens: g.trustedLeft + g.tokens, Expires: now.Add(l.Allotments.TTL), Demand: req.Demand, Seq: e.allotSeq.Add(1)}
	var full error
	err = e.rehold(now, k, l.Bucket, func(lg *allot.Ledger) { full = lg.Put(k, g.after) })
	if err == nil && full != nil {
		err = full
	}
	if err != nil {
		// No room to record it: give the grant back, change nothing.
		if g.tokens > 0 {
			bc.Cost = g.tokens
			e.store.RefundAt(now, []bucket.Check{bc})
		}
		return g, api.AllotResponse{}, api.Errorf(api.CodeOverloaded, "limiter_overloaded: no room for an allotment on this node")
	}
	e.changes.Bucket(l.Name, req.Key, now, bucket.State{}, false)
	resp.Tokens, resp.Seq = g.tokens, g.after.Seq
	if g.after.Tokens == 0 {
		g.after = allot.Holding{}
	}
	return g, resp, nil
}

// settleError is the answer to a bucket that could not be settled.
func settleError(err error) error {
	if errors.Is(err, bucket.ErrFull) {
		return api.Errorf(api.CodeOverloaded, "limiter_overloaded: no room for the bucket on this node")
	}
	return api.Errorf(api.CodeInvalid, "%v", err)
}

// claimLocked answers an ask that found no token free for the holder (the
// bucket empty, or what it holds claimed by others): it claims the
// holder's share of the refill over the limit's horizon (at least one
// token, at most an allotment) and returns how long the bucket takes to
// mint it on top of the claims before it, which the holder keeps as a
// denial and then asks again. Without the claim, an owner whose own
// demand exceeds the rate would spend every token as it is minted and
// starve its holders. A ledger with no room for the claim answers the
// time until one token, as without claims. The caller holds the key's
// stripe.
func (e *Engine) claimLocked(now time.Time, k allot.Key, l *limits.Limit, req api.AllotRequest, avail, reserved int64, bc bucket.Check) time.Duration {
	r := l.Bucket.Rate
	if r.N <= 0 || r.Per <= 0 {
		return e.untilOneToken(now, bc)
	}
	perSec := float64(r.N) / r.Per.Seconds()
	e.ledger.mu.Lock()
	f := e.ledger.l.Fraction(now, k, req.Holder, req.Demand, allotWindow)
	c := min(max(int64(f*perSec*l.Allotments.Horizon.Seconds()), 1), l.MaxAllotment())
	// Its part of the refill mints c in c / (f·rate); the bucket must hold
	// the claims before it too.
	deficit := float64(reserved + c - max(avail, 0))
	wait := max(float64(c)/(max(f, 1e-9)*perSec), deficit/perSec)
	retry := max(time.Duration(math.Ceil(wait*float64(time.Second))), time.Millisecond)
	retry = min(retry, l.Allotments.TTL)
	err := e.ledger.l.Claim(k, req.Holder, c, now.Add(retry+2*l.Allotments.Horizon))
	e.ledger.mu.Unlock()
	if err != nil {
		return e.untilOneToken(now, bc)
	}
	return retry
}

// untilOneToken is how long an empty bucket under c takes to hold one
// token: the retry-after of a denied ask. The take it asks is denied, so
// it changes nothing.
func (e *Engine) untilOneToken(now time.Time, c bucket.Check) time.Duration {
	c.Cost = 1
	if ds, ok, err := e.store.TakeAt(now, []bucket.Check{c}, nil); err == nil && !ok && len(ds) == 1 {
		return ds[0].RetryAfter
	}
	return 0
}

// undoGrant takes back a grant whose answer never left: the holding goes
// back to what the holder still has (its trusted unspent tokens, under the
// old expiry and Seq) and the grant's tokens back to the bucket. When a
// later step replaced the holding meanwhile, that step counted the grant
// as outstanding, the safe side: nothing is undone. The caller holds the
// key's stripe.
func (e *Engine) undoGrant(g grant) {
	now := e.now()
	e.ledger.mu.Lock()
	cur, ok := e.ledger.l.Get(g.k, g.after.Holder)
	e.ledger.mu.Unlock()
	if !ok || cur.Seq != g.after.Seq {
		return
	}
	e.capped(now, g.k.Limit, g.k.Key, g.l)
	restore := func(lg *allot.Ledger) { lg.Drop(g.k, g.after.Holder) }
	if g.before.Holder != "" {
		h := g.before
		h.Tokens = g.trustedLeft
		restore = func(lg *allot.Ledger) { _ = lg.Put(g.k, h) } // replaces a holding: never ErrFull
	}
	if err := e.rehold(now, g.k, g.l, restore); err != nil {
		return // no room to settle: the grant stays outstanding until it expires
	}
	if g.tokens > 0 {
		e.store.RefundAt(now, []bucket.Check{{Name: g.k.Limit, Limit: e.cappedNow(g.k, g.l), Key: g.k.Key, Cost: g.tokens}})
	}
	e.changes.Bucket(g.k.Limit, g.k.Key, now, bucket.State{}, false)
}

// ServeReturn takes an allotment back at its owner: it drops the holding
// (materializing the bucket around the change, see rehold) and refunds
// the holder's unspent tokens, at most what it held, capped at the
// capacity in force after. A return whose Seq is not the holding's (it
// crossed a later grant) or of what is not held changes nothing.
func (e *Engine) ServeReturn(req api.ReturnRequest) error {
	l, err := e.allotLimit(req.Limit)
	if err != nil {
		return err
	}
	release, _ := e.router.Hold([]api.Check{{Limit: l.Name, Key: req.Key}})
	defer release()
	stripe := &e.ledger.locks[allotStripe(l.Name, req.Key)]
	stripe.Lock()
	defer stripe.Unlock()
	now := e.now()
	e.capped(now, l.Name, req.Key, l.Bucket)
	k := allot.Key{Limit: l.Name, Key: req.Key}
	e.ledger.mu.Lock()
	h, ok := e.ledger.l.Get(k, req.Holder)
	e.ledger.mu.Unlock()
	if !ok || h.Seq != req.Seq {
		return nil
	}
	if err := e.rehold(now, k, l.Bucket, func(lg *allot.Ledger) { lg.Drop(k, req.Holder) }); err != nil {
		return settleError(err)
	}
	if u := min(max(req.Unspent, 0), h.Tokens); u > 0 {
		e.store.RefundAt(now, []bucket.Check{{Name: l.Name, Limit: e.cappedNow(k, l.Bucket), Key: req.Key, Cost: u}})
	}
	e.om.returns.Inc()
	e.changes.Bucket(l.Name, req.Key, now, bucket.State{}, false)
	return nil
}

// clientHolder is the owner ledger's name of a client holder: its id,
// prefixed so that no client can name a node's holdings.
func clientHolder(id string) string { return "client:" + id }

// Allot grants an allotment to a caller (api.Decider.Allot): here when
// this node owns the key, else at its owner. The caller's holder id is
// recorded as a client's (clientHolder).
func (e *Engine) Allot(ctx context.Context, req api.AllotRequest) (api.AllotResponse, error) {
	if err := api.ValidateAllot(req.Limit, req.Key, req.Holder, req.Want, req.Demand, req.Unspent, e.maxKey); err != nil {
		return api.AllotResponse{}, err
	}
	req.Holder = clientHolder(req.Holder)
	l, err := e.allotLimit(req.Limit)
	if err != nil {
		return api.AllotResponse{}, err
	}
	req.Limit = l.Name
	p := e.router.Place(l.Name, req.Key)
	switch {
	case p.DecidesHere() && e.router.Prepare(ctx, []api.Check{{Limit: l.Name, Key: req.Key}}, false, e.held) == nil:
		return e.ServeAllot(ctx, req)
	case p.Kind == placement.Forward:
		resp, err := e.peers.Allot(ctx, p.Addr, req)
		if errors.Is(err, ErrOwnerLate) {
			return api.AllotResponse{}, errOverloaded(l.Name)
		}
		return resp, err
	}
	return api.AllotResponse{}, api.Errorf(api.CodeUnavailable, "the owner of the key is unreachable: no allotment")
}

// Return gives an allotment back (api.Decider.Return): here when this
// node owns the key, else at its owner. An owner that cannot be reached
// keeps the holding until it expires (the tokens are lost, the safe side).
func (e *Engine) Return(ctx context.Context, req api.ReturnRequest) error {
	if err := api.ValidateAllot(req.Limit, req.Key, req.Holder, 1, 0, req.Unspent, e.maxKey); err != nil {
		return err
	}
	req.Holder = clientHolder(req.Holder)
	l, err := e.allotLimit(req.Limit)
	if err != nil {
		return err
	}
	req.Limit = l.Name
	switch p := e.router.Place(l.Name, req.Key); {
	case p.DecidesHere():
		return e.ServeReturn(req)
	case p.Kind == placement.Forward:
		return e.peers.Return(ctx, p.Addr, req)
	}
	return api.Errorf(api.CodeUnavailable, "the owner of the key is unreachable: the allotment expires by itself")
}
