package transport

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// tokenHeader is the gRPC metadata key that carries the peer token, hex
// encoded. Metadata keys are lower case on the wire.
const tokenHeader = "weir-peer-token"

// Key derivation labels. The salt fixes the scheme; each info string gives
// one independent key, so the gossip key and the peer token never equal or
// reveal each other, and neither reveals the secret.
const (
	kdfSalt        = "weir cluster secret v1"
	kdfGossipInfo  = "weir gossip key v1"
	kdfPeerTokInfo = "weir peer token v1"
)

// maxSecretFile bounds what ReadSecretFile reads, so a wrong path (a log
// file, a device) fails instead of filling memory.
const maxSecretFile = 64 << 10

// ErrEmptySecret is returned by ReadSecretFile for a file that holds only
// whitespace.
var ErrEmptySecret = errors.New("transport: cluster secret is empty")

// DeriveKeys derives, from the cluster secret (any passphrase), the 32-byte
// AES-256 key for memberlist gossip encryption and the 32-byte token that
// authenticates calls to the peer service. It is HKDF-SHA256 (RFC 5869)
// with a fixed salt and one info label per key, written with crypto/hmac so
// that it has no error path. Equal secrets give equal keys on every node.
//
// An empty secret derives keys too, but they protect nothing; callers
// should read the secret with ReadSecretFile, which rejects it.
func DeriveKeys(secret []byte) (gossipKey [32]byte, peerToken []byte) {
	prk := hmacSHA256([]byte(kdfSalt), secret)
	copy(gossipKey[:], hkdfExpand32(prk, kdfGossipInfo))
	return gossipKey, hkdfExpand32(prk, kdfPeerTokInfo)
}

// hkdfExpand32 is HKDF-Expand for one 32-byte block: T(1) = HMAC(prk, info || 0x01).
func hkdfExpand32(prk []byte, info string) []byte {
	return hmacSHA256(prk, append([]byte(info), 1))
}

func hmacSHA256(key, msg []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(msg)
	return m.Sum(nil)
}

// ReadSecretFile reads a cluster secret from path. The file may hold any
// passphrase; surrounding whitespace (a trailing newline, say) is ignored.
// A file that is empty after trimming is ErrEmptySecret.
func ReadSecretFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("transport: read cluster secret: %w", err)
	}
	defer f.Close()
	buf, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return nil, fmt.Errorf("transport: read cluster secret %s: %w", path, err)
	}
	if len(buf) > maxSecretFile {
		return nil, fmt.Errorf("transport: cluster secret %s is larger than %d bytes", path, maxSecretFile)
	}
	secret := bytes.TrimSpace(buf)
	if len(secret) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrEmptySecret, path)
	}
	return bytes.Clone(secret), nil
}

// tokenCreds attaches the peer token to every outgoing call. It
// implements credentials.PerRPCCredentials; the map is built once and
// only read by gRPC.
type tokenCreds struct{ md map[string]string }

func newTokenCreds(token []byte) tokenCreds {
	return tokenCreds{md: map[string]string{tokenHeader: hex.EncodeToString(token)}}
}

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (c tokenCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return c.md, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials. The
// token is sent over plaintext until the peer port gets TLS (a later
// issue): it is derived one way from the secret, so an eavesdropper learns
// neither the secret nor the gossip key, but can replay the token.
func (tokenCreds) RequireTransportSecurity() bool { return false }

// verifier checks the peer token of incoming calls in constant time.
type verifier struct {
	want []byte // hex encoded token; empty disables the check
}

func newVerifier(token []byte) verifier {
	if len(token) == 0 {
		return verifier{}
	}
	return verifier{want: []byte(hex.EncodeToString(token))}
}

var errUnauthenticated = status.Error(codes.Unauthenticated, "transport: missing or wrong peer token")

// check returns an Unauthenticated status unless ctx carries the token.
func (v verifier) check(ctx context.Context) error {
	if len(v.want) == 0 {
		return nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	got := md[tokenHeader]
	if len(got) != 1 || subtle.ConstantTimeCompare([]byte(got[0]), v.want) != 1 {
		return errUnauthenticated
	}
	return nil
}

// unary is the unary server interceptor: the handler runs only for a
// caller that holds the token.
func (v verifier) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := v.check(ctx); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

// stream is the stream server interceptor, for the streaming methods the
// peer service will grow (replication).
func (v verifier) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if err := v.check(ss.Context()); err != nil {
		return err
	}
	return h(srv, ss)
}
