// Package envoyrls serves Envoy's global rate limit service,
// envoy.service.ratelimit.v3.RateLimitService, from the api.Decider it is
// handed (NewServer or Register, with Config), so that Envoy's HTTP and
// network ratelimit filters use Weir with no sidecar. It is registered on
// the same gRPC server as weir.v1.Limiter (package api/grpcapi), whose
// authentication covers it, and it is the only package of this module that
// imports Envoy's API (go-control-plane).
//
// A request is decided in one of two ways:
//
//   - the generic_key mapping (Config.Rules gives no configuration): each
//     descriptor is one check of one all-or-nothing take; the limit is the
//     "generic_key" (or "limit") entry's value, the key the other entries
//     escaped and joined, the cost hits_addend (0 means 1). The contract,
//     answers and error codes are at the top of envoy.go;
//   - an envoyproxy/ratelimit configuration (Config.Rules, package
//     envoyconf): each matched descriptor is its own take on the rule's
//     limit, and the answer is their OR. The contract is at the top of
//     envoy_rules.go.
//
// In both, the answer carries the RateLimit-Policy and RateLimit headers of
// the HTTP API (api.SetResultHeaders, without the legacy trio), and the
// service answers Unavailable, never a silent OK, when it cannot decide, so
// that Envoy's failure_mode_deny applies.
package envoyrls
