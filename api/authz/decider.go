package authz

import (
	"context"
	"time"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/auth"
	"github.com/weir-rl/weir/lease"
)

// Decider returns d behind the caller policy of cfg: each call is
// authorised against the token in its context (WithCaller) before d sees
// it, and a refusal is CodeForbidden (or CodeUnauthenticated when the
// context carries no token) with nothing spent. Take, Acquire, Renew and
// Release need the decide scope and every (limit, key) within the token's
// limits and key prefix (a lease's limit and key are read from its id);
// Cluster needs read, except that the ring alone (a context marked by
// api.ForRing) is also served to a decide token; Forget needs admin; Ready
// is open. Without a policy it calls d directly. It is safe for concurrent
// use when d is.
func Decider(d api.Decider, cfg Config) api.Decider {
	return authDecider{d: d, cfg: cfg}
}

// Operator returns op behind the caller policy of cfg, as Decider does for
// a Decider: Hot and Stats need the read scope, since hot keys name every
// tenant's keys. Without a policy it calls op directly.
func Operator(op api.Operator, cfg Config) api.Operator {
	return authOperator{op: op, cfg: cfg}
}

// authOperator is an Operator behind the caller policy.
type authOperator struct {
	op  api.Operator
	cfg Config
}

var _ api.Operator = authOperator{}

// Hot implements api.Operator: the read scope, since hot keys name every
// tenant's keys.
func (a authOperator) Hot(ctx context.Context, limit string, n int) (api.HotKeys, error) {
	if err := a.cfg.authorize(ctx, auth.ScopeRead, "", ""); err != nil {
		return api.HotKeys{}, err
	}
	return a.op.Hot(ctx, limit, n)
}

// Stats implements api.Operator, with the read scope.
func (a authOperator) Stats(ctx context.Context) (api.ClusterStats, error) {
	if err := a.cfg.authorize(ctx, auth.ScopeRead, "", ""); err != nil {
		return api.ClusterStats{}, err
	}
	return a.op.Stats(ctx)
}

// authDecider is a Decider behind the caller policy.
type authDecider struct {
	d   api.Decider
	cfg Config
}

var _ api.Decider = authDecider{}

// authorizeLease checks the caller for the lease with id.
func (a authDecider) authorizeLease(ctx context.Context, id string) error {
	limit, key, ok := lease.ParseID(id)
	if !ok { // malformed: d answers not found and changes nothing
		return a.cfg.authorize(ctx, auth.ScopeDecide, "", "")
	}
	return a.cfg.authorize(ctx, auth.ScopeDecide, limit, key)
}

// Take implements api.Decider. A caller confined to a key prefix is
// passed on as the take's tenant (api.WithTenant), whose new buckets the
// owners count against the token's max_buckets.
func (a authDecider) Take(ctx context.Context, checks []api.Check) (api.TakeResponse, error) {
	if err := a.cfg.AuthorizeChecks(ctx, checks); err != nil {
		return api.TakeResponse{}, err
	}
	return a.d.Take(a.cfg.withTenant(ctx), checks)
}

// Acquire implements api.Decider.
func (a authDecider) Acquire(ctx context.Context, req api.AcquireRequest) (api.AcquireResponse, error) {
	if err := a.cfg.authorize(ctx, auth.ScopeDecide, req.Limit, req.Key); err != nil {
		return api.AcquireResponse{}, err
	}
	return a.d.Acquire(ctx, req)
}

// Renew implements api.Decider.
func (a authDecider) Renew(ctx context.Context, id string, ttl time.Duration) (time.Duration, error) {
	if err := a.authorizeLease(ctx, id); err != nil {
		return 0, err
	}
	return a.d.Renew(ctx, id, ttl)
}

// Release implements api.Decider.
func (a authDecider) Release(ctx context.Context, id string) error {
	if err := a.authorizeLease(ctx, id); err != nil {
		return err
	}
	return a.d.Release(ctx, id)
}

// Cluster implements api.Decider: the read scope, except that the ring alone
// (GetRing, GET /v1/ring) is also served to a decide token, since a
// cluster-aware client routes its takes by it (client.Dial) and it names
// only members and their addresses, which such a client dials anyway.
func (a authDecider) Cluster(ctx context.Context, limit, key string) (api.ClusterInfo, error) {
	scope := auth.ScopeRead
	t := CallerFrom(ctx)
	if p := a.cfg.policy(); p != nil {
		t = p.Current(t) // as the policy in force defines it now
	}
	if t != nil && api.IsRingRequest(ctx) && !t.Has(auth.ScopeRead) && t.Has(auth.ScopeDecide) {
		scope = auth.ScopeDecide
	}
	if err := a.cfg.authorize(ctx, scope, "", ""); err != nil {
		return api.ClusterInfo{}, err
	}
	return a.d.Cluster(ctx, limit, key)
}

// Readiness implements api.Decider; readiness is open.
func (a authDecider) Readiness() api.Readiness { return a.d.Readiness() }

// Forget implements api.Decider.
func (a authDecider) Forget(ctx context.Context, name string) (bool, error) {
	if err := a.cfg.authorize(ctx, auth.ScopeAdmin, "", ""); err != nil {
		return false, err
	}
	return a.d.Forget(ctx, name)
}

// Allot implements api.Decider: the allot scope, within the token's limits
// and key prefix. A holder's id is not bound to the token: any holder the
// token names is its own (the allot scope trusts the caller with its
// budget).
func (a authDecider) Allot(ctx context.Context, req api.AllotRequest) (api.AllotResponse, error) {
	if err := a.cfg.authorize(ctx, auth.ScopeAllot, req.Limit, req.Key); err != nil {
		return api.AllotResponse{}, err
	}
	return a.d.Allot(ctx, req)
}

// Return implements api.Decider, with the allot scope.
func (a authDecider) Return(ctx context.Context, req api.ReturnRequest) error {
	if err := a.cfg.authorize(ctx, auth.ScopeAllot, req.Limit, req.Key); err != nil {
		return err
	}
	return a.d.Return(ctx, req)
}
