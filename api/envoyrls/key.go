package envoyrls

import (
	"strconv"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	"github.com/weir-rl/weir/api"
)

// This file renders a descriptor's entries as a bucket key, as the
// contract at the top of envoy.go says: "k=v" joined by ",", with '%', ','
// and '=' percent-encoded, so that two different descriptors never render
// to the same key.

// envoyKey renders the entries of descriptor i other than the one at skip as
// the bucket key; see the contract. It measures before it renders, so an
// over-long descriptor costs no allocation.
func envoyKey(i int, entries []*ratelimitv3.RateLimitDescriptor_Entry, skip, maxBytes int) (string, error) {
	return renderKey(i, len(entries), func(j int) (string, string) {
		return entries[j].GetKey(), entries[j].GetValue()
	}, skip, maxBytes)
}

// renderKey renders n entries, entry(j) giving each key and value, skipping
// the one at skip, as "k=v" joined by ",", escaped; see the contract.
func renderKey(i, n int, entry func(j int) (k, v string), skip, maxBytes int) (string, error) {
	size := 0
	for j := range n {
		if j == skip {
			continue
		}
		k, v := entry(j)
		if k == "" {
			return "", invalidf("descriptors[%d].entries[%d].key is empty", i, j)
		}
		if size > 0 {
			size++ // ','
		}
		size += escapedLen(k) + 1 + escapedLen(v)
	}
	if size == 0 {
		return envoyGlobalKey, nil
	}
	field := "descriptors[" + strconv.Itoa(i) + "] key"
	if size > maxBytes {
		return "", invalidf("%s is %d bytes, over the %d-byte maximum", field, size, maxBytes)
	}
	b := make([]byte, 0, size)
	for j := range n {
		if j == skip {
			continue
		}
		k, v := entry(j)
		if len(b) > 0 {
			b = append(b, ',')
		}
		b = appendEscaped(b, k)
		b = append(b, '=')
		b = appendEscaped(b, v)
	}
	key := string(b)
	if e := api.ValidateField(field, key, maxBytes); e != nil { // UTF-8
		return "", e
	}
	return key, nil
}

// escapedLen is len(appendEscaped(nil, s)).
func escapedLen(s string) int {
	n := len(s)
	for i := 0; i < len(s); i++ {
		if needsEscape(s[i]) {
			n += 2
		}
	}
	return n
}

func needsEscape(c byte) bool { return c == '%' || c == ',' || c == '=' }

// appendEscaped appends s with '%', ',' and '=' percent-encoded.
func appendEscaped(b []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if needsEscape(c) {
			b = append(b, '%', hex[c>>4], hex[c&0xf])
			continue
		}
		b = append(b, c)
	}
	return b
}
