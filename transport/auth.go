package transport

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
)

// Key derivation labels. The salt fixes the scheme; each info string gives
// one independent key, so the gossip key and the peer key never equal or
// reveal each other, and neither reveals the secret.
const (
	kdfSalt        = "weir cluster secret v1"
	kdfGossipInfo  = "weir gossip key v1"
	kdfPeerKeyInfo = "weir peer tls key v1"
)

// maxSecretFile bounds what ReadSecretFile reads, so a wrong path (a log
// file, a device) fails instead of filling memory.
const maxSecretFile = 64 << 10

// ErrEmptySecret is returned by ReadSecretFile for a file that holds only
// whitespace.
var ErrEmptySecret = errors.New("transport: cluster secret is empty")

// DeriveKeys derives, from the cluster secret (any passphrase), the 32-byte
// AES-256 key for memberlist gossip encryption and the 32-byte Ed25519 seed
// of the peer service's TLS key (see SecretCredentials). It is HKDF-SHA256 (RFC 5869)
// with a fixed salt and one info label per key, written with crypto/hmac so
// that it has no error path. Equal secrets give equal keys on every node.
//
// An empty secret derives keys too, but they protect nothing; callers
// should read the secret with ReadSecretFile, which rejects it.
func DeriveKeys(secret []byte) (gossipKey [32]byte, peerKeySeed []byte) {
	prk := hmacSHA256([]byte(kdfSalt), secret)
	copy(gossipKey[:], hkdfExpand32(prk, kdfGossipInfo))
	return gossipKey, hkdfExpand32(prk, kdfPeerKeyInfo)
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
