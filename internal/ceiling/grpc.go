package ceiling

import (
	"context"

	"google.golang.org/grpc"

	"github.com/weir-rl/weir/api/weirv1"
)

// GRPC is the empty gRPC method Weir's gRPC API is measured against: Take
// allows without looking at the request. Its answer is the bare
// TakeResponse{Allowed: true}, not the shape of Weir's answer (compare
// Answer, which the HTTP ceiling writes), as make bench has always
// measured it.
type GRPC struct {
	weirv1.UnimplementedLimiterServer
}

// Take implements weirv1.LimiterServer.
func (GRPC) Take(context.Context, *weirv1.TakeRequest) (*weirv1.TakeResponse, error) {
	return &weirv1.TakeResponse{Allowed: true}, nil
}

// NewGRPCServer returns the gRPC ceiling's server: grpc-go's defaults with
// GRPC registered.
func NewGRPCServer() *grpc.Server {
	srv := grpc.NewServer()
	weirv1.RegisterLimiterServer(srv, GRPC{})
	return srv
}
