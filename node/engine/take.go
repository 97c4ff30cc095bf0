package engine

import (
	"context"
	"errors"
	"time"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/node/limits"
	"github.com/weir-rl/weir/node/placement"
)

// group is the checks of one request that share a placement: one atomic
// step.
type group struct {
	place placement.Placement
	idx   []int // positions in the request, never written once split made them
	src   api.Source
	// replaced is set once the group was placed again after its owner
	// answered NotOwner: it is placed again at most once.
	replaced bool
}

// groupKey is what checks must share to be one atomic step.
type groupKey struct {
	kind placement.Kind
	peer string
}

func keyOf(p placement.Placement) groupKey {
	k := groupKey{kind: p.Kind}
	if p.Kind == placement.Forward {
		k.peer = p.Addr
	}
	return k
}

// Take decides a multi-check request: every check is spent or none is.
// Each group of checks with one placement is one atomic step, in request
// order; when a step is denied or fails, the steps already spent are
// undone (Spend) and later ones are not tried. A denial is a value;
// errors are *api.Error.
func (e *Engine) Take(ctx context.Context, checks []api.Check) (api.TakeResponse, error) {
	start := time.Now()
	f := e.limits()
	// A one-check request, the common one, keeps its resolved check and
	// its group on this frame.
	var (
		rsBuf    [1]resolved
		groupBuf [1]group
	)
	rs, err := e.validate(f, checks, rsBuf[:0])
	if err != nil {
		e.tookSince(start)
		return api.TakeResponse{}, err
	}
	groups := e.split(rs, groupBuf[:0])
	results := make([]api.Result, len(rs))
	var allowed bool
	if len(groups) == 1 {
		// One step, the whole request in order: a request id deduplicates
		// it, and nothing is ever left to undo.
		allowed, err = e.decideGroup(ctx, f, rs, &groups[0], results, api.RequestID(ctx), checks, nil)
	} else {
		allowed, err = e.takeSteps(ctx, f, rs, groups, results)
	}
	if err != nil {
		e.tookSince(start)
		return api.TakeResponse{}, err
	}
	resp := e.respond(f, rs, groups, results, allowed)
	e.tookSince(start)
	return resp, nil
}

// takeSteps decides a request of several steps, in request order, undoing
// every spent step when a later one is denied or fails. No step is
// deduplicated by a request id: replaying one step of several while
// another is undone again would mint tokens.
func (e *Engine) takeSteps(ctx context.Context, f *limits.File, rs []resolved, groups []group, results []api.Result) (bool, error) {
	if api.RequestID(ctx) != "" {
		ctx = api.WithoutRequestID(ctx)
	}
	var spent []Spend // the steps that admitted, to undo if a later one is denied
	for gi := range groups {
		// The last step's spend is never undone: after it, nothing is left
		// to deny the request.
		var sp Spend
		record := gi < len(groups)-1
		ok, err := e.decideGroup(ctx, f, rs, &groups[gi], results, "", nil, spendIf(record, &sp))
		if err != nil {
			e.undo(ctx, spent)
			return false, err
		}
		if !ok {
			e.undo(ctx, spent)
			return false, nil // nothing later needs spending: the request is denied
		}
		if record {
			spent = append(spent, sp)
		}
	}
	return true, nil
}

// tookSince observes a take's latency.
func (e *Engine) tookSince(start time.Time) {
	e.m.takeLatency().Observe(time.Since(start).Seconds())
}

// spendIf is sp when record, else nil: where a step records its spend.
func spendIf(record bool, sp *Spend) *Spend {
	if record {
		return sp
	}
	return nil
}

// undo gives back every spend of spent.
func (e *Engine) undo(ctx context.Context, spent []Spend) {
	for _, s := range spent {
		e.Undo(ctx, s)
	}
}

// onlyFirst is the positions of a one-check request's only group, shared
// by every such group: a group's positions are only read.
var onlyFirst = []int{0}

// split groups checks by placement, keeping request order inside each
// group. Most requests have one check, or checks with one placement: they
// make one group without a map. A one-check request's group is appended
// to buf, so the caller can keep it off the heap.
func (e *Engine) split(rs []resolved, buf []group) []group {
	first := e.router.Place(rs[0].check.Limit, rs[0].check.Key)
	if len(rs) == 1 {
		return append(buf[:0], group{place: first, idx: onlyFirst})
	}
	ps := make([]placement.Placement, len(rs))
	ps[0] = first
	same := true
	for i := 1; i < len(rs); i++ {
		ps[i] = e.router.Place(rs[i].check.Limit, rs[i].check.Key)
		same = same && keyOf(ps[i]) == keyOf(first)
	}
	if same {
		groups := []group{{place: first, idx: make([]int, len(rs))}}
		for i := range rs {
			groups[0].idx[i] = i
		}
		return groups
	}
	var groups []group
	byKey := map[groupKey]int{}
	for i, p := range ps {
		k := keyOf(p)
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

// decideGroup runs one atomic step for g: at this node if it decides the
// keys here, at the owner otherwise, and from local ceilings when the owner
// cannot be reached. An owner still placed alive that did not answer in
// time (a forward, or the pull before deciding here) is overload, answered
// by lateTake, never from a local ceiling. It fills results for g's checks
// and, with sp, records in *sp what the step spent. id is the caller's
// request id ("" for none), deduplicated by the owner. all, when not nil, is g's checks in g's
// order (the request itself, when g is its only group), and is not
// modified.
func (e *Engine) decideGroup(ctx context.Context, f *limits.File, rs []resolved, g *group, results []api.Result, id string, all []api.Check, sp *Spend) (bool, error) {
	checks := all
	if checks == nil {
		checks = make([]api.Check, len(g.idx))
		for j, i := range g.idx {
			checks[j] = rs[i].check
		}
	}
	if g.place.DecidesHere() {
		if err := e.router.Prepare(ctx, checks, g.place.Kind == placement.Replica, e.held); err != nil {
			g.src = api.SourceFallback
			if errors.Is(err, ErrOwnerLate) {
				return e.lateTake(rs, g, results)
			}
			return e.fallbackTake(rs, g, results, sp)
		}
		g.src = api.SourceOwner
		// The request's only step decides into results itself.
		var into []api.Result
		if all != nil {
			into = results
		}
		out, ok, err := e.ownerTakeOnce(f, checks, id, api.TenantFrom(ctx), sp, into)
		if errors.Is(err, errHandedOver) {
			// Handed over while it was routed here: ask the new owner.
			if p := e.router.Place(checks[0].Limit, checks[0].Key); p.Kind == placement.Forward {
				g.place = p
				return e.decideGroup(ctx, f, rs, g, results, id, all, sp)
			}
			g.src = api.SourceFallback
			return e.fallbackTake(rs, g, results, sp)
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
		if allotted(rs, g) {
			if decided, ok := e.fromAllotment(rs, g, results, sp); decided {
				g.src = api.SourceAllotment
				return ok, nil
			}
		}
		out, ok, err := e.peers.Take(ctx, g.place.Addr, checks, id)
		if _, semantic := errors.AsType[*api.Error](err); semantic {
			return false, err
		}
		if err == nil {
			g.src = api.SourceOwner
			for j, i := range g.idx {
				results[i] = out[j]
			}
			if ok && sp != nil {
				*sp = Spend{Where: Peer, Peer: g.place.Addr}
				for _, i := range g.idx {
					if !rs[i].limit.Shadow {
						sp.Sent = append(sp.Sent, rs[i].check)
					}
				}
			}
			return ok, nil
		}
		again := e.router.Place(checks[0].Limit, checks[0].Key)
		if ownerLate(err, again) {
			g.src = api.SourceFallback
			return e.lateTake(rs, g, results)
		}
		if errors.Is(err, ErrNotOwner) && !g.replaced && keyOf(again) != keyOf(g.place) && e.placedAlike(checks, again) {
			// The owner's ring disagreed, and this node's view changed
			// since the step was placed (a join or leave settling): ask
			// where it is placed now, once, before granting from a
			// local ceiling while the key's bucket may grant as well.
			g.place, g.replaced = again, true
			return e.decideGroup(ctx, f, rs, g, results, id, all, sp)
		}
	}
	g.src = api.SourceFallback
	return e.fallbackTake(rs, g, results, sp)
}

// placedAlike reports whether every check is placed like p now, so the
// checks still make one step there.
func (e *Engine) placedAlike(checks []api.Check, p placement.Placement) bool {
	for _, ch := range checks[1:] {
		if keyOf(e.router.Place(ch.Limit, ch.Key)) != keyOf(p) {
			return false
		}
	}
	return true
}

// respond assembles the answer and counts it.
func (e *Engine) respond(f *limits.File, rs []resolved, groups []group, results []api.Result, allowed bool) api.TakeResponse {
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
func (e *Engine) count(lc *limitCounters, l *limits.Limit, r *api.Result, allowed bool) {
	outcome := outcomeAllowed
	if !allowed {
		outcome = outcomeDenied
	}
	src := min(int(r.Source), numSources-1)
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
