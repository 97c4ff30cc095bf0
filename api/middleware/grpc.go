package middleware

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/api"
)

// GRPCConfig configures gRPC server interceptors. Taker and Key are
// required.
type GRPCConfig struct {
	// Taker decides; normally client.New(conn).
	Taker Taker
	// Key returns the bucket key of a call from its context (the
	// authenticated peer, peer.FromContext's address), never from metadata
	// the client could set. An error answers InvalidArgument.
	Key func(ctx context.Context, fullMethod string) (string, error)
	// Cost returns a call's cost; req is the request message of a unary
	// call and nil for a stream. Nil means 1. An error, or a cost below 1,
	// answers InvalidArgument.
	Cost func(ctx context.Context, fullMethod string, req any) (int64, error)
	// Routes limits methods by full name ("/pkg.Service/Method").
	Routes map[string]Route
	// Default limits every method not in Routes; nil leaves them unlimited.
	Default *Route
	// Timeout, LegacyHeaders, FallbackBuckets, Clock and Logger are as in
	// HTTPConfig.
	Timeout         time.Duration
	LegacyHeaders   bool
	FallbackBuckets int
	Clock           func() time.Time
	Logger          *slog.Logger
}

// GRPC holds gRPC server interceptors. It is safe for concurrent use.
type GRPC struct {
	c      *core
	cfg    GRPCConfig
	routes map[string]Route
}

// Validate reports why cfg is unusable: no Taker or Key, a negative
// Timeout or FallbackBuckets, a route that does not validate. It changes
// nothing.
func (cfg GRPCConfig) Validate() error {
	if err := validateCommon(cfg.Taker, cfg.Key == nil, cfg.Timeout, cfg.FallbackBuckets); err != nil {
		return err
	}
	for m, r := range cfg.Routes {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("%w (method %s)", err, m)
		}
	}
	if cfg.Default != nil {
		return cfg.Default.Validate()
	}
	return nil
}

// NewGRPC returns the interceptors of cfg, or the reason cfg is unusable
// (Validate).
func NewGRPC(cfg GRPCConfig) (*GRPC, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c, err := newCore(cfg.Taker, cfg.Timeout, cfg.FallbackBuckets, cfg.Clock, cfg.Logger)
	if err != nil {
		return nil, err
	}
	routes := make(map[string]Route, len(cfg.Routes))
	for m, r := range cfg.Routes {
		routes[m] = r
	}
	return &GRPC{c: c, cfg: cfg, routes: routes}, nil
}

// route returns the route of a method, false when it is not limited.
func (g *GRPC) route(method string) (Route, bool) {
	if r, ok := g.routes[method]; ok {
		return r, true
	}
	if g.cfg.Default != nil {
		return *g.cfg.Default, true
	}
	return Route{}, false
}

// check decides one call; a nil error lets it run, with md to send as
// header metadata (nil when nothing was decided).
func (g *GRPC) check(ctx context.Context, method string, req any) (metadata.MD, error) {
	route, ok := g.route(method)
	if !ok {
		return nil, nil
	}
	key, err := g.cfg.Key(ctx, method)
	if err != nil || key == "" {
		return nil, status.Error(codes.InvalidArgument, "no rate-limit key for this call")
	}
	cost := int64(1)
	if g.cfg.Cost != nil {
		if cost, err = g.cfg.Cost(ctx, method, req); err != nil || cost < 1 {
			return nil, status.Error(codes.InvalidArgument, "no valid rate-limit cost for this call")
		}
	}
	o := g.c.decide(ctx, route, key, cost)
	var md metadata.MD
	if o.decided {
		h := http.Header{}
		api.SetHeaders(h, o.resp, g.cfg.LegacyHeaders)
		md = make(metadata.MD, len(h))
		for k, v := range h {
			md[strings.ToLower(k)] = v
		}
	}
	switch o.v {
	case deny:
		return md, status.Errorf(codes.ResourceExhausted, "rate limit exceeded: limit %q", route.Limit)
	case unavailable:
		return nil, status.Error(codes.Unavailable, "rate limiter unavailable")
	case misrouted:
		return nil, status.Error(codes.Internal, "rate limiter misconfigured")
	}
	return md, nil
}

// UnaryServerInterceptor limits unary calls: a denial is ResourceExhausted
// with the rate-limit headers as header metadata, and the handler does not
// run; an allowed call carries them too.
func (g *GRPC) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		md, err := g.check(ctx, info.FullMethod, req)
		if md != nil {
			_ = grpc.SetHeader(ctx, md) // fails only when headers were sent, which they cannot have been
		}
		if err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// StreamServerInterceptor limits streams once, when they open (Cost gets a
// nil request), with the same answers as UnaryServerInterceptor.
func (g *GRPC) StreamServerInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		md, err := g.check(ss.Context(), info.FullMethod, nil)
		if md != nil {
			_ = ss.SetHeader(md)
		}
		if err != nil {
			return err
		}
		return handler(srv, ss)
	}
}
