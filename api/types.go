package api

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/weir-rl/weir/ring/ownership"
)

// Source says which node made a decision.
type Source uint8

const (
	// SourceOwner means the key's owner decided from the real bucket.
	SourceOwner Source = iota
	// SourceFallback means a non-owner decided from a local ceiling because
	// the owner was unreachable (or the limit fails open).
	SourceFallback
	// SourceAllotment means a holder (a node, or a client trusted with its
	// own budget) decided from the allotment the key's owner granted it:
	// tokens the owner debited from its bucket beforehand.
	SourceAllotment
)

// String returns "owner", "fallback" or "allotment", the words used on the
// wire.
func (s Source) String() string {
	switch s {
	case SourceFallback:
		return "fallback"
	case SourceAllotment:
		return "allotment"
	}
	return "owner"
}

// Check is one bucket to spend from: the limit's name, the caller's key and
// the cost. Transports fill in the default of 1 before calling a Decider
// when the caller omitted the cost, and refuse a cost below 1
// (ValidateChecks). A Decider reads Cost 0 as a peek: the check is
// answered with its bucket's state (allowed, remaining and reset as of
// now), spends nothing, creates no bucket and is never refunded; only
// CL.THROTTLE sends it, for redis-cell's quantity 0 and for a quantity
// above the limit.
//
// Inline, when not nil, carries the limit's parameters with the check
// instead of naming a limit of the limits file (allowed only when the file
// sets inline_limits: true); Limit then names the inline limit's buckets
// and must not be a name the file defines.
type Check struct {
	Limit  string
	Key    string
	Cost   int64
	Inline *InlineLimit
}

// Result is the decision for one Check.
type Result struct {
	Limit      string
	Allowed    bool
	Remaining  int64
	Capacity   int64
	RetryAfter time.Duration // zero when allowed
	ResetAfter time.Duration // until the bucket is full again
	Source     Source
	// Window is the policy window advertised in RateLimit-Policy (w=):
	// capacity/rate for token buckets, the window for window algorithms.
	Window time.Duration
	// Evidence says which bucket state decided; zero when none did (an
	// open limit's fallback, an overloaded store).
	Evidence Evidence
}

// Evidence identifies the state behind a decision, so that a checker can
// audit a cluster's answers (jepsen/ replays each instance's decisions).
// Callers see it only when they ask (HTTP "evidence": true, gRPC
// TakeRequest.evidence); deciding never formats it.
type Evidence struct {
	// Run is the deciding node run: its name, "/", and a random boot
	// nonce. Empty when no bucket decided.
	Run string
	// DecidedAt is the decider's decision clock when it decided.
	DecidedAt time.Time
	// Bucket is the bucket's lineage in the decider's store
	// (bucket.Decision.Instance); Fallback marks a local ceiling's store.
	Bucket   uint64
	Fallback bool
}

// Decider is the name of the node whose bucket decided.
func (e Evidence) Decider() string {
	if i := strings.LastIndexByte(e.Run, '/'); i >= 0 {
		return e.Run[:i]
	}
	return e.Run
}

// Instance names one lineage of one bucket on one node run: it is the same
// while only takes change the bucket, and a new one starts whenever its
// state is handed over, merged, refunded or the node restarts. It is
// opaque and begins with the decider's name; "" when no bucket decided.
func (e Evidence) Instance() string {
	if e.Run == "" {
		return ""
	}
	kind := "/"
	if e.Fallback {
		kind = "/f"
	}
	return e.Run + kind + strconv.FormatUint(e.Bucket, 16)
}

// TakeResponse is the answer to a multi-check take: all checks were spent,
// or none was.
type TakeResponse struct {
	Allowed      bool
	RetryAfter   time.Duration // max over denied checks; zero when allowed
	RulesVersion int64
	Results      []Result // one per check, in request order
	// RingEpoch is the epoch of the answering node's ring view when it
	// routed the request; zero for a node that is not clustered.
	RingEpoch uint64
	// Forwarded reports that the answering node passed a check to its
	// owner: a caller that routes by the ring holds a stale view.
	Forwarded bool
}

// AcquireRequest asks for one concurrency permit.
type AcquireRequest struct {
	Limit  string
	Key    string
	Holder string        // optional, for logs and status
	TTL    time.Duration // zero means the limit's lease_ttl
	Wait   time.Duration // how long the caller may queue; zero means do not queue
}

// AcquireResponse is a grant or a refusal.
type AcquireResponse struct {
	Granted      bool
	ID           string // opaque lease id; routes to the owner by itself
	FencingToken uint64 // strictly increases per (limit, key)
	TTL          time.Duration
	Permits      int64         // the limit's permit count (RateLimit-Policy q=)
	RetryAfter   time.Duration // for a refusal: a hint of when a permit may free
	Source       Source
	RulesVersion int64
	// RingEpoch and Forwarded are as in TakeResponse.
	RingEpoch uint64
	Forwarded bool
}

// Member is one cluster member as seen by the answering node.
type Member struct {
	Name          string
	Addr          string
	State         string // alive | suspect | dead | left
	LimitsVersion int64
}

// ClusterInfo is the answering node's view of the cluster.
type ClusterInfo struct {
	Node    string
	Epoch   uint64
	Members []Member
	Owner   string // set when asked about a (limit, key)
	// Ring is what a client needs to route by this node's view.
	Ring RingInfo
}

// RingInfo is a node's ring for clients: the members with their public
// addresses and the partition table that names owners (ownership.Table).
type RingInfo struct {
	// Members are the known members, sorted by name.
	Members []RingMember
	// Table maps hash keys to ring members; the zero Table for a node with
	// no ring.
	Table ownership.Table
	// Majority reports whether the node reaches a majority of Members.
	Majority bool
}

// RingMember is a member and the public addresses clients dial.
type RingMember struct {
	Name     string
	GRPCAddr string // public weir.v1.Limiter address; "" when unpublished
	HTTPAddr string // public HTTP API address; "" when unpublished
	RESPAddr string // Redis-protocol address; "" when the endpoint is off
	State    string // alive | suspect | dead | left
}

// Readiness is whether a node takes traffic, and why not when it does not.
// /readyz answers 200 when Ready and 503 with Reason otherwise.
type Readiness struct {
	// Ready is true once the node has started, has joined its cluster (when
	// started with seeds) and is not shutting down.
	Ready bool
	// Reason says why the node is not ready, in a sentence for operators
	// ("" when Ready).
	Reason string
}

// Decider is everything the HTTP and gRPC layers need from a node. The node
// package implements it; api never imports node.
type Decider interface {
	// Take spends every check or none. A denial is a value (Allowed
	// false), not an error; errors are *Error.
	Take(ctx context.Context, checks []Check) (TakeResponse, error)
	// Acquire asks for a concurrency permit, waiting up to req.Wait.
	Acquire(ctx context.Context, req AcquireRequest) (AcquireResponse, error)
	// Renew extends a lease; an expired or unknown lease is CodeNotFound.
	Renew(ctx context.Context, id string, ttl time.Duration) (time.Duration, error)
	// Release gives a lease back; releasing twice is not an error.
	Release(ctx context.Context, id string) error
	// Cluster reports membership; with limit and key set it also names the owner.
	Cluster(ctx context.Context, limit, key string) (ClusterInfo, error)
	// Readiness reports whether the node takes traffic (started, joined
	// and holding a ring, not shutting down) and, when not, why.
	Readiness() Readiness
	// Forget removes a failed member from the known members at once
	// (`weir forget NAME`), so it no longer counts in the majority rule or
	// divides local ceilings. It reports whether the member was known; a
	// live member cannot be forgotten (CodeInvalid).
	Forget(ctx context.Context, name string) (bool, error)
	// Allot grants an allotment of req's bucket to req.Holder, at the
	// key's owner (package allot): errors are *Error.
	Allot(ctx context.Context, req AllotRequest) (AllotResponse, error)
	// Return gives an allotment's unspent tokens back; returning what is
	// not held is not an error.
	Return(ctx context.Context, req ReturnRequest) error
}

// Code classifies an *Error for the transports.
type Code uint8

const (
	// CodeInvalid is malformed or out-of-range input: HTTP 400, gRPC InvalidArgument.
	CodeInvalid Code = iota + 1
	// CodeNotFound is an unknown or expired lease: HTTP 404, gRPC NotFound.
	CodeNotFound
	// CodeUnavailable is a fail-closed limit whose owner is unreachable:
	// HTTP 503 limiter_unavailable, gRPC Unavailable.
	CodeUnavailable
	// CodeOverloaded is a node at its bucket cap with nothing evictable:
	// HTTP 503 limiter_overloaded, gRPC ResourceExhausted.
	CodeOverloaded
	// CodeUnauthenticated is a call without a valid caller token: HTTP 401
	// unauthenticated, gRPC Unauthenticated.
	CodeUnauthenticated
	// CodeForbidden is a valid token that may not make the call (scope,
	// limit or key prefix): HTTP 403 forbidden, gRPC PermissionDenied.
	CodeForbidden
	// CodeQuota is a tenant's new key refused because the tenant's keys
	// hold its max_buckets live buckets at the key's owner (WithTenant):
	// HTTP 403 tenant_quota, gRPC ResourceExhausted, RESP -ERR, each with
	// the detail. The tenant's existing keys keep working.
	CodeQuota
)

// Error is the error type a Decider returns. Detail is safe to show to the
// caller: it never contains the caller's key.
type Error struct {
	Code   Code
	Detail string
}

// Error implements error.
func (e *Error) Error() string { return e.Detail }

// Errorf returns an *Error with the given code and a formatted detail.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Detail: fmt.Sprintf(format, args...)}
}
