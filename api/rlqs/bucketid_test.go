package rlqs

import (
	"errors"
	"strings"
	"testing"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"

	"github.com/weir-rl/weir/api"
)

// TestMapBucketID: the name entry is the limit, the other entries sorted
// by key and escaped are the key ("*" for none), the same key Envoy's rate
// limit service renders for those entries in that order; malformed ids are
// CodeInvalid errors that never quote a value.
func TestMapBucketID(t *testing.T) {
	ok := []struct {
		id         map[string]string
		limit, key string
	}{
		{map[string]string{"name": "api"}, "api", "*"},
		{map[string]string{"name": "api", "tenant": "acme"}, "api", "tenant=acme"},
		{map[string]string{"tenant": "acme", "name": "api", "env": "prod"}, "api", "env=prod,tenant=acme"},
		{map[string]string{"name": "api", "a,b": "c=d%"}, "api", "a%2Cb=c%3Dd%25"},
		{map[string]string{"name": "api", "empty": ""}, "api", "empty="},
	}
	for _, c := range ok {
		got, err := mapBucketID(0, &rlqsv3.BucketId{Bucket: c.id}, 16, 512)
		if err != nil || got != (bucketRef{limit: c.limit, key: c.key}) {
			t.Errorf("%v: %+v, %v; want %s / %s", c.id, got, err, c.limit, c.key)
		}
	}
	bad := []struct {
		id   map[string]string
		want string
	}{
		{nil, "bucket_id is empty"},
		{map[string]string{"tenant": "secret-value"}, `no "name" entry`},
		{map[string]string{"name": ""}, "name is empty"},
		{map[string]string{"name": "api", "": "secret-value"}, "empty key"},
		{map[string]string{"name": "api", "k": strings.Repeat("v", 600)}, "over the 512-byte maximum"},
		{map[string]string{"name": "api", "a": "1", "b": "2", "c": "3"}, "4 entries, over the 3 maximum"},
	}
	for _, c := range bad {
		_, err := mapBucketID(2, &rlqsv3.BucketId{Bucket: c.id}, 3, 512)
		e, isAPI := errors.AsType[*api.Error](err)
		if !isAPI || e.Code != api.CodeInvalid || !strings.Contains(e.Detail, c.want) || !strings.Contains(e.Detail, "bucket_quota_usages[2]") {
			t.Errorf("%v: %v; want CodeInvalid naming the usage and %q", c.id, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret-value") {
			t.Errorf("%v: detail %q quotes a value", c.id, err)
		}
	}
}

// TestConfigValidate: negative bounds are refused; zero means the default.
func TestConfigValidate(t *testing.T) {
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("zero config: %v", err)
	}
	if err := (Config{MaxStreams: -1}).Validate(); err == nil {
		t.Fatal("negative MaxStreams accepted")
	}
	if err := (Config{Margin: -1}).Validate(); err == nil {
		t.Fatal("negative Margin accepted")
	}
	if c := (Config{}).withDefaults(); c.MaxBuckets != DefaultConfig().MaxBuckets || c.Now == nil {
		t.Fatalf("defaults not filled: %+v", c)
	}
}
