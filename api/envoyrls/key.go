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
		size += api.KeyPartLen(k) + 1 + api.KeyPartLen(v)
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
		b = api.AppendKeyPart(b, k)
		b = append(b, '=')
		b = api.AppendKeyPart(b, v)
	}
	key := string(b)
	if e := api.ValidateField(field, key, maxBytes); e != nil { // UTF-8
		return "", e
	}
	return key, nil
}
