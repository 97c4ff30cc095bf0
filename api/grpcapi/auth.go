package grpcapi

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/weir-rl/weir/api/authz"
)

// tokenKey is the metadata key of a bare caller token, the HTTP API's
// X-Weir-Token in lower case.
const tokenKey = "x-weir-token"

// credential returns the token of an incoming call's metadata:
// x-weir-token, else the token of "authorization: Bearer TOKEN".
func credential(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(tokenKey); len(v) > 0 {
		return v[0]
	}
	if v := md.Get("authorization"); len(v) > 0 {
		return authz.Bearer(v[0])
	}
	return ""
}

// authenticate returns ctx with the caller's token, or the status error
// that refuses the call. Without a policy ctx is returned unchanged.
func authenticate(ctx context.Context, cfg authz.Config) (context.Context, error) {
	if cfg.Policy == nil || cfg.Policy() == nil {
		return ctx, nil // no policy: the API is open, and the metadata is not read
	}
	t, err := cfg.Credential(credential(ctx))
	if err != nil {
		return ctx, Status(err).Err()
	}
	if t == nil { // no policy: the API is open
		return ctx, nil
	}
	return authz.WithCaller(ctx, t), nil
}

// AuthInterceptors returns the unary and stream server interceptors that
// authenticate every call of a gRPC server (the weir.v1.Limiter service and
// Envoy's, on one server) under cfg's policy: metadata "x-weir-token:
// TOKEN" or "authorization: Bearer TOKEN", else Unauthenticated before the
// request is read, counted by cfg.OnFailure. The caller's token goes into
// the call's context for the authorizing Decider. Without a policy every
// call passes as it came.
func AuthInterceptors(cfg authz.Config) (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	unary := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		ctx, err := authenticate(ctx, cfg)
		if err != nil {
			return nil, err
		}
		return h(ctx, req)
	}
	stream := func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		ctx, err := authenticate(ss.Context(), cfg)
		if err != nil {
			return err
		}
		return h(srv, callerStream{ServerStream: ss, ctx: ctx})
	}
	return unary, stream
}

// callerStream is a ServerStream whose context carries the caller.
type callerStream struct {
	grpc.ServerStream
	ctx context.Context
}

// Context implements grpc.ServerStream.
func (s callerStream) Context() context.Context { return s.ctx }
