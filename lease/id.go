package lease

import (
	"encoding/base64"
	"encoding/binary"
)

// idVersion is the first byte of every encoded lease id, so that the format
// can change without old ids being misread.
const idVersion = 1

// maxIDLen is the longest id ParseID will decode: the encoding of a version
// byte, two length prefixes, MaxNameBytes of names, a fencing varint and the
// nonce.
var maxIDLen = base64.RawURLEncoding.EncodedLen(1 + 2*binary.MaxVarintLen64 + MaxNameBytes + binary.MaxVarintLen64 + 8)

// makeID encodes a lease id: base64url (no padding) of
//
//	version(1) | uvarint len(limit) | limit | uvarint len(key) | key | uvarint fencing | nonce(8, big endian)
//
// Any node can decode the limit and key from the id alone and route it to
// the owner of (limit, key) exactly as it routes a take, hash tags included.
// The fencing token makes the id unique within one owner's history; the
// nonce makes it unique across owners that lost track of each other.
func makeID(limit, key string, fencing, nonce uint64) string {
	var raw [256]byte
	b := append(raw[:0], idVersion)
	b = binary.AppendUvarint(b, uint64(len(limit)))
	b = append(b, limit...)
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	b = binary.AppendUvarint(b, fencing)
	b = binary.BigEndian.AppendUint64(b, nonce)
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
	if err != nil || len(b) == 0 || b[0] != idVersion {
		return "", "", 0, false
	}
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
	if w <= 0 || fencing == 0 || len(b)-w != 8 {
		return "", "", 0, false
	}
	// Only the canonical encoding is accepted, so one lease has one id.
	if makeID(limit, key, fencing, binary.BigEndian.Uint64(b[w:])) != id {
		return "", "", 0, false
	}
	return limit, key, fencing, true
}

// splitmix64 advances *state and returns the next value of the SplitMix64
// sequence: cheap, well mixed, deterministic for a seed. Not a secret.
func splitmix64(state *uint64) uint64 {
	*state += 0x9e3779b97f4a7c15
	z := *state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
