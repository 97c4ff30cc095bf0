package engine

import (
	"errors"
	"slices"
	"time"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/node/limits"
)

// errHandedOver is an owner step refused because one of its keys was
// handed over since the step was placed here (Router.Hold).
var errHandedOver = errors.New("engine: a key was handed over while its step was routed here")

// ownerTakeOnce is ownerTake deduplicated by the caller's request id (""
// for none): the owner's answer to a retried take is its first decision.
// A take with an id is always a request's only step, so its spend is never
// recorded. tn is the caller's tenant (api.TenantFrom), whose new buckets
// count against its quota. into is as for ownerTake.
func (e *Engine) ownerTakeOnce(f *limits.File, checks []api.Check, id string, tn api.Tenant, sp *Spend, into []api.Result) ([]api.Result, bool, error) {
	if id == "" {
		return e.ownerTake(f, checks, tn, sp, into)
	}
	return e.dedup.once(e.now(), id, checks, func() ([]api.Result, bool, error) {
		return e.ownerTake(f, checks, tn, nil, into)
	})
}

// storeTenant is the store's view of a caller's tenant.
func storeTenant(tn api.Tenant) bucket.Tenant {
	return bucket.Tenant{Prefix: tn.Prefix, Max: tn.MaxBuckets}
}

// ownerTake is the owner's atomic step for checks it decides: the enforced
// checks are spent together or not at all; shadow checks are decided one
// by one, counted, and reported as allowed. Peers' forwarded steps run
// here too. With sp, it records in *sp the enforced debits when the step
// admitted them. (Spends travel by pointer on the decision path: returned
// by value through every frame, they grew the stack of a gRPC handler past
// its first size.) The results are written into into when it holds one
// per check (the request's own results, for its only step; the caller
// must not read them after an error), else into a new slice.
func (e *Engine) ownerTake(f *limits.File, checks []api.Check, tn api.Tenant, sp *Spend, into []api.Result) ([]api.Result, bool, error) {
	// One frame, with the key hold released by hand on every path: the
	// decision path runs on the caller's goroutine (a gRPC handler's, which
	// starts small), and a deeper stack there costs a stack copy per call.
	release, ok := e.router.Hold(checks)
	if !ok {
		release()
		return nil, false, errHandedOver
	}
	now := e.now()
	out := into
	if len(out) != len(checks) {
		out = make([]api.Result, len(checks))
	}
	// Requests rarely carry more than a few checks: keep the step's
	// working slices on the stack for up to four.
	var (
		bcBuf  [4]bucket.Check
		idxBuf [4]int
		limBuf [4]*limits.Limit
		decBuf [4]bucket.Decision
	)
	enforced, enforcedIdx, enforcedLim := bcBuf[:0], idxBuf[:0], limBuf[:0]
	for i, c := range checks {
		l, err := e.resolve(f, i, c)
		if err == nil && l.Kind != limits.KindRate {
			err = api.Errorf(api.CodeInvalid, "checks[%d]: limit %q is a concurrency limit: acquire a lease instead", i, c.Limit)
		}
		if err != nil {
			release()
			return nil, false, err
		}
		bc := bucket.Check{Name: l.Name, Limit: l.Bucket, Key: c.Key, Cost: c.Cost, Carry: l.Inline}
		if l.Shadow {
			out[i] = e.shadowTake(now, l, bc, storeTenant(tn))
			continue
		}
		enforced = append(enforced, bc)
		enforcedIdx = append(enforcedIdx, i)
		enforcedLim = append(enforcedLim, l)
	}
	if len(enforced) == 0 {
		release()
		return out, true, nil
	}
	unlock := e.lockAllotted(enforced, enforcedLim)
	var ds []bucket.Decision
	var err error
	if e.capAllotted(now, enforced, enforcedLim) {
		ds, ok, err = e.takeLeavingClaims(now, storeTenant(tn), enforced, enforcedLim, decBuf[:0])
	} else {
		ds, ok = unfit(enforced, enforcedLim, decBuf[:0]), false
	}
	if err == nil {
		e.ownerDemand(now, enforced, enforcedLim)
	}
	unlock()
	switch {
	case errors.Is(err, bucket.ErrFull):
		out, ok, err = e.overloaded(f, checks)
	case errors.Is(err, bucket.ErrTenantFull):
		out, ok, err = nil, false, e.quotaError(f, checks, tn)
	case err != nil:
		out, ok, err = nil, false, api.Errorf(api.CodeInvalid, "%v", err)
	default:
		for j, i := range enforcedIdx {
			out[i] = e.result(enforcedLim[j], ds[j], api.SourceOwner, now)
			// An allotted key decides by a capacity the allotments reduce;
			// the limit's capacity is still the whole bucket's.
			out[i].Capacity = enforcedLim[j].Bucket.Capacity
		}
		if ok {
			e.touchedAt(now, enforced, ds)
			if sp != nil {
				*sp = Spend{Where: Owner, Debits: slices.Clone(enforced)}
			}
		}
	}
	release()
	return out, ok, err
}

// shadowTake decides a shadow limit's check alone and reports it allowed.
func (e *Engine) shadowTake(now time.Time, l *limits.Limit, bc bucket.Check, tn bucket.Tenant) api.Result {
	ds, _, err := e.store.TakeTenantAt(now, tn, []bucket.Check{bc}, nil)
	if err != nil || !ds[0].Allowed {
		e.m.decisions.WithLabelValues(metricName(l), "shadow_denied", api.SourceOwner.String()).Inc()
	}
	if err != nil {
		return api.Result{Limit: l.Name, Allowed: true, Capacity: l.Bucket.Capacity, Remaining: l.Bucket.Capacity, Window: l.Bucket.PolicyWindow()}
	}
	r := e.result(l, ds[0], api.SourceOwner, now)
	r.Allowed, r.RetryAfter = true, 0
	return r
}

// overloaded answers a step the store could not take because it is at its
// bucket cap with nothing evictable (docs/architecture.md §8.3): open
// limits allow, others answer limiter_overloaded. No state is created
// either way.
func (e *Engine) overloaded(f *limits.File, checks []api.Check) ([]api.Result, bool, error) {
	out := make([]api.Result, len(checks))
	for i, c := range checks {
		l, err := e.resolve(f, i, c)
		if err != nil {
			return nil, false, err
		}
		if l.OnOwnerUnreachable != limits.PolicyOpen {
			e.m.denials.WithLabelValues(metricName(l), denialError).Inc()
			return nil, false, api.Errorf(api.CodeOverloaded, "limiter_overloaded: bucket cap reached on this node")
		}
		out[i] = api.Result{Limit: l.Name, Allowed: true, Capacity: l.Bucket.Capacity, Remaining: l.Bucket.Capacity, Window: l.Bucket.PolicyWindow()}
	}
	return out, true, nil
}

// quotaError is the refusal of a step that would create a bucket past its
// tenant's quota (bucket.ErrTenantFull), counted as an error of each
// check's limit. Nothing was spent, created or evicted.
func (e *Engine) quotaError(f *limits.File, checks []api.Check, tn api.Tenant) error {
	for i, c := range checks {
		if l, err := e.resolve(f, i, c); err == nil {
			e.m.denials.WithLabelValues(metricName(l), denialQuota).Inc()
		}
	}
	return api.Errorf(api.CodeQuota, "tenant_quota: the keys of this caller's key prefix hold its max_buckets (%d) live buckets "+
		"at this key's owner: a new key is refused until some of them refill and are swept; existing keys keep working", tn.MaxBuckets)
}

// touchedAt tells the replication stream that the owner buckets of checks
// changed at now: by the admitted take whose decisions ds are (each with
// the state it left), or, when ds is nil, otherwise (state unknown). A
// peek (cost 0) changed nothing.
func (e *Engine) touchedAt(now time.Time, checks []bucket.Check, ds []bucket.Decision) {
	for i, c := range checks {
		if c.Cost == 0 {
			continue
		}
		var after bucket.State
		if ds != nil {
			after = ds[i].State
		}
		e.changes.Bucket(c.Name, c.Key, now, after, c.Carry)
	}
}

// result turns a bucket decision taken at now into an API result with its
// evidence.
func (e *Engine) result(l *limits.Limit, d bucket.Decision, src api.Source, now time.Time) api.Result {
	return api.Result{
		Evidence:   api.Evidence{Run: e.run, DecidedAt: now, Bucket: d.Instance, Fallback: src == api.SourceFallback},
		Limit:      l.Name,
		Allowed:    d.Allowed,
		Remaining:  d.Remaining,
		Capacity:   d.Limit,
		RetryAfter: d.RetryAfter,
		ResetAfter: d.ResetAfter,
		Source:     src,
		Window:     l.Bucket.PolicyWindow(),
	}
}

// ServeTake is the owner's step for a take a peer forwarded here, once the
// cluster has placed it here (and fetched any state it needed):
// deduplicated by the caller's request id ("" for none), its new buckets
// counted for the sender's caller tenant tn. ErrNotOwner means a key was
// handed over meanwhile; semantic errors are *api.Error.
func (e *Engine) ServeTake(checks []api.Check, id string, tn api.Tenant) ([]api.Result, bool, error) {
	out, ok, err := e.ownerTakeOnce(e.limits(), checks, id, tn, nil, nil)
	if errors.Is(err, errHandedOver) {
		return nil, false, ErrNotOwner
	}
	return out, ok, err
}

// ServeRefund gives back what a take a peer forwarded here spent: each
// check's cost, to its bucket under the limits in force, capped at
// capacity. Checks that name no rate limit, and shadow checks, give back
// nothing.
func (e *Engine) ServeRefund(checks []api.Check) {
	f := e.limits()
	var bcs []bucket.Check
	var lims []*limits.Limit
	for i, ch := range checks {
		if l, err := e.resolve(f, i, ch); err == nil && l.Kind == limits.KindRate && !l.Shadow {
			bcs = append(bcs, bucket.Check{Name: l.Name, Limit: l.Bucket, Key: ch.Key, Cost: ch.Cost})
			lims = append(lims, l)
		}
	}
	now := e.now()
	unlock := e.lockAllotted(bcs, lims)
	e.capAllotted(now, bcs, lims)
	e.store.RefundAt(now, bcs)
	unlock()
	e.touchedAt(now, bcs, nil) // the successor's replica must see the refund too
}
