package transport

import (
	"bytes"
	"crypto/hkdf"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"testing"
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
		wantToken, err := hkdf.Key(sha256.New, []byte(secret), []byte(kdfSalt), kdfPeerKeyInfo, 32)
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
		t.Fatal("gossip key equals peer key seed")
	}
	if g1 == g2 || bytes.Equal(t1, t2) {
		t.Fatal("different secrets give equal keys")
	}
	if len(t1) != 32 {
		t.Fatalf("peer key seed is %d bytes, want 32", len(t1))
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
