// Package grpcapi serves Weir's gRPC service weir.v1.Limiter (protobuf and
// generated code in package api/weirv1) from the api.Decider it is handed:
// NewServer or Register, with Config bounding what it accepts. It has the
// HTTP API's semantics (package api/httpapi) and the same input checks
// (package api's "Input checks"), run before the Decider is called.
//
// # Calls
//
// Take spends every check or none; a check's cost of 0 is the proto3
// default and means 1. TakeStream answers each request in turn, echoing its
// id, and reports a failed request in the response's error field (code
// numbers are gRPC's) without ending the stream; Server.Drain, on the
// node's shutdown, ends every stream with Unavailable once the request it
// is deciding is answered. A take may carry
// request_id (1 to api.MaxRequestIDBytes bytes), passed to the Decider with
// api.WithRequestID: its owner answers a repeat within its window with the
// first decision. TakeResponse and AcquireResponse carry ring_epoch and
// forwarded (the node passed the request to the owner). Acquire, Renew and
// Release hold concurrency permits; a refused Acquire is a response with
// granted false, not an error. GetRing publishes the answering node's ring
// (members with their public addresses and the partition table) from the
// Decider's Cluster, asked with a context marked by api.ForRing; package
// ring/ownership computes owners from it exactly as the node does.
//
// Millisecond figures round up (retry_after_ms, reset_after_ms, window_ms)
// or, for lease TTLs, down (api.MillisUp, api.MillisDown).
//
// # Errors
//
// Status maps input-check and Decider errors: CodeInvalid →
// InvalidArgument, CodeNotFound → NotFound, CodeUnavailable → Unavailable,
// CodeOverloaded → ResourceExhausted, CodeUnauthenticated →
// Unauthenticated, CodeForbidden → PermissionDenied, CodeQuota →
// ResourceExhausted, with the detail as
// message; context errors map to their codes; anything else to Internal.
//
// # Caller tokens
//
// AuthInterceptors authenticate every call of the server they are
// installed on (the Envoy service of package api/envoyrls included) under
// a caller policy: metadata "x-weir-token: TOKEN" or "authorization:
// Bearer TOKEN"; a missing or unknown token is Unauthenticated before the
// request is read. The caller's token goes into the call's context, and
// the Decider the server is handed (api/authz's wrapper) authorises each
// call with it.
package grpcapi
