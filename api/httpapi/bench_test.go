package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/weir-rl/weir/internal/apitest"
)

func BenchmarkDecodeTakeRequest(b *testing.B) {
	body := []byte(`{"checks":[{"limit":"export","key":"tenant:acme","cost":1},{"limit":"search","key":"tenant:acme"}]}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := decodeTakeRequest(body, fuzzLimits); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHTTPCheck measures the HTTP layer's own cost for a forward-auth
// denial (headers and body included) against a Decider that does nothing.
func BenchmarkHTTPCheck(b *testing.B) {
	h := NewHandler(&apitest.BenchDecider{}, nil, DefaultConfig(), nil, nil)
	req := httptest.NewRequest(http.MethodGet, "/v1/check?limit=export&key=tenant%3Aacme", nil)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusTooManyRequests {
			b.Fatal(rec.Code)
		}
	}
}

func BenchmarkHTTPTakeParallel(b *testing.B) {
	h := NewHandler(&apitest.BenchDecider{}, nil, DefaultConfig(), nil, nil)
	const body = `{"checks":[{"limit":"export","key":"tenant:acme","cost":1}]}`
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/take", strings.NewReader(body)))
			if rec.Code != http.StatusOK {
				b.Fatal(rec.Code)
			}
		}
	})
}
