package rlqs

import (
	"slices"
	"strconv"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"

	"github.com/weir-rl/weir/api"
)

// This file maps an RLQS bucket id to a Weir bucket, as the package
// documentation says: the "name" entry names the limit, every other entry,
// sorted by its key, forms the key.

// nameEntry is the bucket id entry that names the limit.
const nameEntry = "name"

// globalKey is the key of a bucket id whose only entry is its name: one
// bucket for the whole limit (a rendered key always holds '=').
const globalKey = "*"

// bucketRef is a bucket id as a limit and a key.
type bucketRef struct{ limit, key string }

// mapBucketID validates id (entry i of a report) and maps it to its limit
// and key. Every error is a CodeInvalid *Error naming the report entry and
// the problem, never an entry's value.
func mapBucketID(i int, id *rlqsv3.BucketId, maxEntries, maxKeyBytes int) (bucketRef, error) {
	entries := id.GetBucket()
	field := func(what string) string { return "bucket_quota_usages[" + strconv.Itoa(i) + "].bucket_id" + what }
	switch {
	case len(entries) == 0:
		return bucketRef{}, api.Errorf(api.CodeInvalid, "%s is empty", field(""))
	case len(entries) > maxEntries:
		return bucketRef{}, api.Errorf(api.CodeInvalid, "%s has %d entries, over the %d maximum", field(""), len(entries), maxEntries)
	}
	limit, ok := entries[nameEntry]
	if !ok {
		return bucketRef{}, api.Errorf(api.CodeInvalid, "%s has no %q entry naming the limit", field(""), nameEntry)
	}
	if err := api.ValidateField(field("."+nameEntry), limit, maxKeyBytes); err != nil {
		return bucketRef{}, err
	}
	keys := make([]string, 0, len(entries)-1)
	size := 0
	for k, v := range entries {
		if k == nameEntry {
			continue
		}
		if k == "" {
			return bucketRef{}, api.Errorf(api.CodeInvalid, "%s has an entry with an empty key", field(""))
		}
		keys = append(keys, k)
		size += api.KeyPartLen(k) + 1 + api.KeyPartLen(v) + 1
	}
	if len(keys) == 0 {
		return bucketRef{limit: limit, key: globalKey}, nil
	}
	if size-1 > maxKeyBytes {
		return bucketRef{}, api.Errorf(api.CodeInvalid, "%s key is %d bytes, over the %d-byte maximum", field(""), size-1, maxKeyBytes)
	}
	slices.Sort(keys)
	b := make([]byte, 0, size)
	for _, k := range keys {
		if len(b) > 0 {
			b = append(b, ',')
		}
		b = api.AppendKeyPart(b, k)
		b = append(b, '=')
		b = api.AppendKeyPart(b, entries[k])
	}
	key := string(b)
	if err := api.ValidateField(field(" key"), key, maxKeyBytes); err != nil { // UTF-8
		return bucketRef{}, err
	}
	return bucketRef{limit: limit, key: key}, nil
}
