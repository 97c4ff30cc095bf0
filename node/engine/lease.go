package engine

import (
	"context"
	"errors"
	"time"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/node/limits"
	"github.com/weir-rl/weir/node/placement"
)

// Acquire asks for a concurrency permit: at the key's owner (this node, or
// forwarded there), or from a local ceiling when the owner is unreachable,
// by the limit's on_owner_unreachable policy.
func (e *Engine) Acquire(ctx context.Context, req api.AcquireRequest) (api.AcquireResponse, error) {
	start := time.Now()
	defer func() { e.m.latency.WithLabelValues("acquire").Observe(time.Since(start).Seconds()) }()
	f := e.limits()
	l, err := e.validateAcquire(f, req)
	if err != nil {
		return api.AcquireResponse{}, err
	}
	var resp api.AcquireResponse
	forwarded := false
	switch p := e.router.PlaceLease(l.Name, req.Key); {
	case p.DecidesHere():
		resp, err = e.acquireOwned(ctx, l, req, p)
	case p.Kind == placement.Forward:
		fwd := req
		fwd.Limit = l.Name // an alias is forwarded as the limit it names
		resp, err = e.peers.Acquire(ctx, p.Addr, fwd)
		forwarded = err == nil
		_, semantic := errors.AsType[*api.Error](err)
		switch {
		case err == nil || semantic:
		case ownerLate(err, e.router.PlaceLease(l.Name, req.Key)):
			resp, err = e.acquireLate(ctx, l, req)
		default:
			resp, err = e.acquireFallback(ctx, l, req)
		}
	default:
		resp, err = e.acquireFallback(ctx, l, req)
	}
	resp.RulesVersion = f.Version
	resp.Forwarded = forwarded && resp.Source == api.SourceOwner
	return resp, err
}

// acquireOwned grants at this node, which decides the key (placed p).
// Right after a ring change the previous owner may still hold the key's
// leases (a restarted owner before they are handed back): they are pulled
// first, once per view change. Whether this table already holds leases of
// the key proves nothing (it may have granted some from its own partial
// state), so only the pull's own record counts. A key taken over after its
// owner failed starts from the replica of its leases. Inside a takeover
// window (Router.LeaseCeiling) it grants only up to a local share, or
// nothing for strict limits.
func (e *Engine) acquireOwned(ctx context.Context, l *limits.Limit, req api.AcquireRequest, p placement.Placement) (api.AcquireResponse, error) {
	if err := e.router.Prepare(ctx, []api.Check{{Limit: l.Name, Key: req.Key}}, p.Kind == placement.Replica, pulledOnly); err != nil {
		if errors.Is(err, ErrOwnerLate) {
			return e.acquireLate(ctx, l, req)
		}
		return e.acquireFallback(ctx, l, req)
	}
	if left, known, ok := e.router.LeaseCeiling(l.Name, req.Key, l.MaxLeaseTTL); ok {
		if l.Strict {
			e.m.denials.WithLabelValues(l.Name, denialConcurrency).Inc()
			return api.AcquireResponse{Permits: l.Permits, RetryAfter: left, Source: api.SourceOwner}, nil
		}
		shared := *l
		shared.Permits = max(1, l.Permits/int64(known))
		return e.leases.acquire(ctx, &shared, req)
	}
	return e.leases.acquire(ctx, l, req)
}

// pulledOnly is the "holds the key" test of lease pulls: never, so that
// only the pull's record of the view change decides (see acquireOwned).
func pulledOnly(string, string) bool { return false }

// acquireFallback decides an acquire whose owner is unreachable, by the
// limit's on_owner_unreachable policy.
func (e *Engine) acquireFallback(ctx context.Context, l *limits.Limit, req api.AcquireRequest) (api.AcquireResponse, error) {
	switch l.OnOwnerUnreachable {
	case limits.PolicyClosed:
		e.m.denials.WithLabelValues(l.Name, denialError).Inc()
		return api.AcquireResponse{}, api.Errorf(api.CodeUnavailable, "limit %q fails closed and its owner is unreachable", l.Name)
	case limits.PolicyOpen:
		open := *l
		open.Permits = 1 << 40 // open: effectively unbounded, still tracked for renew and release
		resp, err := e.fallbackLeases.acquire(ctx, &open, req)
		resp.Source, resp.Permits = api.SourceFallback, l.Permits
		return resp, err
	}
	share := *l
	share.Permits = max(1, l.Permits/int64(e.router.Known()))
	resp, err := e.fallbackLeases.acquire(ctx, &share, req)
	resp.Source = api.SourceFallback
	return resp, err
}

// Renew extends a lease. A lease granted from a local ceiling is renewed
// where it was granted, until its owner answers again; others at the
// key's owner. An expired or unknown lease is CodeNotFound.
func (e *Engine) Renew(ctx context.Context, id string, ttl time.Duration) (time.Duration, error) {
	if ttl < 0 {
		return 0, api.Errorf(api.CodeInvalid, "ttl must not be negative")
	}
	l, key, err := leaseLimit(e.limits(), id)
	if err != nil {
		return 0, err
	}
	p := e.router.PlaceLease(l.Name, key)
	if e.fallbackLeases.holds(id) {
		if p.Kind == placement.Here || (p.Kind == placement.Forward && e.peers.Reachable(ctx, p.Addr)) {
			// Granted from a local ceiling while the owner was unreachable;
			// now that it answers again, only the owner's permits count.
			// The holder must acquire again there.
			e.fallbackLeases.release(id)
			return 0, api.Errorf(api.CodeNotFound, "lease was granted from a local ceiling and the owner is reachable again: acquire anew")
		}
		return e.fallbackLeases.renew(l, id, ttl)
	}
	switch {
	case p.DecidesHere():
		return e.leases.renew(l, id, ttl)
	case p.Kind == placement.Forward:
		return e.peers.Renew(ctx, p.Addr, id, ttl)
	default:
		return 0, api.Errorf(api.CodeUnavailable, "lease owner unreachable")
	}
}

// Release gives a lease back. Releasing what is not held is not an error;
// an unreachable owner is, since the permit stays held until it expires.
func (e *Engine) Release(ctx context.Context, id string) error {
	l, key, err := leaseLimit(e.limits(), id)
	if err != nil {
		if apiErr, ok := errors.AsType[*api.Error](err); ok && apiErr.Code == api.CodeNotFound {
			return nil
		}
		return err
	}
	if e.fallbackLeases.holds(id) {
		e.fallbackLeases.release(id) // granted here from a local ceiling
		return nil
	}
	switch p := e.router.PlaceLease(l.Name, key); {
	case p.DecidesHere():
		e.leases.release(id)
		return nil
	case p.Kind == placement.Forward:
		return e.peers.Release(ctx, p.Addr, id)
	default:
		return api.Errorf(api.CodeUnavailable, "lease owner unreachable; the lease expires by itself")
	}
}

// ServeAcquire is the owner's side of an acquire a peer forwarded here,
// once the cluster has checked that this node serves the key.
func (e *Engine) ServeAcquire(ctx context.Context, req api.AcquireRequest) (api.AcquireResponse, error) {
	l, err := e.validateAcquire(e.limits(), req)
	if err != nil {
		return api.AcquireResponse{}, err
	}
	return e.acquireOwned(ctx, l, req, e.router.PlaceLease(l.Name, req.Key))
}

// ServeRenew is the owner's side of a renew a peer forwarded here.
func (e *Engine) ServeRenew(id string, ttl time.Duration) (time.Duration, error) {
	l, _, err := leaseLimit(e.limits(), id)
	if err != nil {
		return 0, err
	}
	return e.leases.renew(l, id, ttl)
}

// ServeRelease is the owner's side of a release a peer forwarded here;
// releasing what is not held is not an error.
func (e *Engine) ServeRelease(id string) { e.leases.release(id) }
