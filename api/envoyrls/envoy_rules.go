package envoyrls

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/envoyconf"
)

// This file decides a ShouldRateLimit request by an envoyproxy/ratelimit
// configuration (Config.Rules), the way that service does.
//
// # Contract
//
// Each descriptor is matched on its own (envoyconf.Config.Match: most
// specific entry first, wildcards, nesting depth) and decided on its own,
// as envoyproxy/ratelimit does: one descriptor over its limit does not stop
// the others from being counted, and overall_code is OVER_LIMIT when any
// descriptor is. The domain restriction (Config.Domain), the bounds on
// descriptors and keys, and is_negative_hits are checked as in the
// generic_key mapping; a domain the configuration does not know matches
// nothing. Then, for descriptor i, in this order:
//
//	no rule matched, or the rule's name is replaced by another matched rule's replaces
//	                            → OK, no current_limit, nothing counted
//	unlimited                   → OK, limit_remaining 4294967295, nothing counted
//	hits 0                      → OK with current_limit, nothing counted
//	requests_per_unit 0, or hits over the rule's capacity
//	                            → OVER_LIMIT (OK under shadow_mode), remaining 0, nothing counted
//	otherwise                   → one Decider.Take of the rule's limit
//	                              (envoyconf.Rule.LimitName), key = the matched entries
//	                              rendered as in the generic_key mapping, cost = hits
//
// A descriptor's limit override (RateLimitDescriptor.limit), which
// envoyproxy/ratelimit would apply instead of its configuration, is ignored:
// the files are the only source of limits.
//
// Before any descriptor is taken, every descriptor a rule decides has its
// key rendered and checked, and the caller is authorized for all of them
// (Config.Authorize): a request refused for one descriptor (a bad key, a
// key or limit outside the caller's token) fails whole with nothing spent,
// as a /v1/take with several checks does.
//
// hits is the descriptor's hits_addend when set (0 included: ask without
// counting), else the request's, at least 1. The status of a take: code OK
// or OVER_LIMIT by its result (a shadow_mode rule's limit is a shadow limit:
// always OK), current_limit {name: rate_limit.name, requests_per_unit, unit}
// as configured, limit_remaining the remaining tokens, duration_until_reset
// the time until the bucket is full again: for the default fixed window,
// the end of the period.
//
// One difference from envoyproxy/ratelimit's counters: a denied request
// costs nothing in Weir, while envoyproxy/ratelimit adds its hits to the
// period's counter anyway. With hits 1 the decisions are the same; a large
// hits_addend that does not fit is refused and a smaller one after it may
// still fit.
//
// response_headers_to_add holds RateLimit-Policy and RateLimit for the
// result /v1/take would pick (the first denied descriptor, else the one
// with the least remaining) among the descriptors that have a limit, and
// Retry-After on OVER_LIMIT; none when no descriptor has a limit. An error
// of any take fails the whole call as in the generic_key mapping (never a
// silent OK), so Envoy's failure_mode_deny applies.

// decideRules answers req from cfg; see the contract above.
func (s *server) decideRules(ctx context.Context, cfg *envoyconf.Config, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if s.domain != "" && req.GetDomain() != s.domain {
		return nil, status.Errorf(codes.InvalidArgument, "domain %q is not served; this service serves %q", api.Clip(req.GetDomain()), s.domain)
	}
	descs := req.GetDescriptors()
	switch {
	case len(descs) == 0:
		return nil, status.Error(codes.InvalidArgument, "descriptors is empty")
	case len(descs) > s.lim.maxChecks:
		return nil, status.Errorf(codes.InvalidArgument, "descriptors has %d entries, over the %d maximum", len(descs), s.lim.maxChecks)
	}
	matches, replacing, err := matchRules(cfg, req)
	if err != nil {
		return nil, err
	}

	keys, err := s.authorizeRules(ctx, descs, matches, replacing, req)
	if err != nil {
		return nil, err
	}

	out := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(descs))}
	var limited []api.Result // for the headers
	var retry time.Duration
	for i, d := range descs {
		r := matches[i].Rule
		switch {
		case !ruled(r, replacing):
			out.Statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
			continue
		case r.Limit.Unlimited:
			out.Statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK, LimitRemaining: math.MaxUint32}
			continue
		}
		hits := envoyHits(d, req)
		current := &rlsv3.RateLimitResponse_RateLimit{
			Name: r.Limit.Name, RequestsPerUnit: r.Limit.RequestsPerUnit, Unit: rlsv3.RateLimitResponse_RateLimit_Unit(r.Limit.Unit),
		}
		if hits == 0 {
			out.Statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK, CurrentLimit: current}
			continue
		}
		if r.Limit.RequestsPerUnit == 0 || hits > uint64(r.Capacity()) {
			reset := untilPeriodEnd(s.now(), r.Limit.Unit.Duration())
			res := api.Result{Limit: r.LimitName(), Capacity: r.Capacity(), RetryAfter: reset, ResetAfter: reset, Window: r.Limit.Unit.Duration(), Allowed: r.ShadowMode}
			out.Statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{
				Code: envoyCode(res.Allowed), CurrentLimit: current, DurationUntilReset: durationpb.New(reset),
			}
			limited = append(limited, res)
			if !res.Allowed {
				out.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
				retry = max(retry, reset)
			}
			continue
		}
		resp, err := s.d.Take(ctx, []api.Check{{Limit: r.LimitName(), Key: keys[i], Cost: int64(hits)}})
		if err != nil {
			return nil, envoyStatus(ctx, err).Err()
		}
		if len(resp.Results) != 1 {
			return nil, status.Error(codes.Internal, "internal error")
		}
		res := resp.Results[0]
		res.Allowed = resp.Allowed
		reset := max(res.ResetAfter, res.RetryAfter)
		out.Statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{
			Code: envoyCode(res.Allowed), CurrentLimit: current,
			LimitRemaining: clampUint32(res.Remaining), DurationUntilReset: durationpb.New(reset),
		}
		limited = append(limited, res)
		if !res.Allowed {
			out.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
			retry = max(retry, res.RetryAfter)
		}
	}
	addRulesHeaders(out, limited, retry)
	return out, nil
}

// ruled reports whether a descriptor that matched r is decided by r's
// limit: a rule matched and no other matched rule replaces it.
func ruled(r *envoyconf.Rule, replacing map[string]bool) bool {
	return r != nil && (r.Limit.Unlimited || r.Limit.Name == "" || !replacing[r.Limit.Name])
}

// authorizeRules renders the bucket key of every descriptor a rule
// decides ("" for the others) and, before anything is spent, checks them
// all: each key must render within the bounds, and Config.Authorize must
// allow every (limit, key) of the request at once. So a request refused
// for any descriptor spends nothing for the others, as /v1/take refuses a
// take whole. Unlimited rules are authorized too: the caller learns
// nothing of a bucket it may not use.
func (s *server) authorizeRules(ctx context.Context, descs []*ratelimitv3.RateLimitDescriptor, matches []envoyconf.Match,
	replacing map[string]bool, req *rlsv3.RateLimitRequest,
) ([]string, error) {
	keys := make([]string, len(descs))
	checks := make([]api.Check, 0, len(descs))
	for i, d := range descs {
		m := matches[i]
		if !ruled(m.Rule, replacing) {
			continue
		}
		key, e := renderKey(i, len(m.Entries), func(j int) (string, string) { return m.Entries[j].Key, m.Entries[j].Value }, -1, s.lim.maxKeyBytes)
		if e != nil {
			return nil, envoyStatus(ctx, e).Err()
		}
		keys[i] = key
		checks = append(checks, api.Check{Limit: m.Rule.LimitName(), Key: key, Cost: int64(max(1, min(envoyHits(d, req), math.MaxInt64)))})
	}
	if s.authorize != nil {
		if err := s.authorize(ctx, checks); err != nil {
			return nil, envoyStatus(ctx, err).Err()
		}
	}
	return keys, nil
}

// matchRules matches each descriptor of req against cfg's rules, and
// collects the limit names the matched rules replace.
func matchRules(cfg *envoyconf.Config, req *rlsv3.RateLimitRequest) ([]envoyconf.Match, map[string]bool, error) {
	descs := req.GetDescriptors()
	matches := make([]envoyconf.Match, len(descs))
	replacing := map[string]bool{}
	for i, d := range descs {
		if d.GetIsNegativeHits() {
			return nil, nil, status.Errorf(codes.InvalidArgument, "descriptors[%d].is_negative_hits is not supported: a take cannot be refunded", i)
		}
		entries := make([]envoyconf.Entry, len(d.GetEntries()))
		for j, e := range d.GetEntries() {
			entries[j] = envoyconf.Entry{Key: e.GetKey(), Value: e.GetValue()}
		}
		matches[i] = cfg.Match(req.GetDomain(), entries)
		if r := matches[i].Rule; r != nil {
			for _, name := range r.Limit.Replaces {
				replacing[name] = true
			}
		}
	}

	return matches, replacing, nil
}

// addRulesHeaders sets out's response headers for the result /v1/take
// would pick among limited (none when no descriptor had a limit), and
// Retry-After (retry, rounded up) when the answer is OVER_LIMIT.
func addRulesHeaders(out *rlsv3.RateLimitResponse, limited []api.Result, retry time.Duration) {
	if hr, ok := api.HeaderResult(limited); ok {
		h := make(http.Header, 3)
		api.SetResultHeaders(h, hr, false)
		out.ResponseHeadersToAdd = []*corev3.HeaderValue{
			{Key: "RateLimit-Policy", Value: h.Get("RateLimit-Policy")},
			{Key: "RateLimit", Value: h.Get("RateLimit")},
		}
		if out.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT {
			out.ResponseHeadersToAdd = append(out.ResponseHeadersToAdd,
				&corev3.HeaderValue{Key: "Retry-After", Value: strconv.FormatInt(api.DenialSeconds(retry), 10)})
		}
	}
}

// envoyHits is envoyproxy/ratelimit's hits for descriptor d: its own
// hits_addend when set (0 included), else the request's, at least 1.
func envoyHits(d *ratelimitv3.RateLimitDescriptor, req *rlsv3.RateLimitRequest) uint64 {
	if h := d.GetHitsAddend(); h != nil {
		return h.GetValue()
	}
	return max(1, uint64(req.GetHitsAddend()))
}

// untilPeriodEnd is the time from now to the end of its period of length
// size counted from the Unix epoch, as envoyproxy/ratelimit's reset.
func untilPeriodEnd(now time.Time, size time.Duration) time.Duration {
	if size <= 0 {
		return 0
	}
	return size - time.Duration(now.UnixNano()%int64(size))
}
