package envoyrls

import (
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/internal/apitest"
)

// FuzzEnvoy builds descriptor sets from arbitrary bytes (and, when the bytes
// are a RateLimitRequest, from its decoding, as the gRPC codec would) and
// checks that nothing panics, that a rejection is CodeInvalid without the
// caller's values, and that an accepted request becomes valid checks whose
// keys decode back to the descriptors' entries, and a well-formed answer.
func FuzzEnvoy(f *testing.F) {
	f.Add([]byte("generic_key\x02export\x01tenant\x02acme"), "weir", uint32(0))
	f.Add([]byte("limit\x02a\x01h\x02SECRET,=%\x00generic_key\x02b"), "", uint32(3))
	f.Add([]byte("tenant\x02SECRET"), "", uint32(1))
	for _, m := range []*rlsv3.RateLimitRequest{
		{Domain: "weir", HitsAddend: 2, Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("generic_key", "export", "k", "v")}},
		{Descriptors: []*ratelimitv3.RateLimitDescriptor{{
			Entries:        desc("limit", "l", "x", "y").Entries,
			HitsAddend:     wrapperspb.UInt64(math.MaxUint64),
			IsNegativeHits: true,
		}}},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, m.GetDomain(), m.GetHitsAddend())
	}
	f.Fuzz(func(t *testing.T, data []byte, domain string, hits uint32) {
		req := &rlsv3.RateLimitRequest{Domain: domain, HitsAddend: hits}
		for d := range strings.SplitSeq(string(data), "\x00") {
			rd := &ratelimitv3.RateLimitDescriptor{}
			for e := range strings.SplitSeq(d, "\x01") {
				k, v, _ := strings.Cut(e, "\x02")
				rd.Entries = append(rd.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: k, Value: v})
			}
			req.Descriptors = append(req.Descriptors, rd)
		}
		fuzzEnvoyRequest(t, req, "weir")
		fuzzEnvoyRequest(t, req, "")
		var decoded rlsv3.RateLimitRequest
		if proto.Unmarshal(data, &decoded) == nil {
			fuzzEnvoyRequest(t, &decoded, "")
		}
	})
}

func fuzzEnvoyRequest(t *testing.T, req *rlsv3.RateLimitRequest, domain string) {
	t.Helper()
	checks, err := envoyChecks(req, domain, fuzzLimits)
	if err != nil {
		apitest.WantInvalid(t, err)
		if strings.Contains(err.Error(), "SECRET") && !strings.Contains(req.GetDomain(), "SECRET") {
			t.Fatalf("detail %q quotes a descriptor value", err)
		}
		return
	}
	apitest.WantValidChecks(t, checks)
	if len(checks) != len(req.GetDescriptors()) {
		t.Fatalf("%d checks for %d descriptors", len(checks), len(req.GetDescriptors()))
	}
	for i, c := range checks {
		want := fuzzKeyEntries(req.GetDescriptors()[i].GetEntries(), c.Limit)
		if got := decodeEnvoyKey(t, c.Key); !reflect.DeepEqual(got, want) {
			t.Fatalf("descriptor %d: key %q decodes to %q, want %q", i, c.Key, got, want)
		}
	}
	// Answer with a denial of every other check and check the shape.
	resp := api.TakeResponse{Allowed: true}
	for i, c := range checks {
		r := apitest.ExportAllowed()
		r.Limit, r.Capacity, r.Window = c.Limit, c.Cost, time.Duration(c.Cost)*time.Millisecond
		if i%2 == 1 {
			r.Allowed, r.RetryAfter = false, time.Duration(c.Cost)
			resp.Allowed = false
		}
		resp.Results = append(resp.Results, r)
	}
	out, ok := envoyResponse(resp, len(checks))
	if !ok || len(out.GetStatuses()) != len(checks) {
		t.Fatalf("answer %v for %d checks", out, len(checks))
	}
	if n := len(out.GetResponseHeadersToAdd()); n != 2 && resp.Allowed || n != 3 && !resp.Allowed {
		t.Fatalf("%d headers for allowed=%v", n, resp.Allowed)
	}
	if (out.GetOverallCode() == rlsv3.RateLimitResponse_OK) != resp.Allowed {
		t.Fatalf("overall %v for allowed=%v", out.GetOverallCode(), resp.Allowed)
	}
}

// fuzzKeyEntries is the entries a key must decode to: all but the one that
// named the limit, as "k\x00v" strings.
func fuzzKeyEntries(entries []*ratelimitv3.RateLimitDescriptor_Entry, limit string) []string {
	nameKey := "limit"
	for _, e := range entries {
		if e.GetKey() == "generic_key" {
			nameKey = "generic_key"
		}
	}
	var out []string
	for _, e := range entries {
		if e.GetKey() == nameKey && e.GetValue() == limit {
			continue
		}
		out = append(out, e.GetKey()+"\x00"+e.GetValue())
	}
	return out
}

// decodeEnvoyKey inverts the key rendering.
func decodeEnvoyKey(t *testing.T, key string) []string {
	t.Helper()
	if key == "*" {
		return nil
	}
	var out []string
	for part := range strings.SplitSeq(key, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok || strings.Contains(v, "=") {
			t.Fatalf("key %q: part %q is not k=v", key, part)
		}
		out = append(out, unescapeEnvoy(t, k)+"\x00"+unescapeEnvoy(t, v))
	}
	return out
}

func unescapeEnvoy(t *testing.T, s string) string {
	t.Helper()
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+3 > len(s) {
			t.Fatalf("truncated escape in %q", s)
		}
		n, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil || !strings.ContainsRune("%,=", rune(n)) {
			t.Fatalf("bad escape in %q", s)
		}
		b.WriteByte(byte(n))
		i += 2
	}
	return b.String()
}
