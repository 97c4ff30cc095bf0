// Package api is Weir's public contract: the decision types and the Decider
// interface a node implements (types.go), and the HTTP API (NewHTTPHandler).
// The gRPC service weir.v1.Limiter is served by package api/grpcapi
// (protobuf and generated code in package api/weirv1), Envoy's rate limit
// service by package api/envoyrls.
// SetHeaders and WriteDenied give transports in front of an application
// (package middleware) the HTTP API's exact answers. Both of Weir's
// own transports have the same semantics and the same input checks, and api
// never imports the node package.
//
// # Input checks
//
// Before a Decider is called, both transports reject, as invalid (HTTP 400,
// gRPC InvalidArgument), an empty check list, more than MaxChecks checks, an
// empty limit or key, a limit, key or holder over MaxKeyBytes (512) or not
// valid UTF-8, a cost below 1, a negative or overflowing ttl_ms or wait_ms,
// and an empty or over-long (2048 bytes) lease id. Semantic checks (unknown
// limit, cost above capacity, a lease of a rate limit) are the Decider's. An
// error detail names the offending field, never the caller's key.
//
// A check may carry an inline limit instead of naming one of the limits
// file (Check.Inline; JSON "inline": {"algorithm", "capacity", "burst",
// "limit", "rate", "window"}, gRPC Check.inline): at most MaxInlineChecks
// (16) checks of a take, each string at most MaxInlineFieldBytes (32)
// bytes. The Decider validates it as the file's parser would and refuses
// it when the file sets inline_limits: false. The Redis protocol is
// served by package api/resp with the same checks.
//
// HTTP request bodies are one JSON object: unknown fields and trailing data
// are invalid (a misspelt "cost" must not silently charge 1), integers must be
// JSON integers (1.5, "1" and 1e3 are invalid), an omitted or null cost is 1,
// an explicit 0 is invalid. Content-Type is not checked. A body over
// MaxBodyBytes (1 MiB) is 413 {"error":"request_too_large"}. In gRPC, a cost
// of 0 is the proto3 default and means 1.
//
// # HTTP routes
//
//	POST   /v1/take               200 decision (allowed or not) | 400 | 413 | 503
//	GET    /v1/check?limit=&key=&cost=   200 allowed | 429 denied | 400 | 503
//	       [&key_header=H] [&deny_status=401|403]   for forward-auth proxies, below
//	POST   /v1/leases             201 {"id","fencing_token","ttl_ms"} | 429 | 400 | 503
//	POST   /v1/leases/{id}/renew  200 {"ttl_ms"} | 404 expired or unknown
//	DELETE /v1/leases/{id}        204, also when already released
//	GET    /v1/cluster[?limit=&key=]   200 members (+ "owner" when asked)
//	GET    /v1/ring               200 the ring for clients (weir.v1.Limiter GetRing)
//	GET    /v1/cluster/hot?limit=&n=   200 HotKeys | 400 (Operator only)
//	GET    /v1/cluster/stats      200 ClusterStats (Operator only)
//	GET    /ui/                   the status page (package api/ui), text/html
//	GET    /healthz               200 {"status":"ok"}
//	GET    /readyz                200 {"status":"ready"} | 503 {"status":"not_ready"}
//	GET    /metrics               the metrics handler given to NewHTTPHandler
//
// Other methods on these paths are 405 with Allow; other paths are 404. Every
// response except /metrics and /ui/ is application/json with Cache-Control:
// no-store.
// Errors are {"error":"<code>","detail":"..."}: invalid_request (400),
// request_too_large (413, no detail), not_found (404), method_not_allowed
// (405), limiter_unavailable (503, fail-closed limit or deadline),
// limiter_overloaded (503, no detail), internal_error (500).
//
// A denial by /v1/check is 429 with body
// {"error":"rate_limit_exceeded","limit":"export","retry_after_ms":500};
// a refused lease is 429 {"error":"concurrency_limit_exceeded",...}. Bodies
// name the limit and never echo the key. Millisecond figures round up
// (retry_after_ms, reset_after_ms) or, for lease TTLs, down.
//
// # Forward auth
//
// GET /v1/check serves proxies that ask an endpoint before passing a request
// on (nginx auth_request, Caddy forward_auth, Traefik ForwardAuth; tested
// configurations in deploy/). Two optional parameters fit it to them:
//
//   - key_header=H takes the key from request header H instead of key (both
//     given is 400). For X-Forwarded-For it is the last element of the last
//     field line, the address the proxy in front of Weir set or appended from
//     the connection; for any other header, which must then appear exactly
//     once, the whole value trimmed. The header must be one the proxy sets
//     itself, never one it passes on from the client.
//   - deny_status=401 or 403 answers a denial with that status instead of
//     429, with the same body and headers, because nginx's auth_request
//     accepts only 2xx, 401 and 403 from the endpoint; the proxy maps it back
//     to 429 (deploy/nginx/weir.conf). An allowed check is 200 regardless.
//
// A take may ask for evidence ("evidence": true in the body, evidence in
// the gRPC TakeRequest): each result decided by a bucket then also carries
// "evidence": {"decider","decided_at_ns","instance"}, the node whose bucket
// decided, its decision clock and the bucket instance (see Evidence). It
// is for audits such as jepsen/'s checkers; without it the body is exactly
// docs/architecture.md §5.1's. A lease request with "evidence": true gets "source" ("owner"
// or "fallback") in its 201 or 429 body.
//
// A clustered node's /v1/take body also carries "ring_epoch", the epoch of
// the ring view that routed the take (gRPC: TakeResponse and
// AcquireResponse ring_epoch, with forwarded saying whether the node passed
// the request to the owner). GET /v1/ring and GetRing publish that view:
// members with their public addresses and the partition table, from which
// ring/ownership computes owners exactly as the node does. A gRPC take may
// carry request_id (1 to MaxRequestIDBytes bytes; the transports pass it to
// the Decider with WithRequestID): its owner answers a repeat within its
// window with the first decision.
//
// # Rate-limit headers
//
// /v1/check (200 and 429) and /v1/take (200, for the first denied check, else
// the allowed check with the least remaining) carry, in the syntax of
// draft-ietf-httpapi-ratelimit-headers-10 with the limit name as policy name:
//
//	RateLimit-Policy: "export";q=6;w=3    q capacity, w window seconds rounded up (omitted if 0)
//	RateLimit: "export";r=0;t=1           r remaining, t as below
//	X-RateLimit-Limit: 6                  legacy trio, on by default (HTTPConfig.LegacyHeaders)
//	X-RateLimit-Remaining: 0
//	X-RateLimit-Reset: 1                  delta seconds, always equal to t
//
// t is, for a denial, ceil(retry_after) in seconds and at least 1, the same
// number as Retry-After; for an allowed decision, ceil(reset_after), the
// seconds until the bucket is full again. Only a 429 carries Retry-After
// (whole seconds rounded up, at least 1): a /v1/take denial is a 200 whose
// body holds retry_after_ms. Leases carry
// RateLimit-Policy: "export-db";q=8;qu="concurrent-requests", and a refusal
// also RateLimit: "export-db";r=0;t=N, Retry-After: N and the legacy trio,
// where N is the Decider's retry hint rounded up, at least 1. A limit name
// outside printable ASCII has those bytes replaced by '_' in headers;
// '"' and '\' are escaped.
//
// # gRPC
//
// Decider errors map to InvalidArgument, NotFound, Unavailable and
// ResourceExhausted with the detail as message; context errors to their
// codes; anything else to Internal. TakeStream answers each request in turn,
// echoing its id, and reports a failed request in the response's error field
// (code numbers are gRPC's) without ending the stream.
//
// # Caller tokens
//
// With a policy (AuthConfig.Policy, from a tokens file, see package auth),
// RequireTokens and grpcapi.AuthInterceptors authenticate every request except /healthz,
// /readyz and, unless protected, /metrics: the credential is X-Weir-Token
// (a forward-auth proxy's own) or Authorization: Bearer over HTTP, and
// x-weir-token or authorization metadata over gRPC. A missing or unknown
// token is 401 unauthenticated / Unauthenticated before the request is
// read. AuthorizingDecider then checks the caller's scope, limits and key
// prefix for every check, lease and admin call before the Decider runs: a
// refusal is 403 forbidden / PermissionDenied and spends nothing.
package api
