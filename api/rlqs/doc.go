// Package rlqs serves Envoy's rate limit quota service (RLQS),
// envoy.service.rate_limit_quota.v3.RateLimitQuotaService, from the
// allotments of the api.Decider it is handed (Decider.Allot): Envoy's
// rate_limit_quota filter reports each bucket's usage on a bidirectional
// stream, and the server answers with quota assignments the proxy then
// enforces in its own memory. It is the allotment protocol
// (docs/architecture.md §13) with Envoy as the holder. The node registers
// it on the gRPC port of weir.v1.Limiter and Envoy's rate limit service,
// whose authentication covers it.
//
// # Holders and buckets
//
// Each stream is one holder, named "rlqs:" and 16 random hex digits (the
// node records it as a client holder, "client:rlqs:…"). A bucket id maps
// to a limit and a key of the limits file: its "name" entry names the
// limit, and every other entry, sorted by its key, forms the key as "k=v"
// joined by "," with '%', ',' and '=' percent-encoded (api.AppendKeyPart),
// the same key Envoy's rate limit service builds from a descriptor with
// those entries in that order; a bucket id with only "name" is the key
// "*". The limit must be a token_bucket limit with allotments: auto, and
// its allotment_ttl sets how long an assignment may live (below).
//
// # Answers
//
// A report is answered per bucket, in the report's order; a bucket not
// due for an answer gets none (the proxy keeps its assignment):
//
//   - a bucket due for a refresh (its first report, or any later one at
//     least MinRefresh after its last ask) asks its owner for an
//     allotment: Want enough for its strategy over an allotment's life,
//     Demand the requests (allowed and denied) reported per second,
//     Unspent what the proxy may still admit under what it was sent (its
//     exposure, below), Seq the last answer's. The answer becomes a
//     quota_assignment_action with a token_bucket fitted into what the
//     owner then counts outstanding for the stream;
//   - when the owner's bucket is empty (the answer's RetryAfter) and the
//     proxy's current token bucket cannot be extended from what is still
//     held: a DENY_ALL blanket_rule whose time to live is the retry-after
//     (whole seconds, at least 1), with no ask until it has passed;
//   - a bucket that cannot be allotted at all (unknown limit, a limit
//     without allotments, a key the caller's token may not use, or a
//     bucket over MaxBucketsPerStream or MaxBuckets): DENY_ALL for
//     RefusedTTL, asked again after it. Envoy's "no assignment" default
//     would allow everything; a deny is the protocol's way to say no;
//   - the owner unreachable or overloaded: no answer; the proxy applies
//     its assignment until it expires, then its expired_assignment_behavior;
//   - a bucket that reported no request for AbandonAfter: abandon_action,
//     and the stream forgets it (the proxy starts over if it comes back).
//
// Strategies are token buckets: tokens_per_fill per fill_interval is the
// rate asked for (the reported demand, at most the limit's rate, less when
// the owner grants less), max_tokens a tenth of a second of it as burst,
// fill_interval a whole number of seconds fixed for the bucket's life on
// the stream (1 s, or the seconds one token of the limit takes when its
// rate is under 1/s). Envoy reads only the seconds of
// assignment_time_to_live and fill_interval, so both are whole seconds.
// An assignment lives at most three report intervals (so the proxy holds
// little of the bucket's future refill), at least the report interval and
// Margin when it can (so the next report extends it). While a new
// strategy would not have a rate more than 1.5 times the current one (and
// the demand has not fallen under half of it), the same strategy is sent
// again, which Envoy treats as extending the assignment: it keeps its
// bucket and restarts the time to live.
//
// # The bound
//
// A token bucket of max_tokens M and rate ρ admits at most M + ρ·(e − t)
// from any time t until it expires at e, whatever it holds at t. Envoy
// counts a time to live from when it receives the assignment, at most
// Margin after it was sent; so an assignment sent at s with time to live
// T admits at most M + ρ·(s + Margin + T − t) from t on. Envoy keeps the
// bucket it has when the strategy is unchanged and the old assignment is
// still in force when the new one arrives; otherwise it starts the new
// bucket full, and the old one may still admit until then, at most M_old
// + ρ_old·Margin: carried. The exposure F(t) is the sum of these terms.
//
// The owner's bound (docs/architecture.md §13.1) needs every holder to
// spend between two asks at most what the owner counted outstanding at
// the first, less the Unspent it reports at the second. F alone does not
// give that: between two asks a proxy may spend its bucket and refill it,
// so what it admits plus F at the second ask can exceed F at the first by
// up to max_tokens. Each answer therefore keeps M of the current token
// bucket as a reserve:
//
//	F(ask) + M ≤ Unspent + Tokens          (what the owner then counts)
//	slack   = ⌊Unspent + Tokens − F(ask)⌋
//	Unspent at the next ask = ⌈F(next)⌉ + slack − M
//
// and a bucket asks again only once its last assignment has surely
// arrived (Margin after it was sent), so the carried terms have ended.
// Then what the proxy admits between the asks plus the next Unspent is at
// most what the owner counted, and the next Unspent still covers
// everything the proxy may admit after it. Assignments never outlive the
// holding that pays for them: T ≤ the answer's TTL − Margin − the time
// since the ask, in whole seconds (under a second: DENY_ALL). So over any
// window of length τ, proxies, nodes and clients together admit at most
// capacity + rate·τ. TestPlanNeverSpendsMoreThanHeld checks the
// condition against Envoy's bucket semantics with random grants, delays
// and report intervals; the node's TestRLQSNeverExceedsTheBucket checks
// the bound end to end.
//
// The bound needs Envoy to admit nothing it was not assigned: the
// filter's no_assignment_behavior and expired_assignment_behavior must be
// DENY_ALL (Envoy's default for both is to allow everything); the README
// shows such a configuration. Requests a proxy admits without an
// assignment are outside the bound. The reserve and what a quiet proxy
// leaves unspent are held back from the other holders until the next
// ask: the safe side.
//
// # Streams that end
//
// A stream that ends, closed or broken, returns nothing: the proxy may
// still apply its assignments until they expire, and the holdings at the
// owners expire after them. Server.Drain (the node calls it as it shuts
// down) ends every stream with Unavailable, since Envoy never closes one
// and a graceful gRPC stop would wait for it. A proxy that reconnects (to this node after a
// restart, or to another) is a new holder: its buckets start over with
// their first report, and the old holdings expire by themselves.
//
// # Bad input
//
// A report is checked whole before anything changes; a bad one ends the
// stream with InvalidArgument: no domain in the stream's first report, a
// domain other than the first (or than Config.Domain when set), more
// than MaxUsages usages, a bucket id that is empty, has more than
// MaxEntries entries, an entry with an empty key, no "name" entry, or a
// limit or key over MaxKeyBytes or not UTF-8. More than MaxStreams
// streams is ResourceExhausted. Memory is bounded by MaxStreams ×
// MaxBucketsPerStream and by MaxBuckets over all streams, each bucket
// holding its id (MaxEntries entries within MaxKeyBytes) and a few
// carried terms (at most eight).
package rlqs
