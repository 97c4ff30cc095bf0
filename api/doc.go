// Package api is Weir's public contract, the package every caller and
// every front end imports: the decision types (Check, Result, TakeResponse,
// AcquireRequest, ClusterInfo, ...), the Decider interface a node
// implements and the Operator interface of its operators' routes, the
// errors a Decider returns (Error, Code), and the small helpers every front
// end shares. It serves nothing and imports only the standard library and
// ring/ownership, so that importing the Go client (api/client) or the
// middleware (api/middleware) links no server.
//
// The front ends sit beside it, each handed the Decider (and Operator) it
// serves: package api/httpapi (the HTTP API and the status page),
// api/grpcapi (weir.v1.Limiter; protobuf in api/weirv1), api/envoyrls
// (Envoy's rate limit service), api/resp (the Redis protocol). Package
// api/authz wraps a Decider and an Operator in the caller policy. All front
// ends have the same semantics and run the same input checks, and none
// imports the node package.
//
// # Input checks
//
// Before a Decider is called, every front end rejects, as CodeInvalid
// (HTTP 400, gRPC InvalidArgument, RESP -ERR), an empty check list, more
// than its MaxChecks checks (DefaultMaxChecks, 100), an empty limit or key,
// a limit, key or holder over its MaxKeyBytes (DefaultMaxKeyBytes, 512) or
// not valid UTF-8, a cost below 1, a negative or overflowing ttl_ms or
// wait_ms, an empty or over-long (MaxLeaseIDBytes, 2048) lease id, and a
// request id over MaxRequestIDBytes (32). ValidateChecks, ValidateField,
// NewAcquireRequest, ValidateLeaseID and Milliseconds are these checks.
// NewAcquireRequest also clamps an accepted wait to MaxLeaseWait (1 h, the
// longest queue.max_wait), so deadline arithmetic on a wait never
// overflows.
// Semantic checks (unknown limit, cost above capacity, a lease of a rate
// limit) are the Decider's. An error detail names the offending field,
// never the caller's key.
//
// A check may carry an inline limit instead of naming one of the limits
// file (Check.Inline): at most MaxInlineChecks (16) checks of a take, each
// string at most MaxInlineFieldBytes (32) bytes. The Decider validates it
// as the file's parser would and refuses it when the file sets
// inline_limits: false.
//
// # Errors
//
// A denial is a value (Allowed false), never an error. A Decider's errors
// are *Error: CodeInvalid, CodeNotFound (an unknown or expired lease),
// CodeUnavailable (a fail-closed limit whose owner is unreachable),
// CodeOverloaded (a node at its bucket cap), and, under a caller policy,
// CodeUnauthenticated, CodeForbidden and CodeQuota (a tenant's new key
// past its max_buckets). Each Code says what it maps to in
// each protocol; the detail is safe to show to the caller.
//
// # Context
//
// WithRequestID passes a take's request id to the Decider, whose owner
// answers a repeat with its first decision; ForRing marks the Cluster call
// that only publishes the ring (GetRing, GET /v1/ring); WithTenant names
// the tenant whose new buckets the owner counts.
//
// # Rate-limit headers and milliseconds
//
// SetHeaders and WriteDenied give transports in front of an application
// (api/middleware) the HTTP API's exact answers; SetResultHeaders,
// HeaderResult, SetLeaseHeaders and DenialSeconds are their pieces, used by
// the HTTP and Envoy front ends. The formats are at the top of headers.go
// (draft-ietf-httpapi-ratelimit-headers-10, the limit name as policy
// name). Every API reports retry and reset figures in milliseconds rounded
// up (MillisUp), so a caller that waits them is never early, and lease
// lifetimes rounded down (MillisDown).
package api
