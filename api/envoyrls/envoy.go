package envoyrls

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/api/grpcapi"
	"github.com/weir-rl/weir/envoyconf"
)

// This file serves Envoy's global rate limit service,
// envoy.service.ratelimit.v3.RateLimitService, on a Decider, so that Envoy's
// HTTP and network ratelimit filters can use Weir with no sidecar. It is
// served on the same gRPC port as weir.v1.Limiter.
//
// # Contract
//
// This is the generic_key mapping, in force when Config.Rules gives no
// configuration. With an envoyproxy/ratelimit configuration loaded, the
// contract at the top of envoy_rules.go applies instead.
//
// A ShouldRateLimit request becomes ONE Decider.Take with one check per
// descriptor, in descriptor order: all descriptors are spent or none is, as
// with weir.v1 Take and POST /v1/take.
//
// Domain. When Config.Domain is not empty, a request whose domain
// differs is InvalidArgument (`domain "x" is not served; this service
// serves "weir"`). With Domain empty any domain is accepted. The domain is
// not part of the bucket: two domains sending the same descriptor share it.
//
// Descriptor → check. For each descriptor (entries in the order Envoy sends
// them, which is the order of the route's actions):
//
//   - The limit name is the value of the entry whose key is "generic_key"
//     (what Envoy's generic_key action sends by default), or, when the
//     descriptor has no such entry, of the entry whose key is "limit". The
//     chosen entry must appear exactly once. A descriptor with neither is
//     InvalidArgument and the Decider is not called.
//   - The bucket key is every other entry rendered "k=v", joined by ",", in
//     order: request_headers + remote_address give
//     "tenant=acme,remote_address=10.0.0.7". In keys and values, '%', ','
//     and '=' are written %25, %2C and %3D, so two different descriptors
//     never render to the same key (a header value "a,b=c" cannot reach the
//     bucket of two entries). A descriptor whose only entry is the limit gets
//     the key "*": one bucket for the whole limit (a rendered key always
//     holds '=' and cannot be "*").
//   - The cost is the descriptor's hits_addend when it is set, else the
//     request's hits_addend; 0 (the proto3 default) means 1. A cost above
//     math.MaxInt64 and is_negative_hits (a refund, which Weir cannot do)
//     are InvalidArgument. A descriptor's limit override is ignored: the
//     limits file is the only source of limits.
//   - The limit name and the key go through the same checks as every other
//     transport: not empty, at most MaxKeyBytes (512) bytes, valid UTF-8. An
//     entry with an empty key is invalid; an empty value is allowed. No more
//     than MaxDescriptors (100) descriptors, and at least one.
//
// An unknown limit is the Decider's CodeInvalid → InvalidArgument, unlike
// Envoy's reference service, which answers OK for a descriptor it has no
// rule for; Envoy then applies failure_mode_deny. Error details name the
// descriptor and the field, never a key or value.
//
// Answer. overall_code is OK when the take was allowed, OVER_LIMIT when it
// was not. statuses[] has one DescriptorStatus per descriptor, in order:
//
//	code                  OK or OVER_LIMIT for that descriptor's result
//	current_limit.name    the limit name
//	current_limit.requests_per_unit   the capacity (clamped to uint32)
//	current_limit.unit    the unit nearest the result's Window, see below
//	current_limit.unit_multiplier     Window/unit rounded to nearest, when ≥ 2
//	limit_remaining       the remaining tokens (clamped to [0, uint32])
//	duration_until_reset  ResetAfter: until the bucket is full again
//
// Envoy's Unit has no arbitrary window, so Window is approximated: the unit
// is the nearest of SECOND, MINUTE, HOUR and DAY on a logarithmic scale (the
// boundaries are the geometric means: a window under √60 s ≈ 7.7 s is
// SECOND, under √(60·3600) s ≈ 7.7 min MINUTE, under √(3600·86400) s ≈ 4.9 h
// HOUR, else DAY), and unit_multiplier is Window divided by that unit,
// rounded to the nearest integer (halves up), set only when it is 2 or more
// (absent means 1). A window that is a whole number of seconds under 7.7 s
// (3 s for capacity 6 at 2/s) is therefore exact; a longer window is exact
// when it is a whole number of its unit, else off by at most half a unit. A
// result with no Window has unit UNKNOWN and no multiplier.
//
// response_headers_to_add carries, for the result that the HTTP API's
// /v1/take would pick (the first denied descriptor, else the allowed one with
// the least remaining), in this order and with exactly the HTTP syntax
// (draft-ietf-httpapi-ratelimit-headers-10, see api.SetHeaders):
//
//	RateLimit-Policy: "export";q=6;w=3
//	RateLimit: "export";r=0;t=1
//	Retry-After: 1          only on OVER_LIMIT: whole seconds rounded up, at least 1
//
// Retry-After is the take's RetryAfter (the longest wait over the denied
// descriptors). The legacy X-RateLimit trio is not sent. request_headers_to_add
// is always empty; raw_body, dynamic_metadata and quota are not set.
//
// Errors. The service never answers OK when it could not decide:
//
//	Decider CodeUnavailable (fail-closed limit, owner unreachable)  → Unavailable
//	Decider CodeOverloaded (bucket cap reached)                     → Unavailable
//	the RPC's context ended before a decision                       → Unavailable
//	invalid request, wrong domain, Decider CodeInvalid              → InvalidArgument
//	Decider CodeNotFound                                            → NotFound
//	anything else (a Decider bug)                                   → Internal
//
// Envoy treats every error the same way: its failure_mode_deny setting
// decides whether the request passes (the default) or gets a 500.

// Config configures the Envoy rate limit service. Start from
// DefaultConfig; a zero bound means its default.
type Config struct {
	// Domain is the only RateLimitRequest.domain accepted; "" accepts any
	// domain. Default "".
	Domain string
	// MaxKeyBytes bounds a limit name and a rendered bucket key, in bytes.
	// Default 512, at least 1.
	MaxKeyBytes int
	// MaxDescriptors bounds the descriptors of one request (the checks of
	// one take). Default 100, at least 1.
	MaxDescriptors int
	// Rules returns the envoyproxy/ratelimit configuration in force (the
	// node's --envoy-config-dir), or nil when none is loaded; a nil func is
	// the same as always nil. With a configuration, descriptors are decided
	// by its rules (envoy_rules.go); without, by the generic_key mapping
	// above.
	Rules func() *envoyconf.Config
	// Authorize, when not nil, is asked before a request decided by the
	// rules (Rules) spends anything, with one check per descriptor a rule
	// decides; an error fails the whole call with nothing spent, mapped
	// like a Decider error (the node passes authz.Config.AuthorizeChecks,
	// so a PermissionDenied call never charges its other descriptors).
	// The generic_key mapping needs none: its descriptors are one take,
	// refused whole by the authorizing Decider. Nil: only the Decider
	// authorizes, one descriptor at a time.
	Authorize func(ctx context.Context, checks []api.Check) error
	// Now is the clock of the rules' fixed windows, for the reset time of a
	// rule that denies without a bucket (requests_per_unit: 0). Nil is
	// time.Now.
	Now func() time.Time
}

// DefaultConfig returns the defaults: any domain, and the bounds every
// front end shares (api.DefaultMaxKeyBytes, api.DefaultMaxChecks).
func DefaultConfig() Config {
	return Config{MaxKeyBytes: api.DefaultMaxKeyBytes, MaxDescriptors: api.DefaultMaxChecks}
}

// Validate reports a negative bound. It changes nothing.
func (c Config) Validate() error {
	switch {
	case c.MaxKeyBytes < 0:
		return errors.New("api: EnvoyConfig.MaxKeyBytes must not be negative")
	case c.MaxDescriptors < 0:
		return errors.New("api: EnvoyConfig.MaxDescriptors must not be negative")
	}
	return nil
}

// inputLimits are the bounds the service enforces before a Decider sees a
// request.
type inputLimits struct {
	maxKeyBytes int // bytes in a limit name or a rendered key
	maxChecks   int // descriptors of one request
}

func invalidf(format string, args ...any) error { return api.Errorf(api.CodeInvalid, format, args...) }

// Descriptor entry keys with a meaning of their own.
const (
	envoyLimitKey      = "generic_key" // Envoy's generic_key action
	envoyLimitAliasKey = "limit"
	envoyGlobalKey     = "*" // the key of a descriptor with no entry but the limit
)

// server implements rlsv3.RateLimitServiceServer on a Decider. It holds
// no mutable state and is safe for concurrent use.
type server struct {
	rlsv3.UnimplementedRateLimitServiceServer
	d      api.Decider
	domain string
	lim    inputLimits
	rules  func() *envoyconf.Config // nil: no rules, the generic_key mapping
	now    func() time.Time
	// authorize is Config.Authorize; nil authorizes nothing here.
	authorize func(ctx context.Context, checks []api.Check) error
}

// NewServer returns Envoy's envoy.service.ratelimit.v3.RateLimitService
// served from d, for rlsv3.RegisterRateLimitServiceServer. Zero bounds in
// cfg mean their defaults. The mapping of descriptors to checks, of results
// to the answer and of errors to status codes is the contract at the top of
// envoy.go. The server is safe for concurrent use.
func NewServer(d api.Decider, cfg Config) rlsv3.RateLimitServiceServer {
	def := DefaultConfig()
	if cfg.MaxKeyBytes <= 0 {
		cfg.MaxKeyBytes = def.MaxKeyBytes
	}
	if cfg.MaxDescriptors <= 0 {
		cfg.MaxDescriptors = def.MaxDescriptors
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &server{
		d:         d,
		domain:    cfg.Domain,
		lim:       inputLimits{maxKeyBytes: cfg.MaxKeyBytes, maxChecks: cfg.MaxDescriptors},
		rules:     cfg.Rules,
		now:       cfg.Now,
		authorize: cfg.Authorize,
	}
}

// Register registers NewServer(d, cfg) on s, typically the same
// *grpc.Server as grpcapi.Register.
func Register(s grpc.ServiceRegistrar, d api.Decider, cfg Config) {
	rlsv3.RegisterRateLimitServiceServer(s, NewServer(d, cfg))
}

// ShouldRateLimit implements rlsv3.RateLimitServiceServer.
func (s *server) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if s.rules != nil {
		if cfg := s.rules(); cfg != nil {
			return s.decideRules(ctx, cfg, req)
		}
	}
	checks, err := envoyChecks(req, s.domain, s.lim)
	if err != nil {
		return nil, envoyStatus(ctx, err).Err()
	}
	resp, err := s.d.Take(ctx, checks)
	if err != nil {
		return nil, envoyStatus(ctx, err).Err()
	}
	out, ok := envoyResponse(resp, len(checks))
	if !ok {
		return nil, status.Error(codes.Internal, "internal error")
	}
	return out, nil
}

// envoyStatus maps a decoding or Decider error to a status; see the contract.
func envoyStatus(ctx context.Context, err error) *status.Status {
	if e, ok := errors.AsType[*api.Error](err); ok {
		switch e.Code {
		case api.CodeUnavailable:
			return status.New(codes.Unavailable, e.Detail)
		case api.CodeOverloaded:
			detail := e.Detail
			if detail == "" {
				detail = "limiter overloaded"
			}
			return status.New(codes.Unavailable, detail)
		}
		return grpcapi.Status(err)
	}
	if ctx.Err() != nil {
		return status.New(codes.Unavailable, "no decision: "+context.Cause(ctx).Error())
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return status.New(codes.Unavailable, "no decision: "+err.Error())
	}
	return grpcapi.Status(err)
}

// envoyChecks converts and validates a RateLimitRequest into the checks of
// one take; every error is a CodeInvalid *Error whose detail never holds a
// descriptor's key or value.
func envoyChecks(req *rlsv3.RateLimitRequest, domain string, lim inputLimits) ([]api.Check, error) {
	if domain != "" && req.GetDomain() != domain {
		return nil, invalidf("domain %q is not served; this service serves %q", api.Clip(req.GetDomain()), domain)
	}
	descs := req.GetDescriptors()
	switch {
	case len(descs) == 0:
		return nil, invalidf("descriptors is empty")
	case len(descs) > lim.maxChecks: // bound before allocating
		return nil, invalidf("descriptors has %d entries, over the %d maximum", len(descs), lim.maxChecks)
	}
	checks := make([]api.Check, len(descs))
	for i, d := range descs {
		c, e := envoyCheck(i, d, req.GetHitsAddend(), lim)
		if e != nil {
			return nil, e
		}
		checks[i] = c
	}
	return checks, nil
}

// envoyCheck converts descriptor i.
func envoyCheck(i int, d *ratelimitv3.RateLimitDescriptor, hits uint32, lim inputLimits) (api.Check, error) {
	entries := d.GetEntries()
	nameKey := envoyLimitKey
	nameAt := -1
	for _, k := range [...]string{envoyLimitKey, envoyLimitAliasKey} {
		for j, e := range entries {
			if e.GetKey() != k {
				continue
			}
			if nameAt >= 0 {
				return api.Check{}, invalidf("descriptors[%d] has more than one %q entry", i, k)
			}
			nameAt = j
		}
		if nameAt >= 0 {
			nameKey = k
			break
		}
	}
	if nameAt < 0 {
		return api.Check{}, invalidf("descriptors[%d] has no %q or %q entry naming the limit", i, envoyLimitKey, envoyLimitAliasKey)
	}
	c := api.Check{Limit: entries[nameAt].GetValue(), Cost: int64(hits)}
	if e := api.ValidateField("descriptors["+strconv.Itoa(i)+"]."+nameKey, c.Limit, lim.maxKeyBytes); e != nil {
		return api.Check{}, e
	}

	if d.GetIsNegativeHits() {
		return api.Check{}, invalidf("descriptors[%d].is_negative_hits is not supported: a take cannot be refunded", i)
	}
	if h := d.GetHitsAddend(); h != nil {
		if h.GetValue() > math.MaxInt64 {
			return api.Check{}, invalidf("descriptors[%d].hits_addend is too large", i)
		}
		c.Cost = int64(h.GetValue())
	}
	if c.Cost == 0 {
		c.Cost = 1
	}

	key, e := envoyKey(i, entries, nameAt, lim.maxKeyBytes)
	if e != nil {
		return api.Check{}, e
	}
	c.Key = key
	return c, nil
}

// envoyResponse builds the answer to a take of n checks. ok is false when
// the Decider did not return one result per check.
func envoyResponse(resp api.TakeResponse, n int) (out *rlsv3.RateLimitResponse, ok bool) {
	if len(resp.Results) != n || n == 0 {
		return nil, false
	}
	out = &rlsv3.RateLimitResponse{
		OverallCode: envoyCode(resp.Allowed),
		Statuses:    make([]*rlsv3.RateLimitResponse_DescriptorStatus, n),
	}
	for i, r := range resp.Results {
		out.Statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{
			Code:               envoyCode(r.Allowed),
			CurrentLimit:       envoyLimit(r),
			LimitRemaining:     clampUint32(r.Remaining),
			DurationUntilReset: durationpb.New(max(0, r.ResetAfter)),
		}
	}
	hr, _ := api.HeaderResult(resp.Results)
	h := make(http.Header, 3)
	api.SetResultHeaders(h, hr, false)
	out.ResponseHeadersToAdd = []*corev3.HeaderValue{
		{Key: "RateLimit-Policy", Value: h.Get("RateLimit-Policy")},
		{Key: "RateLimit", Value: h.Get("RateLimit")},
	}
	if !resp.Allowed {
		secs := api.DenialSeconds(max(resp.RetryAfter, hr.RetryAfter))
		out.ResponseHeadersToAdd = append(out.ResponseHeadersToAdd,
			&corev3.HeaderValue{Key: "Retry-After", Value: strconv.FormatInt(secs, 10)})
	}
	return out, true
}

func envoyCode(allowed bool) rlsv3.RateLimitResponse_Code {
	if allowed {
		return rlsv3.RateLimitResponse_OK
	}
	return rlsv3.RateLimitResponse_OVER_LIMIT
}

// envoyLimit describes r's limit as an Envoy RateLimit; see the contract for
// the approximation of the window.
func envoyLimit(r api.Result) *rlsv3.RateLimitResponse_RateLimit {
	out := &rlsv3.RateLimitResponse_RateLimit{Name: r.Limit, RequestsPerUnit: clampUint32(r.Capacity)}
	if r.Window <= 0 {
		return out // unit UNKNOWN
	}
	unit, mult := envoyUnit(r.Window)
	out.Unit = unit
	if mult >= 2 {
		out.UnitMultiplier = wrapperspb.UInt32(mult)
	}
	return out
}

// envoyUnit returns the Envoy unit nearest w (w > 0) on a log scale and w in
// that unit rounded to the nearest integer (halves up), at least 1. A unit
// is chosen while w is under the geometric mean of it and the next one,
// compared squared: w² < a·b.
func envoyUnit(w time.Duration) (rlsv3.RateLimitResponse_RateLimit_Unit, uint32) {
	units := [...]struct {
		unit    rlsv3.RateLimitResponse_RateLimit_Unit
		d       time.Duration
		belowSq float64 // seconds²
	}{
		{rlsv3.RateLimitResponse_RateLimit_SECOND, time.Second, 1 * 60},
		{rlsv3.RateLimitResponse_RateLimit_MINUTE, time.Minute, 60 * 3600},
		{rlsv3.RateLimitResponse_RateLimit_HOUR, time.Hour, 3600 * 86400},
		{rlsv3.RateLimitResponse_RateLimit_DAY, 24 * time.Hour, math.Inf(1)},
	}
	secs := w.Seconds()
	i := 0
	for secs*secs >= units[i].belowSq {
		i++
	}
	u := units[i]
	n := w / u.d
	if w%u.d >= u.d/2 { // halves up, without overflowing near MaxInt64
		n++
	}
	return u.unit, uint32(min(max(int64(n), 1), math.MaxUint32))
}

func clampUint32(v int64) uint32 {
	return uint32(min(max(v, 0), math.MaxUint32))
}
