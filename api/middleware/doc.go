// Package middleware puts Weir in front of a Go service: net/http
// middleware (HTTP.Wrap) and gRPC unary and stream server interceptors
// (GRPC), deciding each request with a Taker, normally the Go client
// (client.New(conn) satisfies it).
//
// # What is decided
//
// Each route names one Weir limit (Route.Limit). The bucket key comes from a
// function the caller supplies: it must return an identity the service
// trusts (an authenticated principal, the connection's address); there is no
// default, and none that reads a client's header. The cost comes from
// another function, 1 when it is nil. A Key or Cost error answers 400
// (InvalidArgument) without asking Weir.
//
// # Answers
//
// Allowed: the handler runs; HTTP responses carry RateLimit-Policy and
// RateLimit (and the legacy X-RateLimit trio when LegacyHeaders is set),
// gRPC responses the same names, lower-cased, as header metadata.
//
// Denied: HTTP 429 exactly as Weir's own GET /v1/check answers it (the
// headers of api.SetHeaders, Retry-After included, and the JSON body of
// api.WriteDenied); gRPC ResourceExhausted with those headers as metadata.
// The handler does not run.
//
// # When Weir cannot decide
//
// An error from the Taker that is not about the request itself (the node
// unreachable, the Timeout passed, a fail-closed limit's Unavailable, an
// overloaded node) applies the route's failure policy:
//
//	FailOpen   the handler runs, without RateLimit headers (nothing was decided)
//	FailClosed 503 {"error":"limiter_unavailable"} / Unavailable
//	FailLocal  decided in this process from Route.Fallback, a bucket per key kept
//	           by the middleware; headers as for a Weir decision
//
// An InvalidArgument from Weir (an unknown limit, a cost above the limit's
// capacity) is a misconfigured route, not an outage: 500 / Internal, logged.
package middleware
