package lease

import (
	"encoding/base64"
	"encoding/binary"
)

// The first byte of an encoded lease id names its format, so that the
// format can change without old ids being misread. Version 2 ids carry a
// 16-byte nonce from the table's Config.Rand (crypto/rand by default);
// version 1 ids, issued before, carry 8 bytes of a seeded sequence. Tables
// issue version 2 only, and accept both (Import, Renew, Release), so leases
// handed off or replicated by a member that still issues version 1 keep
// working through a rolling upgrade.
const (
	idVersion1 = 1
	idVersion2 = 2
)

// NonceBytes is the size of the random part of a lease id a Table issues:
// 128 bits, so a caller who knows one id (its own) cannot compute another.
const NonceBytes = 16

// nonceLen is the nonce size of each id version; 0 for an unknown one.
func nonceLen(version byte) int {
	switch version {
	case idVersion1:
		return 8
	case idVersion2:
		return NonceBytes
	}
	return 0
}

// maxIDLen is the longest id ParseID will decode: the encoding of a version
// byte, two length prefixes, MaxNameBytes of names, a fencing varint and the
// largest nonce.
var maxIDLen = base64.RawURLEncoding.EncodedLen(1 + 2*binary.MaxVarintLen64 + MaxNameBytes + binary.MaxVarintLen64 + NonceBytes)

// makeID encodes a lease id: base64url (no padding) of
//
//	version(1) | uvarint len(limit) | limit | uvarint len(key) | key | uvarint fencing | nonce
//
// with version 2 for a 16-byte nonce and 1 for an 8-byte one (no other
// size is valid). Any node can decode the limit and key from the id alone
// and route it to the owner of (limit, key) exactly as it routes a take,
// hash tags included. The fencing token makes the id unique within one
// owner's history and is no secret (it counts up); the nonce makes the id
// unguessable, and unique across owners that lost track of each other.
func makeID(limit, key string, fencing uint64, nonce []byte) string {
	version := byte(idVersion2)
	if len(nonce) == nonceLen(idVersion1) {
		version = idVersion1
	}
	var raw [256]byte
	b := append(raw[:0], version)
	b = binary.AppendUvarint(b, uint64(len(limit)))
	b = append(b, limit...)
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	b = binary.AppendUvarint(b, fencing)
	b = append(b, nonce...)
	var out [384]byte
	return string(base64.RawURLEncoding.AppendEncode(out[:0], b))
}

// ParseID decodes the limit and key a lease id was issued for, so that a
// node holding only the id can route a renew or release to the owner. ok is
// false for anything that is not a well-formed id; ParseID never panics. A
// well-formed id is not proof that the lease exists.
func ParseID(id string) (limit, key string, ok bool) {
	limit, key, _, ok = parseID(id)
	return limit, key, ok
}

// parseID is ParseID that also returns the fencing token.
func parseID(id string) (limit, key string, fencing uint64, ok bool) {
	if len(id) == 0 || len(id) > maxIDLen {
		return "", "", 0, false
	}
	b, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil || len(b) == 0 || nonceLen(b[0]) == 0 {
		return "", "", 0, false
	}
	nonceSize := nonceLen(b[0])
	b = b[1:]
	next := func() (string, bool) {
		n, w := binary.Uvarint(b)
		if w <= 0 || n == 0 || n > uint64(len(b)-w) {
			return "", false
		}
		s := string(b[w : w+int(n)])
		b = b[w+int(n):]
		return s, true
	}
	if limit, ok = next(); !ok {
		return "", "", 0, false
	}
	if key, ok = next(); !ok {
		return "", "", 0, false
	}
	fencing, w := binary.Uvarint(b)
	if w <= 0 || fencing == 0 || len(b)-w != nonceSize {
		return "", "", 0, false
	}
	// Only the canonical encoding is accepted, so one lease has one id.
	if makeID(limit, key, fencing, b[w:]) != id {
		return "", "", 0, false
	}
	return limit, key, fencing, true
}
