package grpcapi

import (
	"context"
	"errors"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/api/weirv1"
)

// Config bounds what the service accepts before calling a Decider. Start
// from DefaultConfig; a zero field means its default.
type Config struct {
	// MaxKeyBytes bounds a key, a limit name and a lease holder, in bytes.
	// Default 512 (api.DefaultMaxKeyBytes), at least 1.
	MaxKeyBytes int
	// MaxChecks bounds the checks of one take. Default 100
	// (api.DefaultMaxChecks), at least 1.
	MaxChecks int
}

// DefaultConfig returns the defaults, the bounds every front end shares.
func DefaultConfig() Config {
	return Config{MaxKeyBytes: api.DefaultMaxKeyBytes, MaxChecks: api.DefaultMaxChecks}
}

// Validate reports a negative bound. It changes nothing.
func (c Config) Validate() error {
	switch {
	case c.MaxKeyBytes < 0:
		return errors.New("api: GRPCConfig.MaxKeyBytes must not be negative")
	case c.MaxChecks < 0:
		return errors.New("api: GRPCConfig.MaxChecks must not be negative")
	}
	return nil
}

// inputLimits are the bounds the service enforces before a Decider sees a
// request.
type inputLimits struct {
	maxKeyBytes int // bytes in a limit name, key or lease holder
	maxChecks   int // checks in one take
}

func invalidf(format string, args ...any) error { return api.Errorf(api.CodeInvalid, format, args...) }

// Server implements weirv1.LimiterServer on a Decider. It is safe for
// concurrent use; its one mutable state is whether it drains (Drain).
type Server struct {
	weirv1.UnimplementedLimiterServer
	d         api.Decider
	lim       inputLimits
	drain     chan struct{}
	drainOnce sync.Once
}

// NewServer returns the weir.v1.Limiter service served from d, for
// weirv1.RegisterLimiterServer. Zero bounds in cfg mean their defaults.
// Decider errors map to status codes as Status maps them. The server is
// safe for concurrent use.
func NewServer(d api.Decider, cfg Config) *Server {
	def := DefaultConfig()
	if cfg.MaxKeyBytes <= 0 {
		cfg.MaxKeyBytes = def.MaxKeyBytes
	}
	if cfg.MaxChecks <= 0 {
		cfg.MaxChecks = def.MaxChecks
	}
	return &Server{d: d, lim: inputLimits{maxKeyBytes: cfg.MaxKeyBytes, maxChecks: cfg.MaxChecks}, drain: make(chan struct{})}
}

// Register registers NewServer(d, cfg) on s and returns it.
func Register(s grpc.ServiceRegistrar, d api.Decider, cfg Config) *Server {
	srv := NewServer(d, cfg)
	weirv1.RegisterLimiterServer(s, srv)
	return srv
}

// Drain ends every TakeStream, open and new, with Unavailable, each once
// the request it is deciding is answered: a client keeps its stream open
// for as long as it runs, and a graceful gRPC stop would otherwise wait
// for it until its own bound ran out. The Go client retries the takes it
// had in flight, with their request ids, at another member. Unary calls
// are left to the graceful stop. Calling it twice is harmless.
func (s *Server) Drain() { s.drainOnce.Do(func() { close(s.drain) }) }

// Status converts an input-check or Decider error to the status the service
// answers with: CodeInvalid → InvalidArgument, CodeNotFound → NotFound,
// CodeUnavailable → Unavailable, CodeOverloaded → ResourceExhausted,
// CodeUnauthenticated → Unauthenticated, CodeForbidden → PermissionDenied,
// CodeQuota → ResourceExhausted,
// each with the detail as the message; a context error → its own code;
// anything else → Internal "internal error".
func Status(err error) *status.Status {
	if e, ok := errors.AsType[*api.Error](err); ok {
		switch e.Code {
		case api.CodeInvalid:
			return status.New(codes.InvalidArgument, e.Detail)
		case api.CodeNotFound:
			return status.New(codes.NotFound, e.Detail)
		case api.CodeUnavailable:
			return status.New(codes.Unavailable, e.Detail)
		case api.CodeOverloaded:
			return status.New(codes.ResourceExhausted, e.Detail)
		case api.CodeUnauthenticated:
			return status.New(codes.Unauthenticated, e.Detail)
		case api.CodeForbidden:
			return status.New(codes.PermissionDenied, e.Detail)
		case api.CodeQuota:
			return status.New(codes.ResourceExhausted, e.Detail)
		}
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return status.FromContextError(err)
	}
	return status.New(codes.Internal, "internal error")
}

// checksFromProto converts and validates the checks of a TakeRequest. A cost
// of 0 is the proto3 default and means 1; a negative cost is invalid.
func checksFromProto(in []*weirv1.Check, lim inputLimits) ([]api.Check, error) {
	if len(in) > lim.maxChecks { // bound before allocating
		return nil, invalidf("checks has %d entries, over the %d maximum", len(in), lim.maxChecks)
	}
	checks := make([]api.Check, len(in))
	for i, c := range in {
		checks[i] = api.Check{Limit: c.GetLimit(), Key: c.GetKey(), Cost: c.GetCost(), Inline: inlineFromProto(c.GetInline())}
		if checks[i].Cost == 0 {
			checks[i].Cost = 1
		}
	}
	if err := api.ValidateChecks(checks, lim.maxKeyBytes, lim.maxChecks); err != nil {
		return nil, err
	}
	return checks, nil
}

func sourceToProto(s api.Source) weirv1.Source {
	switch s {
	case api.SourceFallback:
		return weirv1.Source_SOURCE_FALLBACK
	case api.SourceAllotment:
		return weirv1.Source_SOURCE_ALLOTMENT
	}
	return weirv1.Source_SOURCE_OWNER
}

func takeResponseToProto(resp api.TakeResponse) *weirv1.TakeResponse {
	var out *weirv1.TakeResponse
	if len(resp.Results) == 1 {
		// One allocation for the whole answer of a one-check take.
		a := &takeAnswer1{}
		out, a.ptrs[0] = &a.resp, &a.res
		out.Results = a.ptrs[:]
	} else {
		out = &weirv1.TakeResponse{Results: make([]*weirv1.Result, len(resp.Results))}
	}
	out.Allowed = resp.Allowed
	out.RetryAfterMs = api.MillisUp(resp.RetryAfter)
	out.RulesVersion = resp.RulesVersion
	out.RingEpoch, out.Forwarded = resp.RingEpoch, resp.Forwarded
	for i, r := range resp.Results {
		p := out.Results[i]
		if p == nil {
			p = &weirv1.Result{}
			out.Results[i] = p
		}
		p.Limit, p.Allowed = r.Limit, r.Allowed
		p.Remaining, p.Capacity = r.Remaining, r.Capacity
		p.RetryAfterMs, p.ResetAfterMs = api.MillisUp(r.RetryAfter), api.MillisUp(r.ResetAfter)
		p.Source, p.WindowMs = sourceToProto(r.Source), api.MillisUp(r.Window)
	}
	return out
}

// takeAnswer1 is a one-result TakeResponse in one allocation: the message,
// its results slice and its result. The messages are built in place and
// never copied.
type takeAnswer1 struct {
	resp weirv1.TakeResponse
	ptrs [1]*weirv1.Result
	res  weirv1.Result
}

// take decides one TakeRequest; it is shared by Take and TakeStream.
func (s *Server) take(ctx context.Context, req *weirv1.TakeRequest) (*weirv1.TakeResponse, error) {
	checks, err := checksFromProto(req.GetChecks(), s.lim)
	if err != nil {
		return nil, err
	}
	if id := req.GetRequestId(); len(id) > 0 {
		if len(id) > api.MaxRequestIDBytes {
			return nil, invalidf("request_id has %d bytes, over the %d maximum", len(id), api.MaxRequestIDBytes)
		}
		ctx = api.WithRequestID(ctx, string(id))
	}
	resp, err := s.d.Take(ctx, checks)
	if err != nil {
		return nil, err
	}
	out := takeResponseToProto(resp)
	out.Id = req.GetId()
	if req.GetEvidence() {
		for i, r := range resp.Results {
			if ev := r.Evidence; ev.Run != "" {
				out.Results[i].Evidence = &weirv1.Evidence{Decider: ev.Decider(), DecidedAtNs: ev.DecidedAt.UnixNano(), Instance: ev.Instance()}
			}
		}
	}
	return out, nil
}

// Take implements weirv1.LimiterServer.
func (s *Server) Take(ctx context.Context, req *weirv1.TakeRequest) (*weirv1.TakeResponse, error) {
	out, err := s.take(ctx, req)
	if err != nil {
		return nil, Status(err).Err()
	}
	return out, nil
}

// acquireFromProto converts and validates an AcquireRequest.
func acquireFromProto(req *weirv1.AcquireRequest, lim inputLimits) (api.AcquireRequest, error) {
	return api.NewAcquireRequest(req.GetLimit(), req.GetKey(), req.GetHolder(), req.GetTtlMs(), req.GetWaitMs(), lim.maxKeyBytes)
}

// Acquire implements weirv1.LimiterServer. A refusal is a response with
// granted false, not an error.
func (s *Server) Acquire(ctx context.Context, req *weirv1.AcquireRequest) (*weirv1.AcquireResponse, error) {
	in, err := acquireFromProto(req, s.lim)
	if err != nil {
		return nil, Status(err).Err()
	}
	resp, err := s.d.Acquire(ctx, in)
	if err != nil {
		return nil, Status(err).Err()
	}
	return &weirv1.AcquireResponse{
		Granted:      resp.Granted,
		Id:           resp.ID,
		FencingToken: resp.FencingToken,
		TtlMs:        api.MillisDown(resp.TTL),
		Permits:      resp.Permits,
		RetryAfterMs: api.MillisUp(resp.RetryAfter),
		Source:       sourceToProto(resp.Source),
		RulesVersion: resp.RulesVersion,
		RingEpoch:    resp.RingEpoch,
		Forwarded:    resp.Forwarded,
	}, nil
}

// Renew implements weirv1.LimiterServer.
func (s *Server) Renew(ctx context.Context, req *weirv1.RenewRequest) (*weirv1.RenewResponse, error) {
	if err := api.ValidateLeaseID(req.GetId()); err != nil {
		return nil, Status(err).Err()
	}
	ttl, err := api.Milliseconds("ttl_ms", req.GetTtlMs())
	if err != nil {
		return nil, Status(err).Err()
	}
	got, err := s.d.Renew(ctx, req.GetId(), ttl)
	if err != nil {
		return nil, Status(err).Err()
	}
	return &weirv1.RenewResponse{TtlMs: api.MillisDown(got)}, nil
}

// Release implements weirv1.LimiterServer.
func (s *Server) Release(ctx context.Context, req *weirv1.ReleaseRequest) (*weirv1.ReleaseResponse, error) {
	if err := api.ValidateLeaseID(req.GetId()); err != nil {
		return nil, Status(err).Err()
	}
	if err := s.d.Release(ctx, req.GetId()); err != nil {
		return nil, Status(err).Err()
	}
	return &weirv1.ReleaseResponse{}, nil
}

// inlineFromProto converts a gRPC inline limit; nil stays nil.
func inlineFromProto(m *weirv1.InlineLimit) *api.InlineLimit {
	if m == nil {
		return nil
	}
	return &api.InlineLimit{
		Algorithm: m.GetAlgorithm(), Capacity: m.GetCapacity(), Burst: m.GetBurst(),
		Limit: m.GetLimit(), Rate: m.GetRate(), Window: m.GetWindow(),
	}
}
