package client

import (
	"context"

	"google.golang.org/grpc"
)

// tokenCreds sends a caller token on every call as "authorization: Bearer
// TOKEN". Unless plaintext is allowed it requires a secure transport, so
// gRPC refuses to send the token in the clear (the call fails with
// Unavailable before anything is sent).
type tokenCreds struct {
	header    map[string]string
	plaintext bool
}

func newTokenCreds(token string, plaintext bool) tokenCreds {
	return tokenCreds{header: map[string]string{"authorization": "Bearer " + token}, plaintext: plaintext}
}

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (c tokenCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return c.header, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials.
func (c tokenCreds) RequireTransportSecurity() bool { return !c.plaintext }

// tokenConn adds the token to every call on a caller-owned connection
// (New, NewWith), whose dial options the client cannot set.
type tokenConn struct {
	grpc.ClientConnInterface
	opt grpc.CallOption
}

func (c tokenConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	return c.ClientConnInterface.Invoke(ctx, method, args, reply, append(opts, c.opt)...)
}

func (c tokenConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return c.ClientConnInterface.NewStream(ctx, desc, method, append(opts, c.opt)...)
}
