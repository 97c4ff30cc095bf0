package engine

import (
	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/node/limits"
)

// fallbackTake decides g's checks from local ceilings by each limit's
// on_owner_unreachable policy: local (a share of the limit, the known
// members dividing it), open (allow, spending nothing) or closed (the
// whole request fails). With sp, it records in *sp the local debits, with
// the share they were taken under.
func (e *Engine) fallbackTake(rs []resolved, g *group, results []api.Result, sp *Spend) (bool, error) {
	now := e.now()
	known := e.router.Known()
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
	if ok && sp != nil {
		*sp = Spend{Where: Fallback}
		for j, i := range localIdx {
			// Shadow checks are never undone, here as at the owner.
			if !rs[i].limit.Shadow {
				sp.Debits = append(sp.Debits, local[j])
			}
		}
	}
	return ok, nil
}
