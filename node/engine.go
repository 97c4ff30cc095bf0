package node

import (
	"context"
	"errors"
	"time"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/node/limits"
	"github.com/weir-rl/weir/node/placement"
)

// router is what the engine needs of the cluster. A nil router is a cluster
// of one: this node owns every key.
type router interface {
	// place says where (limit, key) is decided: here, at a peer, or from
	// a local ceiling (placement.Snapshot.Take).
	place(limit, key string) placement.Placement
	// pull fetches the state of keys this node owns but does not hold
	// (has reports false) after a ring change, before it decides them;
	// false means a needed state could not be fetched and the checks must
	// not be decided from fresh buckets.
	// With adopt, a key it holds no state for starts from its replica.
	pull(ctx context.Context, checks []api.Check, from string, has func(limit, key string) bool, adopt bool) bool
	// hold keeps the checks' keys from being handed over until release is
	// called, and reports whether this node may still decide them (false:
	// one was handed over since it was routed here).
	hold(checks []api.Check) (release func(), ok bool)
	// known is the number of known members (alive or failed), at least 1;
	// local ceilings divide a limit by it.
	known() int
	// forward runs one atomic step at a peer. An error means the owner is
	// unreachable; semantic errors come back inside the reply.
	forward(ctx context.Context, peer string, op forwardOp, checks []api.Check) ([]api.Result, bool, error)
}

// forwardOp is a step forwarded to an owner.
type forwardOp uint8

const (
	opTake forwardOp = iota
	opRefund
)

// engine is the decision engine: the one place that decides "local, forward
// or fallback" for every check. It is safe for concurrent use; the stores
// lock their own shards.
type engine struct {
	now      func() time.Time
	limits   func() *limits.File
	store    *bucket.Store // buckets this node owns
	fallback *bucket.Store // local ceilings for keys whose owner is unreachable
	m        *metrics
	hot      *hotKeys    // cost asked per (limit, key), counted where requests arrive
	counters hotCounters // m's take-path children, per limit
	// dedup remembers recent request ids (nil: none are remembered).
	dedup *takeDedup
	// router is nil in a cluster of one. Start sets it, through
	// setRouter, before any listener serves, and it never changes after.
	router router
	// changed, when set, is told of every owner bucket a decision or a
	// refund changed (the replication stream); set with router.
	changed func(limit, key string, now time.Time)
	// maxKey is the longest key a caller may send, in bytes: the one
	// bound every surface applies (Config.HTTP.MaxKeyBytes).
	maxKey int
	// run names this node run in evidence: the node's name and a random
	// boot nonce, so instances never repeat across restarts.
	run string
	// inline remembers validated inline limits (see resolve).
	inline inlineCache
}

// touched tells the replication stream that the owner buckets of checks
// changed.
func (e *engine) touched(checks []bucket.Check) {
	if e.changed == nil {
		return
	}
	now := e.now()
	for _, c := range checks {
		e.changed(c.Name, c.Key, now)
	}
}

// setRouter plugs the cluster in. Called once, by Start, before any
// listener serves.
func (e *engine) setRouter(r router, changed func(limit, key string, now time.Time)) {
	e.router, e.changed = r, changed
}

// known is the number of members a local ceiling divides a limit by: one
// in a cluster of one.
func (e *engine) known() int {
	if e.router == nil {
		return 1
	}
	return e.router.known()
}

// resolved is a validated check with its limit looked up.
type resolved struct {
	check api.Check
	limit *limits.Limit
}

// validate looks every check up in f and rejects bad input before any state
// is touched, so a bad request changes nothing.
func (e *engine) validate(f *limits.File, checks []api.Check) ([]resolved, error) {
	if len(checks) == 0 {
		return nil, api.Errorf(api.CodeInvalid, "checks: empty list")
	}
	out := make([]resolved, len(checks))
	for i, c := range checks {
		if c.Limit == "" {
			return nil, api.Errorf(api.CodeInvalid, "checks[%d]: empty limit name", i)
		}
		l, err := e.resolve(f, i, c)
		switch {
		case err != nil:
			return nil, err
		case l.Kind != limits.KindRate:
			return nil, api.Errorf(api.CodeInvalid, "checks[%d]: limit %q is a concurrency limit: acquire a lease instead", i, c.Limit)
		case c.Key == "":
			return nil, api.Errorf(api.CodeInvalid, "checks[%d]: empty key", i)
		case len(c.Key) > e.maxKey:
			return nil, api.Errorf(api.CodeInvalid, "checks[%d]: key longer than %d bytes", i, e.maxKey)
		case c.Cost < 1:
			return nil, api.Errorf(api.CodeInvalid, "checks[%d]: cost %d must be at least 1", i, c.Cost)
		case c.Cost > l.Bucket.Capacity:
			return nil, api.Errorf(api.CodeInvalid, "checks[%d]: cost %d exceeds capacity %d of limit %q", i, c.Cost, l.Bucket.Capacity, c.Limit)
		}
		out[i] = resolved{check: c, limit: l}
	}
	return out, nil
}

// group is the checks of one request that share a placement.
type group struct {
	place placement.Placement
	idx   []int // positions in the request
	spent bool  // the group's step admitted (and so spent) its checks
	src   api.Source
	// one backs idx for a single check, so a one-check request allocates
	// its group once.
	one [1]int
}

// groupKey is what checks must share to be one atomic step.
type groupKey struct {
	kind placement.Kind
	peer string
}

// take decides a multi-check request: all checks are spent or none is.
func (e *engine) take(ctx context.Context, checks []api.Check) (api.TakeResponse, error) {
	f := e.limits()
	rs, err := e.validate(f, checks)
	if err != nil {
		return api.TakeResponse{}, err
	}
	groups := e.split(rs)
	results := make([]api.Result, len(rs))
	allowed := true
	// A request id deduplicates only a take with one owner: replaying one
	// group of several while another is refunded again would mint tokens.
	id := ""
	if len(groups) == 1 {
		id = api.RequestID(ctx)
	} else if api.RequestID(ctx) != "" {
		ctx = api.WithoutRequestID(ctx)
	}
	for gi := range groups {
		g := &groups[gi]
		var all []api.Check // a lone group is the whole request, in order
		if len(groups) == 1 {
			all = checks
		}
		ok, err := e.decideGroup(ctx, f, rs, g, results, id, all)
		if err != nil {
			e.refund(ctx, rs, groups)
			return api.TakeResponse{}, err
		}
		g.spent = ok
		if !ok {
			allowed = false
			break // nothing later needs spending: the request is denied
		}
	}
	if !allowed {
		e.refund(ctx, rs, groups)
	}
	return e.respond(f, rs, groups, results, allowed), nil
}

// split groups checks by owner, keeping request order inside each group.
func (e *engine) split(rs []resolved) []group {
	if e.router == nil {
		groups := []group{{place: placement.Placement{Kind: placement.Here}}}
		g := &groups[0]
		g.idx = g.one[:]
		if len(rs) > 1 {
			g.idx = make([]int, len(rs))
		}
		for i := range rs {
			g.idx[i] = i
		}
		return groups
	}
	var groups []group
	byKey := map[groupKey]int{}
	for i, r := range rs {
		p := e.router.place(r.check.Limit, r.check.Key)
		k := groupKey{kind: p.Kind}
		if p.Kind == placement.Forward {
			k.peer = p.Addr
		}
		gi, seen := byKey[k]
		if !seen {
			gi = len(groups)
			byKey[k] = gi
			groups = append(groups, group{place: p})
		}
		groups[gi].idx = append(groups[gi].idx, i)
	}
	return groups
}

// decideGroup runs one atomic step for g: at this node if it owns the keys,
// at the owner otherwise, and from local ceilings when the owner cannot be
// reached. It fills results for g's checks. id is the caller's request id
// ("" for none), deduplicated by the owner. all, when not nil, is g's
// checks in g's order (the request itself, when g is its only group), and
// is not modified.
func (e *engine) decideGroup(ctx context.Context, f *limits.File, rs []resolved, g *group, results []api.Result, id string, all []api.Check) (bool, error) {
	checks := all
	if checks == nil {
		checks = make([]api.Check, len(g.idx))
		for j, i := range g.idx {
			checks[j] = rs[i].check
		}
	}
	here := g.place.Kind == placement.Here || g.place.Kind == placement.Replica
	if here && (e.router == nil || e.router.pull(ctx, checks, "", e.store.Has, g.place.Kind == placement.Replica)) {
		g.src = api.SourceOwner
		out, ok, err := e.ownerTakeOnce(f, checks, id)
		if errors.Is(err, errNotOwner) {
			// Handed over while it was routed here: ask the new owner.
			if p := e.router.place(checks[0].Limit, checks[0].Key); p.Kind == placement.Forward {
				g.place = p
				return e.decideGroup(ctx, f, rs, g, results, id, all)
			}
			g.src = api.SourceFallback
			return e.fallbackTake(f, rs, g, results)
		}
		if err != nil {
			return false, err
		}
		for j, i := range g.idx {
			results[i] = out[j]
		}
		return ok, nil
	}
	if g.place.Kind == placement.Forward {
		out, ok, err := e.router.forward(ctx, g.place.Addr, opTake, checks)
		var apiErr *api.Error
		if errors.As(err, &apiErr) {
			return false, err
		}
		if err == nil {
			g.src = api.SourceOwner
			for j, i := range g.idx {
				results[i] = out[j]
			}
			return ok, nil
		}
	}
	g.src = api.SourceFallback
	return e.fallbackTake(f, rs, g, results)
}

// ownerTake is the owner's atomic step for checks it owns: the enforced
// checks are spent together or not at all; shadow checks are decided one by
// one, counted, and reported as allowed. Peers' forwarded steps run here too.
func (e *engine) ownerTake(f *limits.File, checks []api.Check) ([]api.Result, bool, error) {
	if e.router != nil {
		release, ok := e.router.hold(checks)
		defer release()
		if !ok {
			return nil, false, errNotOwner
		}
	}
	now := e.now()
	out := make([]api.Result, len(checks))
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
		if err != nil {
			return nil, false, err
		}
		if l.Kind != limits.KindRate {
			return nil, false, api.Errorf(api.CodeInvalid, "checks[%d]: limit %q is a concurrency limit: acquire a lease instead", i, c.Limit)
		}
		bc := bucket.Check{Name: l.Name, Limit: l.Bucket, Key: c.Key, Cost: c.Cost}
		if l.Shadow {
			out[i] = e.shadowTake(now, l, bc)
			continue
		}
		enforced = append(enforced, bc)
		enforcedIdx = append(enforcedIdx, i)
		enforcedLim = append(enforcedLim, l)
	}
	if len(enforced) == 0 {
		return out, true, nil
	}
	ds, ok, err := e.store.TakeAt(now, enforced, decBuf[:0])
	if errors.Is(err, bucket.ErrFull) {
		return e.overloaded(f, checks)
	}
	if err != nil {
		return nil, false, api.Errorf(api.CodeInvalid, "%v", err)
	}
	for j, i := range enforcedIdx {
		out[i] = e.result(enforcedLim[j], ds[j], api.SourceOwner, now)
	}
	if ok {
		e.touched(enforced)
	}
	return out, ok, nil
}

// shadowTake decides a shadow limit's check alone and reports it allowed.
func (e *engine) shadowTake(now time.Time, l *limits.Limit, bc bucket.Check) api.Result {
	ds, _, err := e.store.TakeAt(now, []bucket.Check{bc}, nil)
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
// bucket cap with nothing evictable (docs/architecture.md §8.3): open limits allow, others
// answer limiter_overloaded. No state is created either way.
func (e *engine) overloaded(f *limits.File, checks []api.Check) ([]api.Result, bool, error) {
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

// fallbackTake decides g's checks from local ceilings by each limit's
// on_owner_unreachable policy. Any closed limit fails the whole request.
func (e *engine) fallbackTake(f *limits.File, rs []resolved, g *group, results []api.Result) (bool, error) {
	now := e.now()
	known := e.known()
	var local []bucket.Check
	var localIdx []int
	denied := false
	for _, i := range g.idx {
		l := rs[i].limit
		switch l.OnOwnerUnreachable {
		case limits.PolicyClosed:
			e.m.denials.WithLabelValues(metricName(l), denialError).Inc()
			return false, api.Errorf(api.CodeUnavailable, "limit %q fails closed and its owner is unreachable", l.Name)
		case limits.PolicyOpen:
			results[i] = api.Result{
				Limit: l.Name, Allowed: true, Capacity: l.Bucket.Capacity, Remaining: l.Bucket.Capacity,
				Window: l.Bucket.PolicyWindow(), Source: api.SourceFallback,
			}
		default:
			share := l.Bucket.Scale(known)
			if rs[i].check.Cost > share.Capacity {
				// The cost can never fit this node's share: deny rather
				// than let one request take more than a share.
				results[i] = api.Result{
					Limit: l.Name, Capacity: share.Capacity, RetryAfter: share.PolicyWindow(),
					ResetAfter: share.PolicyWindow(), Window: share.PolicyWindow(), Source: api.SourceFallback,
				}
				denied = true
				continue
			}
			local = append(local, bucket.Check{Name: l.Name, Limit: share, Key: rs[i].check.Key, Cost: rs[i].check.Cost})
			localIdx = append(localIdx, i)
		}
	}
	if denied || len(local) == 0 {
		return !denied, nil
	}
	ds, ok, err := e.fallback.TakeAt(now, local, nil)
	if err != nil {
		for _, i := range localIdx {
			e.m.denials.WithLabelValues(metricName(rs[i].limit), denialError).Inc()
		}
		return false, api.Errorf(api.CodeOverloaded, "limiter_overloaded: %v", err)
	}
	for j, i := range localIdx {
		results[i] = e.result(rs[i].limit, ds[j], api.SourceFallback, now)
	}
	return ok, nil
}

// refund gives back what groups that were spent took, after another group
// of the same request was denied or failed.
func (e *engine) refund(ctx context.Context, rs []resolved, groups []group) {
	for gi := range groups {
		g := &groups[gi]
		if !g.spent {
			continue
		}
		var bcs []bucket.Check
		var checks []api.Check
		for _, i := range g.idx {
			l := rs[i].limit
			if l.Shadow {
				continue
			}
			if g.src == api.SourceFallback {
				if l.OnOwnerUnreachable == limits.PolicyLocal {
					bcs = append(bcs, bucket.Check{Name: l.Name, Limit: l.Bucket.Scale(e.known()), Key: rs[i].check.Key, Cost: rs[i].check.Cost})
				}
				continue
			}
			bcs = append(bcs, bucket.Check{Name: l.Name, Limit: l.Bucket, Key: rs[i].check.Key, Cost: rs[i].check.Cost})
			checks = append(checks, rs[i].check)
		}
		switch {
		case g.src == api.SourceFallback:
			e.fallback.RefundAt(e.now(), bcs)
		case g.place.Kind == placement.Here || g.place.Kind == placement.Replica:
			e.store.RefundAt(e.now(), bcs)
			e.touched(bcs)
		default:
			// Best effort: an unreachable owner keeps the debit, which
			// errs on the side of admitting less.
			_, _, _ = e.router.forward(ctx, g.place.Addr, opRefund, checks)
		}
		g.spent = false
	}
}

// respond assembles the answer and counts it.
func (e *engine) respond(f *limits.File, rs []resolved, groups []group, results []api.Result, allowed bool) api.TakeResponse {
	resp := api.TakeResponse{Allowed: allowed, RulesVersion: f.Version, Results: results}
	for _, g := range groups {
		resp.Forwarded = resp.Forwarded || (g.place.Kind == placement.Forward && g.src == api.SourceOwner)
		for _, i := range g.idx {
			r := &results[i]
			if r.Limit == "" { // a group never decided because an earlier one denied
				l := rs[i].limit
				*r = api.Result{Limit: l.Name, Allowed: false, Capacity: l.Bucket.Capacity, Window: l.Bucket.PolicyWindow(), Source: g.src}
			}
			if !allowed {
				resp.RetryAfter = max(resp.RetryAfter, r.RetryAfter)
			}
			e.count(e.counters.of(f, rs[i].limit), rs[i].limit, r, allowed)
			e.hot.add(metricName(rs[i].limit), rs[i].check.Key, rs[i].check.Cost, !allowed)
		}
	}
	return resp
}

// count records one check's decision. A check that its own bucket admitted
// but that another check of the request denied counts as denied, with no
// denial kind of its own.
func (e *engine) count(lc *limitCounters, l *limits.Limit, r *api.Result, allowed bool) {
	outcome := outcomeAllowed
	if !allowed {
		outcome = outcomeDenied
	}
	src := min(int(r.Source), 1)
	lc.decisions[outcome][src]().Inc()
	if r.Allowed || l.Shadow {
		return
	}
	if r.Source == api.SourceFallback {
		lc.fallback().Inc()
	} else {
		lc.policy().Inc()
	}
}

// result turns a bucket decision taken at now into an API result with its
// evidence.
func (e *engine) result(l *limits.Limit, d bucket.Decision, src api.Source, now time.Time) api.Result {
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
