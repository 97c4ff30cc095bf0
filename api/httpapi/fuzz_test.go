package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/internal/apitest"
)

// The fuzz targets check that no input panics a decoder and that whatever a
// decoder accepts satisfies the input checks (so the Decider only ever sees
// well-formed requests), and that whatever it rejects is CodeInvalid.
// Seed corpora live in testdata/fuzz.

var fuzzLimits = inputLimits{maxKeyBytes: 512, maxChecks: 100}

func FuzzDecodeTakeRequest(f *testing.F) {
	f.Add([]byte(`{"checks":[{"limit":"export","key":"tenant:acme","cost":1}]}`))
	f.Add([]byte(`{"checks":[{"limit":"export","key":"k","cost":1.5}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		checks, _, err := decodeTakeRequest(body, fuzzLimits)
		if err != nil {
			apitest.WantInvalid(t, err)
			return
		}
		apitest.WantValidChecks(t, checks)
	})
}

func FuzzDecodeCheckQuery(f *testing.F) {
	f.Add("limit=export&key=tenant%3Aacme&cost=1")
	f.Add("limit=export&key=%FF")
	f.Add("limit=export&key_header=X-Forwarded-For&deny_status=403")
	f.Add("limit=export&key_header=x-user&deny_status=401")
	f.Fuzz(func(t *testing.T, q string) {
		h := http.Header{"X-Forwarded-For": {q}, "X-User": {q}}
		c, err := decodeCheckQuery(q, h, fuzzLimits)
		if err != nil {
			apitest.WantInvalid(t, err)
			return
		}
		apitest.WantValidChecks(t, []api.Check{c.Check})
		if s := c.denyStatus; s != 401 && s != 403 && s != 429 {
			t.Fatalf("deny status %d", s)
		}
	})
}

func FuzzDecodeLeaseRequests(f *testing.F) {
	f.Add([]byte(`{"limit":"export-db","key":"tenant:acme","ttl_ms":30000,"wait_ms":0}`))
	f.Add([]byte(`{"ttl_ms":-1}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, _, err := decodeAcquireRequest(body, fuzzLimits)
		if err != nil {
			apitest.WantInvalid(t, err)
		} else if req.Limit == "" || req.Key == "" || len(req.Key) > 512 || len(req.Holder) > 512 || req.TTL < 0 || req.Wait < 0 {
			t.Fatalf("accepted bad lease request %+v", req)
		}
		ttl, err := decodeRenewRequest(body)
		if err != nil {
			apitest.WantInvalid(t, err)
		} else if ttl < 0 {
			t.Fatalf("accepted ttl %v", ttl)
		}
	})
}

// FuzzHTTPHandler sends arbitrary requests through the routes (without the
// panic-recovering wrapper, so a panic fails the target) and checks that
// every answer is a JSON response with a known status.
func FuzzHTTPHandler(f *testing.F) {
	f.Add("POST", "/v1/take", []byte(`{"checks":[{"limit":"export","key":"k"}]}`))
	f.Add("GET", "/v1/check?limit=export&key=k&cost=2", []byte(nil))
	f.Add("POST", "/v1/leases", []byte(`{"limit":"export-db","key":"k"}`))
	f.Add("POST", "/v1/leases/l-1/renew", []byte(`{"ttl_ms":5}`))
	f.Add("DELETE", "/v1/leases/l-1", []byte(nil))
	f.Add("GET", "/v1/cluster?limit=a&key=b", []byte(nil))
	known := map[int]bool{200: true, 201: true, 204: true, 400: true, 404: true, 405: true, 413: true, 429: true}
	f.Fuzz(func(t *testing.T, method, target string, body []byte) {
		if !validMethod(method) || !strings.HasPrefix(target, "/") {
			return
		}
		cfg := DefaultConfig()
		cfg.MaxBodyBytes = 4096
		h := newHandler(&apitest.Decider{}, nil, cfg, nil, nil)
		req, err := http.NewRequest(method, "http://weir"+target, strings.NewReader(string(body)))
		if err != nil {
			return
		}
		rec := httptest.NewRecorder()
		h.serve(rec, req)
		if !known[rec.Code] {
			t.Fatalf("%s %q: status %d %s", method, target, rec.Code, rec.Body)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Fatalf("%s %q: Content-Type %q", method, target, ct)
		}
		if rec.Code != http.StatusNoContent && !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("%s %q: body is not JSON: %q", method, target, rec.Body)
		}
	})
}

// validMethod reports whether m is an HTTP token, as http.NewRequest needs.
func validMethod(m string) bool {
	if m == "" {
		return false
	}
	for _, c := range []byte(m) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`()<>@,;:\"/[]?={}`, c) >= 0 {
			return false
		}
	}
	return true
}
