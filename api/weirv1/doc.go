// Package weirv1 is the generated Go code of Weir's public gRPC contract,
// limiter.proto in this directory (service weir.v1.Limiter). Do not edit the
// *.pb.go files: change the .proto and run `make proto` (scripts/proto.sh).
//
// The server side lives in package api/grpcapi (NewServer); callers use
// NewLimiterClient on a *grpc.ClientConn.
package weirv1
