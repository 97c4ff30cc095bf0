package lease

import (
	"encoding/base64"
	"encoding/binary"
	"strings"
	"testing"
	"time"
)

// nonce16 is a 16-byte (version 2) nonce holding v.
func nonce16(v uint64) []byte { return binary.BigEndian.AppendUint64(make([]byte, 8), v) }

// nonce8 is an 8-byte (version 1) nonce holding v.
func nonce8(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func TestParseIDRoundTrip(t *testing.T) {
	cases := []struct {
		limit, key string
		fencing    uint64
		nonce      uint64
	}{
		{"db", "acme", 1, 0},
		{"export-db", "tenant:acme:route:export", 1 << 40, ^uint64(0)},
		{"l", "{acme}:db", MaxFencing, 7},
		{"ünïcode", "k\x00ey with / and +", 127, 128},
		{strings.Repeat("l", 300), strings.Repeat("k", MaxNameBytes-300), 3, 3},
	}
	for _, c := range cases {
		id := makeID(c.limit, c.key, c.fencing, nonce16(c.nonce))
		if strings.ContainsAny(id, "/+=") {
			t.Errorf("id %q is not URL-safe", id)
		}
		limit, key, fencing, ok := parseID(id)
		if !ok || limit != c.limit || key != c.key || fencing != c.fencing {
			t.Errorf("parseID(makeID(%q, %q, %d)) = %q %q %d %v", c.limit, c.key, c.fencing, limit, key, fencing, ok)
		}
		if l, k, ok := ParseID(id); !ok || l != c.limit || k != c.key {
			t.Errorf("ParseID = %q %q %v", l, k, ok)
		}
	}
	if makeID("db", "a", 1, nonce16(1)) == makeID("db", "a", 1, nonce16(2)) {
		t.Error("the nonce does not change the id")
	}
	// Version 1 ids, issued before version 2, still parse.
	if l, k, f, ok := parseID(makeID("db", "acme", 5, nonce8(9))); !ok || l != "db" || k != "acme" || f != 5 {
		t.Errorf("a version 1 id: %q %q %d %v", l, k, f, ok)
	}
	if l, k, ok := ParseID("AQJkYgRhY21lBQAAAAAAAAAJ"); !ok || l != "db" || k != "acme" {
		t.Errorf("a version 1 id issued by an older node: %q %q %v", l, k, ok)
	}
}

func TestParseIDRejects(t *testing.T) {
	good := makeID("db", "acme", 5, nonce16(9))
	raw, _ := base64.RawURLEncoding.DecodeString(good)
	enc := func(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	bad := map[string]string{
		"empty":             "",
		"not base64":        "!!!!",
		"padded":            good + "==",
		"std alphabet":      strings.NewReplacer("-", "+", "_", "/").Replace(good) + "+/",
		"version 3":         enc(append([]byte{3}, raw[1:]...)),
		"v1 byte, v2 nonce": enc(append([]byte{1}, raw[1:]...)),
		"short nonce":       makeID("db", "acme", 5, nonce16(9)[:12]),
		"truncated":         enc(raw[:len(raw)-1]),
		"trailing":          enc(append(append([]byte{}, raw...), 0)),
		"empty limit":       enc(append([]byte{2, 0}, raw[4:]...)),
		"length overflow":   enc([]byte{2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 'a'}),
		"non-minimal":       enc(append([]byte{2, 0x82, 0x00}, raw[2:]...)),
		"zero fencing":      makeID("db", "acme", 0, nonce16(9)),
		"too long":          strings.Repeat("A", maxIDLen+1),
	}
	for name, id := range bad {
		if l, k, ok := ParseID(id); ok {
			t.Errorf("%s: ParseID(%q) = %q %q, want not ok", name, id, l, k)
		}
	}
}

func FuzzParseID(f *testing.F) {
	f.Add(makeID("db", "acme", 5, nonce16(9)))
	f.Add(makeID("x", "{t}:a", 1<<40, nonce16(1)))
	f.Add("AQJkYgRhY21lBQAAAAAAAAAJ")
	f.Add("")
	f.Add("____")
	f.Fuzz(func(t *testing.T, id string) {
		limit, key, fencing, ok := parseID(id)
		if !ok {
			return
		}
		if limit == "" || key == "" || fencing == 0 {
			t.Fatalf("accepted %q as %q %q %d", id, limit, key, fencing)
		}
		raw, err := base64.RawURLEncoding.DecodeString(id)
		if err != nil || len(raw) < 1+nonceLen(raw[0]) {
			t.Fatalf("accepted undecodable %q", id)
		}
		// Canonical: re-encoding gives the same id back.
		nonce := raw[len(raw)-nonceLen(raw[0]):]
		if again := makeID(limit, key, fencing, nonce); again != id {
			t.Fatalf("%q parsed but re-encodes as %q", id, again)
		}
	})
}

// TestIDsCannotBePredicted replays the attack that read the next lease's id
// off one's own: version 1 nonces were SplitMix64 outputs, and SplitMix64's
// output function is invertible, so one nonce gave the generator's state and
// the next nonce. A default Table's nonces are 16 bytes from crypto/rand:
// the prediction, tried on either half, misses every time.
func TestIDsCannotBePredicted(t *testing.T) {
	tbl, err := NewTable(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	p := Params{Permits: 1 << 20, DefaultTTL: time.Minute, MaxTTL: time.Minute}
	nonceOf := func(id string) []byte {
		raw, err := base64.RawURLEncoding.DecodeString(id)
		if err != nil || len(raw) < 1+NonceBytes {
			t.Fatalf("id %q: %v", id, err)
		}
		if raw[0] != idVersion2 {
			t.Fatalf("id %q has version %d, want %d", id, raw[0], idVersion2)
		}
		return raw[len(raw)-NonceBytes:]
	}
	seen := map[string]bool{}
	var prev []byte
	for i := range 1000 {
		out, _, err := tbl.Acquire(t0, Request{Limit: "db", Key: "acme", Holder: "h"}, p)
		if err != nil || out.Status != Granted {
			t.Fatalf("acquire %d: %+v %v", i, out, err)
		}
		n := nonceOf(out.Grant.ID)
		if seen[string(n)] {
			t.Fatalf("nonce repeated after %d leases", i)
		}
		seen[string(n)] = true
		if prev != nil {
			for half := 0; half < NonceBytes; half += 8 {
				guess := splitmixNext(binary.BigEndian.Uint64(prev[half:]))
				if binary.BigEndian.Uint64(n[half:]) == guess || binary.BigEndian.Uint64(n[8-half:]) == guess {
					t.Fatalf("lease %d's nonce was predicted from lease %d's", i, i-1)
				}
			}
		}
		prev = n
	}
}

// splitmixNext returns the SplitMix64 output that follows output z: it
// inverts the output mix to recover the state, steps it, and mixes again.
func splitmixNext(z uint64) uint64 {
	const gamma, m1, m2 = 0x9e3779b97f4a7c15, 0xbf58476d1ce4e5b9, 0x94d049bb133111eb
	unshift := func(x uint64, k uint) uint64 { // inverts x ^ (x >> k)
		y := x
		for range 64 / k {
			y = x ^ (y >> k)
		}
		return y
	}
	inv := func(a uint64) uint64 { // a^-1 mod 2^64, by Newton's iteration
		x := a
		for range 6 {
			x *= 2 - a*x
		}
		return x
	}
	mix := func(s uint64) uint64 {
		s = (s ^ (s >> 30)) * m1
		s = (s ^ (s >> 27)) * m2
		return s ^ (s >> 31)
	}
	s := unshift(z, 31)
	s = unshift(s*inv(m2), 27)
	s = unshift(s*inv(m1), 30)
	return mix(s + gamma)
}
