package engine

import (
	"context"
	"errors"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/node/limits"
	"github.com/weir-rl/weir/node/placement"
)

// This file is the rule for a forward whose owner did not answer within
// its deadline (ErrOwnerLate): while the router still places the key at a
// live owner, that is overload, not unreachability, and nothing is decided
// from a local ceiling. Bound: a take whose owner gossip holds alive is
// admitted only by that owner (or an allotment it debited first), so the
// owner's bucket bounds every admission; an open limit may still admit
// without it, as it does when the owner is unreachable.

// Answers of an overloaded forward, the answer label of
// weir_overloaded_total.
const (
	overloadRefused = "refused" // limiter_overloaded
	overloadOpen    = "open"    // allowed by an open limit, spending nothing
)

// ownerLate reports whether err is a forward's missed deadline and the key
// is still placed elsewhere than a local ceiling (at an owner gossip holds
// alive). An owner that became suspect or dead meanwhile is placed
// Ceiling, and its step falls back as before.
func ownerLate(err error, p placement.Placement) bool {
	return errors.Is(err, ErrOwnerLate) && p.Kind != placement.Ceiling
}

// lateTake answers g's step whose owner, alive, did not answer within the
// deadline. When every check of g is an open or shadow limit, the step is
// allowed, spending nothing (source fallback, like an open limit's answer
// when the owner is unreachable); otherwise it fails with
// limiter_overloaded and spends nothing. Every check is counted in
// weir_overloaded_total with its answer.
func (e *Engine) lateTake(rs []resolved, g *group, results []api.Result) (bool, error) {
	for _, i := range g.idx {
		if l := rs[i].limit; l.OnOwnerUnreachable != limits.PolicyOpen && !l.Shadow {
			for _, j := range g.idx {
				e.m.overloaded.WithLabelValues(metricName(rs[j].limit), overloadRefused).Inc()
			}
			return false, errOverloaded(l.Name)
		}
	}
	for _, i := range g.idx {
		l := rs[i].limit
		results[i] = api.Result{
			Limit: l.Name, Allowed: true, Capacity: l.Bucket.Capacity, Remaining: l.Bucket.Capacity,
			Window: l.Bucket.PolicyWindow(), Source: api.SourceFallback,
		}
		e.m.overloaded.WithLabelValues(metricName(l), overloadOpen).Inc()
	}
	return true, nil
}

// acquireLate answers an acquire whose owner, alive, did not answer within
// the deadline: an open limit grants from its open fallback table, as when
// the owner is unreachable; any other fails with limiter_overloaded.
func (e *Engine) acquireLate(ctx context.Context, l *limits.Limit, req api.AcquireRequest) (api.AcquireResponse, error) {
	if l.OnOwnerUnreachable == limits.PolicyOpen {
		e.m.overloaded.WithLabelValues(l.Name, overloadOpen).Inc()
		return e.acquireFallback(ctx, l, req)
	}
	e.m.overloaded.WithLabelValues(l.Name, overloadRefused).Inc()
	return api.AcquireResponse{}, errOverloaded(l.Name)
}

// errOverloaded is the limiter_overloaded error of a step of limit whose
// owner, alive, did not answer within the deadline: a take, an acquire or
// an allotment ask.
func errOverloaded(limit string) error {
	return api.Errorf(api.CodeOverloaded, "limiter_overloaded: the owner of a key of limit %q did not answer within the deadline", limit)
}
