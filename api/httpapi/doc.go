// Package httpapi serves Weir's HTTP API (docs/architecture.md §5.1) from
// the api.Decider and api.Operator it is handed: NewHandler, with Config
// bounding what it accepts. RequireTokens puts caller authentication in
// front of it. The JSON codec (the request decoders, a hand-written
// decoder and encoder for the hot POST /v1/take, and the check that a body
// decodes without loss) lives here too; the input checks, the error codes
// and the rate-limit header formats it applies are package api's.
//
// # Request bodies
//
// HTTP request bodies are one JSON object: unknown fields and trailing data
// are invalid (a misspelt "cost" must not silently charge 1), field names
// are matched exactly (lower case as documented: "KEY", "Key" and a
// Unicode case twin such as "\u212aey" are unknown, where encoding/json
// alone would fold them to "key") and may appear once per object (a
// duplicate is invalid, where encoding/json would let the last win), so a
// proxy that reads the body differently cannot be shown one request while
// Weir decides another; integers must be
// JSON integers (1.5, "1" and 1e3 are invalid), an omitted or null cost is 1,
// an explicit 0 is invalid. A body that is not valid UTF-8 or holds an
// unpaired surrogate escape is invalid (encoding/json would replace both with
// U+FFFD and collapse distinct keys into one bucket). Content-Type is not
// checked. A body over MaxBodyBytes (1 MiB) is 413
// {"error":"request_too_large"}. A check may carry an inline limit as
// "inline": {"algorithm", "capacity", "burst", "limit", "rate", "window"}.
//
// # Routes
//
//	POST   /v1/take               200 decision (allowed or not) | 400 | 413 | 503
//	GET    /v1/check?limit=&key=&cost=   200 allowed | 429 denied | 400 | 503
//	       [&key_header=H] [&deny_status=401|403]   for forward-auth proxies, below
//	POST   /v1/leases             201 {"id","fencing_token","ttl_ms"} | 429 | 400 | 503
//	POST   /v1/leases/{id}/renew  200 {"ttl_ms"} | 404 expired or unknown
//	DELETE /v1/leases/{id}        204, also when already released
//	GET    /v1/cluster[?limit=&key=]   200 members (+ "owner" when asked)
//	GET    /v1/ring               200 the ring for clients (weir.v1.Limiter GetRing)
//	DELETE /v1/cluster/members/{name}  204 forgotten | 404 unknown | 400 alive
//	GET    /v1/cluster/hot?limit=&n=   200 HotKeys | 400 (with an Operator)
//	GET    /v1/cluster/stats      200 ClusterStats (with an Operator)
//	GET    /ui/                   the status page (package api/ui), text/html
//	GET    /healthz               200 {"status":"ok"}
//	GET    /readyz                200 {"status":"ready"} | 503 {"status":"not_ready","reason":"..."}
//	GET    /metrics               the metrics handler given to NewHandler
//
// Other methods on these paths are 405 with Allow; other paths are 404, as
// are the two operator routes when NewHandler was given no Operator, and
// /metrics without a metrics handler. Every response except /metrics and
// /ui/ is application/json with Cache-Control: no-store.
// Errors are {"error":"<code>","detail":"..."}: invalid_request (400),
// request_too_large (413, no detail), not_found (404), method_not_allowed
// (405), limiter_unavailable (503, fail-closed limit or deadline),
// limiter_overloaded (503, no detail), internal_error (500), and, with
// caller tokens, unauthenticated (401) and forbidden (403).
//
// A denial by /v1/check is 429 with body
// {"error":"rate_limit_exceeded","limit":"export","retry_after_ms":500}
// (api.WriteDenied); a refused lease is 429
// {"error":"concurrency_limit_exceeded",...}. Bodies name the limit and
// never echo the key. Millisecond figures round up (retry_after_ms,
// reset_after_ms) or, for lease TTLs, down.
//
// /v1/check (200 and 429) carries the rate-limit headers of package api
// (SetHeaders), and the legacy X-RateLimit trio too when
// Config.LegacyHeaders is set. A /v1/take answers in its body, which holds
// every check's figures; it carries the same fields, for the result
// HeaderResult picks, only when the body asks ("headers": true), for a
// caller that passes them on to its own client (a forward-auth proxy uses
// /v1/check). Only a 429 carries Retry-After: a /v1/take denial is a 200
// whose body holds retry_after_ms. Leases carry api.SetLeaseHeaders'
// headers.
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
//     itself, never one it passes on from the client. A header that carries
//     a credential (Authorization, Proxy-Authorization, X-Weir-Token,
//     Cookie) is refused (400): a bucket key is no secret, /v1/cluster/hot
//     lists it.
//   - deny_status=401 or 403 answers a denial with that status instead of
//     429, with the same body and headers, because nginx's auth_request
//     accepts only 2xx, 401 and 403 from the endpoint; the proxy maps it back
//     to 429 (deploy/nginx/weir.conf). An allowed check is 200 regardless.
//
// # Evidence and the ring
//
// A take may ask for evidence ("evidence": true in the body): each result
// decided by a bucket then also carries "evidence": {"decider",
// "decided_at_ns","instance"} (see api.Evidence). It is for audits such as
// jepsen/'s checkers; without it the body is exactly docs/architecture.md
// §5.1's. A lease request with "evidence": true gets "source" ("owner" or
// "fallback") in its 201 or 429 body.
//
// A clustered node's /v1/take body also carries "ring_epoch", the epoch of
// the ring view that routed the take. GET /v1/ring publishes that view with
// the fields of weir.v1's RingResponse, from the Decider's Cluster asked
// with a context marked by api.ForRing.
//
// # Caller tokens
//
// RequireTokens authenticates every request except /healthz, /readyz and,
// unless protected, /metrics: the credential is X-Weir-Token (a forward-auth
// proxy's own) or Authorization: Bearer. A missing or unknown token is 401
// unauthenticated, with WWW-Authenticate, before the request is read; the
// caller's token goes into the request's context, where the authorizing
// Decider and Operator (package api/authz) check its scope, limits and key
// prefix before the node sees the call: a refusal is 403 forbidden and
// spends nothing.
//
// The status page's files under /ui/ load without a token (they hold no
// data). Its reads, GET /v1/cluster/stats and /v1/cluster/hot, may carry
// the session cookie weir_ui instead of a token: POST /ui/session with
// {"token":"..."} (application/json) exchanges a token with the read scope
// for it (204), HttpOnly, SameSite=Strict, Secure over TLS, for 12 h;
// DELETE /ui/session clears it. ui_session.go says what the cookie holds.
package httpapi
