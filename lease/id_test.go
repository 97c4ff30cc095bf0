package lease

import (
	"encoding/base64"
	"strings"
	"testing"
)

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
		id := makeID(c.limit, c.key, c.fencing, c.nonce)
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
	if makeID("db", "a", 1, 1) == makeID("db", "a", 1, 2) {
		t.Error("the nonce does not change the id")
	}
}

func TestParseIDRejects(t *testing.T) {
	good := makeID("db", "acme", 5, 9)
	raw, _ := base64.RawURLEncoding.DecodeString(good)
	enc := func(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	bad := map[string]string{
		"empty":           "",
		"not base64":      "!!!!",
		"padded":          good + "==",
		"std alphabet":    strings.NewReplacer("-", "+", "_", "/").Replace(good) + "+/",
		"version":         enc(append([]byte{2}, raw[1:]...)),
		"truncated":       enc(raw[:len(raw)-1]),
		"trailing":        enc(append(append([]byte{}, raw...), 0)),
		"empty limit":     enc(append([]byte{1, 0}, raw[4:]...)),
		"length overflow": enc([]byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 'a'}),
		"non-minimal":     enc(append([]byte{1, 0x82, 0x00}, raw[2:]...)),
		"zero fencing":    makeID("db", "acme", 0, 9),
		"too long":        strings.Repeat("A", maxIDLen+1),
	}
	for name, id := range bad {
		if l, k, ok := ParseID(id); ok {
			t.Errorf("%s: ParseID(%q) = %q %q, want not ok", name, id, l, k)
		}
	}
}

func FuzzParseID(f *testing.F) {
	f.Add(makeID("db", "acme", 5, 9))
	f.Add(makeID("x", "{t}:a", 1<<40, 1))
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
		if err != nil || len(raw) < 8 {
			t.Fatalf("accepted undecodable %q", id)
		}
		// Canonical: re-encoding gives the same id back.
		nonce := uint64(0)
		for _, c := range raw[len(raw)-8:] {
			nonce = nonce<<8 | uint64(c)
		}
		if again := makeID(limit, key, fencing, nonce); again != id {
			t.Fatalf("%q parsed but re-encodes as %q", id, again)
		}
	})
}
