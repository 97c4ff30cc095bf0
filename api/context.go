package api

import "context"

// This file holds what front ends pass to a Decider in a request's context
// besides the caller (package api/authz): the take's request id and the
// mark of a call that asks for the ring alone.

// MaxRequestIDBytes bounds a take's request id (weir.v1.TakeRequest
// request_id).
const MaxRequestIDBytes = 32

// requestIDKey is the context key of a take's request id.
type requestIDKey struct{}

// WithRequestID returns ctx carrying a take's request id, which the
// transports set from the caller's request and a Decider reads with
// RequestID: the owner deciding the take answers a repeated id with its
// first decision (deduplication). An empty id is no id.
func WithRequestID(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	return &requestIDCtx{Context: ctx, id: id}
}

// requestIDCtx is ctx carrying a request id: what context.WithValue would
// make, in one allocation instead of two (the value's boxing), since every
// client take carries an id.
type requestIDCtx struct {
	context.Context
	id string
}

// Value implements context.Context: the id for requestIDKey, else the
// parent's value.
func (c *requestIDCtx) Value(key any) any {
	if _, ok := key.(requestIDKey); ok {
		return c.id
	}
	return c.Context.Value(key)
}

// RequestID returns the request id WithRequestID put in ctx, or "".
func RequestID(ctx context.Context) string {
	if c, ok := ctx.(*requestIDCtx); ok {
		return c.id
	}
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// WithoutRequestID returns ctx with no request id, for a part of a take
// that must not be deduplicated.
func WithoutRequestID(ctx context.Context) context.Context {
	return &requestIDCtx{Context: ctx}
}

// ringKey marks a context whose Cluster call only publishes the ring.
type ringKey struct{}

// ForRing returns ctx marked as asking for the ring alone: the front ends
// mark the Cluster call behind GetRing and GET /v1/ring with it, and the
// caller policy (package api/authz) serves that call to a token with the
// decide scope, since a cluster-aware client routes its takes by the ring.
func ForRing(ctx context.Context) context.Context { return context.WithValue(ctx, ringKey{}, true) }

// IsRingRequest reports whether ctx was marked by ForRing.
func IsRingRequest(ctx context.Context) bool { v, _ := ctx.Value(ringKey{}).(bool); return v }

// Tenant is a caller confined to a key prefix (a token's key_prefix), with
// the most live buckets its keys may hold at each owner node. The zero
// Tenant is no tenant: nothing is counted.
type Tenant struct {
	Prefix     string
	MaxBuckets int64
}

// tenantKey is the context key of a take's tenant.
type tenantKey struct{}

// WithTenant returns ctx carrying the tenant whose take it is; the caller
// policy (package api/authz) sets it for a token with a key prefix, and
// the owner that creates a bucket for the take counts it against the
// tenant's MaxBuckets (a new key past it is CodeQuota). The zero Tenant is
// no tenant.
func WithTenant(ctx context.Context, t Tenant) context.Context {
	if t == (Tenant{}) {
		return ctx
	}
	return context.WithValue(ctx, tenantKey{}, t)
}

// TenantFrom returns the tenant WithTenant put in ctx, or the zero Tenant.
func TenantFrom(ctx context.Context) Tenant {
	t, _ := ctx.Value(tenantKey{}).(Tenant)
	return t
}
