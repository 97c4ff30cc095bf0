package authz

import (
	"context"
	"strings"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/auth"
)

// Config configures caller authentication and authorisation. The zero
// value leaves the API open.
type Config struct {
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

func (c Config) policy() *auth.Policy {
	if c.Policy == nil {
		return nil
	}
	return c.Policy()
}

func (c Config) failed(r auth.Reason) {
	if c.OnFailure != nil {
		c.OnFailure(r)
	}
}

// Credential authenticates a bare credential, as a front end extracted it
// from its request (an HTTP header, gRPC metadata, the Redis protocol's
// AUTH password), against the policy in force. It returns the caller's
// token, or nil when there is no policy (the API is open), or a
// CodeUnauthenticated *api.Error for a missing or unknown credential,
// counted by OnFailure.
func (c Config) Credential(cred string) (*auth.Token, error) {
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

// TokenByHash authenticates a credential that carries a token's SHA-256
// instead of the token (a session the caller opened with the token, whose
// integrity the front end checked) against the policy in force, as
// Credential does: the token, nil without a policy, or a
// CodeUnauthenticated *api.Error when no token has that hash any more.
func (c Config) TokenByHash(hash [32]byte) (*auth.Token, error) {
	p := c.policy()
	if p == nil {
		return nil, nil
	}
	if t := p.Lookup(hash); t != nil {
		return t, nil
	}
	a := auth.Answer{Outcome: auth.Unauthenticated, Reason: auth.ReasonUnknown}
	c.failed(a.Reason)
	return nil, refusal(a, auth.ScopeRead, "")
}

// Authorize checks t, a caller's token that Credential returned, for scope
// on (limit, key) (see auth.Token.Authorize), as the policy in force now
// defines it: t is re-resolved by its hash (auth.Policy.Current) on every
// call, so a token removed from the tokens file is refused
// (CodeUnauthenticated, unknown_token) and a narrowed one is held to its
// new scopes, limits and prefix, also on a connection or stream that
// authenticated before the reload (RESP, gRPC TakeStream). A refusal is a
// CodeForbidden *api.Error, or CodeUnauthenticated for a nil or revoked t,
// counted by OnFailure. With no policy in force the token is checked as it
// is.
func (c Config) Authorize(t *auth.Token, scope auth.Scope, limit, key string) error {
	if t == nil {
		c.failed(auth.ReasonMissing)
		return refusal(auth.Answer{Outcome: auth.Unauthenticated, Reason: auth.ReasonMissing}, scope, limit)
	}
	if p := c.policy(); p != nil {
		if t = p.Current(t); t == nil {
			c.failed(auth.ReasonUnknown)
			return refusal(auth.Answer{Outcome: auth.Unauthenticated, Reason: auth.ReasonUnknown}, scope, limit)
		}
	}
	if ans := t.Authorize(scope, limit, key); !ans.OK() {
		c.failed(ans.Reason)
		return refusal(ans, scope, limit)
	}
	return nil
}

// authorize checks the caller of ctx for scope on (limit, key) under the
// policy in force; with none, every call is allowed.
func (c Config) authorize(ctx context.Context, scope auth.Scope, limit, key string) error {
	if c.policy() == nil {
		return nil
	}
	return c.Authorize(CallerFrom(ctx), scope, limit, key)
}

// AuthorizeChecks checks the caller of ctx for the decide scope on every
// check, as Decider's Take does before it spends: the first refusal is
// returned (counted by OnFailure), so a caller refused for one check is
// refused for all. No checks checks the scope alone. Without a policy in
// force every call is allowed. A front end that spends checks one take at
// a time (Envoy's rules mode) calls it first, so a refusal spends nothing.
func (c Config) AuthorizeChecks(ctx context.Context, checks []api.Check) error {
	if c.policy() == nil {
		return nil
	}
	if len(checks) == 0 {
		return c.authorize(ctx, auth.ScopeDecide, "", "")
	}
	for _, ch := range checks {
		if err := c.authorize(ctx, auth.ScopeDecide, ch.Limit, ch.Key); err != nil {
			return err
		}
	}
	return nil
}

// withTenant returns ctx carrying the tenant of its caller's token as the
// policy in force defines it (api.WithTenant): its key prefix and
// max_buckets. A caller without a key prefix, or no policy, is no tenant.
func (c Config) withTenant(ctx context.Context) context.Context {
	p := c.policy()
	if p == nil {
		return ctx
	}
	t := p.Current(CallerFrom(ctx))
	if t == nil || t.KeyPrefix() == "" {
		return ctx
	}
	return api.WithTenant(ctx, api.Tenant{Prefix: t.KeyPrefix(), MaxBuckets: t.MaxBuckets()})
}

type callerKey struct{}

// WithCaller returns ctx carrying the caller's token, as authenticated by
// a front end.
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

// refusal is the *api.Error for a refused answer.
func refusal(a auth.Answer, scope auth.Scope, limit string) *api.Error {
	code := api.CodeForbidden
	if a.Outcome == auth.Unauthenticated {
		code = api.CodeUnauthenticated
	}
	return &api.Error{Code: code, Detail: a.Detail(scope, limit)}
}
