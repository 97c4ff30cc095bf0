package api

import (
	"context"
	"strings"
	"time"

	"github.com/weir-rl/weir/auth"
	"github.com/weir-rl/weir/lease"
)

// This file enforces the caller policy of package auth on the transports.
// Authentication happens at the edge of each transport, before a request
// is read: httpapi.RequireTokens (HTTP) and grpcapi.AuthInterceptors (gRPC, the Envoy service
// included) turn the presented credential into the caller's *auth.Token
// and refuse a missing or unknown one (Unauthenticated). Authorisation
// happens in AuthorizingDecider, which wraps the Decider: every check of a
// take, every lease and every admin call is authorised against the
// caller's token before the wrapped Decider is called, so a refused call
// spends and changes nothing. Another transport (a RESP AUTH command, say)
// authenticates with Policy.Authenticate, stores the token with the
// connection, passes it with WithCaller and calls the same wrapped Decider.

// AuthConfig configures caller authentication. The zero value leaves the
// API open.
type AuthConfig struct {
	// Policy returns the policy in force. Nil, or a nil answer, means no
	// tokens file: every call is allowed, as without authentication.
	Policy func() *auth.Policy
	// ProtectMetrics requires a token with the read scope for GET
	// /metrics. Default false: /metrics is open.
	ProtectMetrics bool
	// OnFailure is called once for every refused request with the reason
	// (the node counts weir_auth_failures_total{reason}). Nil ignores them.
	OnFailure func(auth.Reason)
}

func (c AuthConfig) policy() *auth.Policy {
	if c.Policy == nil {
		return nil
	}
	return c.Policy()
}

func (c AuthConfig) failed(r auth.Reason) {
	if c.OnFailure != nil {
		c.OnFailure(r)
	}
}

// Credential authenticates a bare credential, as a protocol without
// headers sends it (the Redis protocol's AUTH password), against the policy
// in force. It returns the caller's token, or nil when there is no policy
// (the API is open), or a CodeUnauthenticated *Error; a refusal is counted
// like any other.
func (c AuthConfig) Credential(cred string) (*auth.Token, error) {
	p := c.policy()
	if p == nil {
		return nil, nil
	}
	a := p.Authenticate(cred)
	if !a.OK() {
		c.failed(a.Reason)
		return nil, refusal(a, auth.ScopeDecide, "")
	}
	return a.Token, nil
}

type callerKey struct{}

// WithCaller returns ctx carrying the caller's token, as authenticated by
// a transport.
func WithCaller(ctx context.Context, t *auth.Token) context.Context {
	return context.WithValue(ctx, callerKey{}, t)
}

// CallerFrom returns the caller's token carried by ctx, or nil.
func CallerFrom(ctx context.Context) *auth.Token {
	t, _ := ctx.Value(callerKey{}).(*auth.Token)
	return t
}

// Bearer returns the token of an "Authorization: Bearer TOKEN" value (the
// scheme in any case), or "" for any other value.
func Bearer(v string) string {
	const p = "bearer "
	if len(v) > len(p) && strings.EqualFold(v[:len(p)], p) {
		return strings.TrimSpace(v[len(p):])
	}
	return ""
}

// refusal is the *Error for a refused answer.
func refusal(a auth.Answer, scope auth.Scope, limit string) *Error {
	code := CodeForbidden
	if a.Outcome == auth.Unauthenticated {
		code = CodeUnauthenticated
	}
	return &Error{Code: code, Detail: a.Detail(scope, limit)}
}

// AuthorizingDecider returns d behind the caller policy: each call is
// authorised against the token in its context (WithCaller) before d sees
// it, and a refusal is CodeForbidden (or CodeUnauthenticated when the
// context carries no token) with nothing spent. Take, Acquire, Renew and
// Release need the decide scope and every (limit, key) within the token's
// limits and key prefix (a lease's limit and key are read from its id);
// Cluster needs read; Forget needs admin; Ready is open. Without a policy
// it calls d directly.
func AuthorizingDecider(d Decider, cfg AuthConfig) Decider {
	return authDecider{d: d, cfg: cfg}
}

// AuthorizingOperator returns op behind the caller policy, as
// AuthorizingDecider does for a Decider: Hot and Stats need the read
// scope, since hot keys name every tenant's keys.
func AuthorizingOperator(op Operator, cfg AuthConfig) Operator {
	return authOperator{op: op, cfg: cfg}
}

// authOperator is an Operator behind the caller policy.
type authOperator struct {
	op  Operator
	cfg AuthConfig
}

var _ Operator = authOperator{}

// Hot implements Operator: the read scope, since hot keys name every
// tenant's keys.
func (a authOperator) Hot(ctx context.Context, limit string, n int) (HotKeys, error) {
	if err := a.cfg.authorize(ctx, auth.ScopeRead, "", ""); err != nil {
		return HotKeys{}, err
	}
	return a.op.Hot(ctx, limit, n)
}

// Stats implements Operator, with the read scope.
func (a authOperator) Stats(ctx context.Context) (ClusterStats, error) {
	if err := a.cfg.authorize(ctx, auth.ScopeRead, "", ""); err != nil {
		return ClusterStats{}, err
	}
	return a.op.Stats(ctx)
}

type authDecider struct {
	d   Decider
	cfg AuthConfig
}

var _ Decider = authDecider{}

// authorize checks the caller of ctx for scope on (limit, key) under the
// policy in force; with none, every call is allowed.
func (c AuthConfig) authorize(ctx context.Context, scope auth.Scope, limit, key string) error {
	if c.policy() == nil {
		return nil
	}
	return c.Authorize(CallerFrom(ctx), scope, limit, key)
}

// Authorize checks t, a caller's token that Credential returned, for scope
// on (limit, key) (see auth.Token.Authorize). A refusal is a
// CodeForbidden *Error, or CodeUnauthenticated for a nil t, counted by
// OnFailure. It does not consult the policy: with none in force there is
// no token and nothing to check.
func (c AuthConfig) Authorize(t *auth.Token, scope auth.Scope, limit, key string) error {
	if t == nil {
		c.failed(auth.ReasonMissing)
		return refusal(auth.Answer{Outcome: auth.Unauthenticated, Reason: auth.ReasonMissing}, scope, limit)
	}
	if ans := t.Authorize(scope, limit, key); !ans.OK() {
		c.failed(ans.Reason)
		return refusal(ans, scope, limit)
	}
	return nil
}

// authorizeLease checks the caller for the lease with id.
func (a authDecider) authorizeLease(ctx context.Context, id string) error {
	limit, key, ok := lease.ParseID(id)
	if !ok { // malformed: d answers not found and changes nothing
		return a.cfg.authorize(ctx, auth.ScopeDecide, "", "")
	}
	return a.cfg.authorize(ctx, auth.ScopeDecide, limit, key)
}

// Take implements Decider.
func (a authDecider) Take(ctx context.Context, checks []Check) (TakeResponse, error) {
	if a.cfg.policy() != nil {
		if len(checks) == 0 {
			if err := a.cfg.authorize(ctx, auth.ScopeDecide, "", ""); err != nil {
				return TakeResponse{}, err
			}
		}
		for _, c := range checks {
			if err := a.cfg.authorize(ctx, auth.ScopeDecide, c.Limit, c.Key); err != nil {
				return TakeResponse{}, err
			}
		}
	}
	return a.d.Take(ctx, checks)
}

// Acquire implements Decider.
func (a authDecider) Acquire(ctx context.Context, req AcquireRequest) (AcquireResponse, error) {
	if err := a.cfg.authorize(ctx, auth.ScopeDecide, req.Limit, req.Key); err != nil {
		return AcquireResponse{}, err
	}
	return a.d.Acquire(ctx, req)
}

// Renew implements Decider.
func (a authDecider) Renew(ctx context.Context, id string, ttl time.Duration) (time.Duration, error) {
	if err := a.authorizeLease(ctx, id); err != nil {
		return 0, err
	}
	return a.d.Renew(ctx, id, ttl)
}

// Release implements Decider.
func (a authDecider) Release(ctx context.Context, id string) error {
	if err := a.authorizeLease(ctx, id); err != nil {
		return err
	}
	return a.d.Release(ctx, id)
}

// Cluster implements Decider: the read scope, except that the ring alone
// (GetRing, GET /v1/ring) is also served to a decide token, since a
// cluster-aware client routes its takes by it (client.Dial) and it names
// only members and their addresses, which such a client dials anyway.
func (a authDecider) Cluster(ctx context.Context, limit, key string) (ClusterInfo, error) {
	scope := auth.ScopeRead
	if t := CallerFrom(ctx); t != nil && IsRingRequest(ctx) && !t.Has(auth.ScopeRead) && t.Has(auth.ScopeDecide) {
		scope = auth.ScopeDecide
	}
	if err := a.cfg.authorize(ctx, scope, "", ""); err != nil {
		return ClusterInfo{}, err
	}
	return a.d.Cluster(ctx, limit, key)
}

// Ready implements Decider; readiness is open.
func (a authDecider) Ready() bool { return a.d.Ready() }

// Forget implements Decider.
func (a authDecider) Forget(ctx context.Context, name string) (bool, error) {
	if err := a.cfg.authorize(ctx, auth.ScopeAdmin, "", ""); err != nil {
		return false, err
	}
	return a.d.Forget(ctx, name)
}
