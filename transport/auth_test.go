package transport

import (
	"bytes"
	"context"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// TestDeriveKeysIsHKDF checks the hand-written derivation against the
// standard library's RFC 5869 implementation.
func TestDeriveKeysIsHKDF(t *testing.T) {
	for _, secret := range []string{"correct horse battery staple", "x", "a much longer passphrase with spaces and ünïcode"} {
		gossip, token := DeriveKeys([]byte(secret))
		wantGossip, err := hkdf.Key(sha256.New, []byte(secret), []byte(kdfSalt), kdfGossipInfo, 32)
		if err != nil {
			t.Fatal(err)
		}
		wantToken, err := hkdf.Key(sha256.New, []byte(secret), []byte(kdfSalt), kdfPeerTokInfo, 32)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(gossip[:], wantGossip) || !bytes.Equal(token, wantToken) {
			t.Errorf("secret %q: DeriveKeys differs from hkdf.Key", secret)
		}
	}
}

func TestDeriveKeysSeparatesDomains(t *testing.T) {
	g1, t1 := DeriveKeys([]byte("secret-one"))
	g1b, t1b := DeriveKeys([]byte("secret-one"))
	g2, t2 := DeriveKeys([]byte("secret-two"))
	if g1 != g1b || !bytes.Equal(t1, t1b) {
		t.Fatal("DeriveKeys is not deterministic")
	}
	if bytes.Equal(g1[:], t1) {
		t.Fatal("gossip key equals peer token")
	}
	if g1 == g2 || bytes.Equal(t1, t2) {
		t.Fatal("different secrets give equal keys")
	}
	if len(t1) != 32 {
		t.Fatalf("peer token is %d bytes, want 32", len(t1))
	}
	if bytes.Contains(t1, []byte("secret-one")) || bytes.Contains(g1[:], []byte("secret-one")) {
		t.Fatal("derived key contains the secret")
	}
}

func TestReadSecretFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	got, err := ReadSecretFile(write("a", "  my pass phrase \n\n"))
	if err != nil || string(got) != "my pass phrase" {
		t.Fatalf("ReadSecretFile = %q, %v; want %q", got, err, "my pass phrase")
	}
	same, err := ReadSecretFile(write("b", "my pass phrase"))
	if err != nil {
		t.Fatal(err)
	}
	ga, _ := DeriveKeys(got)
	gb, _ := DeriveKeys(same)
	if ga != gb {
		t.Fatal("surrounding whitespace changed the derived key")
	}
	if _, err := ReadSecretFile(write("c", " \t\n")); !errors.Is(err, ErrEmptySecret) {
		t.Fatalf("whitespace-only file: err = %v, want ErrEmptySecret", err)
	}
	if _, err := ReadSecretFile(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: err = %v, want ErrNotExist", err)
	}
	if _, err := ReadSecretFile(write("d", string(make([]byte, maxSecretFile+1)))); err == nil {
		t.Fatal("oversized file accepted")
	}
}

// fakeStream is a grpc.ServerStream with only a context.
type fakeStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (f fakeStream) Context() context.Context { return f.ctx }

func TestStreamInterceptor(t *testing.T) {
	_, token := DeriveKeys([]byte("s"))
	v := newVerifier(token)
	withToken := func(tok string) context.Context {
		return metadata.NewIncomingContext(context.Background(), metadata.Pairs(tokenHeader, tok))
	}
	tests := []struct {
		name string
		ctx  context.Context
		ok   bool
	}{
		{"right token", withToken(hex.EncodeToString(token)), true},
		{"no metadata", context.Background(), false},
		{"wrong token", withToken(hex.EncodeToString(make([]byte, 32))), false},
		{"raw instead of hex", withToken(string(token)), false},
	}
	for _, tt := range tests {
		called := false
		err := v.stream(nil, fakeStream{ctx: tt.ctx}, &grpc.StreamServerInfo{}, func(any, grpc.ServerStream) error {
			called = true
			return nil
		})
		if called != tt.ok || (err == nil) != tt.ok {
			t.Errorf("%s: handler called %v, err %v", tt.name, called, err)
		}
		if !tt.ok && status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s: code %v, want Unauthenticated", tt.name, status.Code(err))
		}
	}
	// Two values for the key are refused, even if one is right.
	md := metadata.Pairs(tokenHeader, hex.EncodeToString(token), tokenHeader, "x")
	if err := v.check(metadata.NewIncomingContext(context.Background(), md)); status.Code(err) != codes.Unauthenticated {
		t.Errorf("two tokens: err %v", err)
	}
	// An empty server token accepts anything.
	if err := newVerifier(nil).check(context.Background()); err != nil {
		t.Errorf("empty token: %v", err)
	}
}
