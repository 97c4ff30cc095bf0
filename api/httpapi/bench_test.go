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

// BenchmarkHTTPTakeLoopback is 32 callers per core taking through a real
// server and client on loopback, the two ends in this one process, with
// the answer in the body alone and with the rate-limit header fields asked
// for: with the CPUs saturated, ns/op is what a take costs the two ends
// together (the client's parse included), so the two rows' difference is
// the fields' cost.
func BenchmarkHTTPTakeLoopback(b *testing.B) {
	srv := httptest.NewServer(NewHandler(&apitest.BenchDecider{}, nil, DefaultConfig(), nil, nil))
	defer srv.Close()
	client := srv.Client()
	client.Transport.(*http.Transport).MaxIdleConnsPerHost = 1024 // a connection per caller stays open
	for _, tc := range []struct{ name, body string }{
		{"body", `{"checks":[{"limit":"export","key":"tenant:acme","cost":1}]}`},
		{"headers", `{"checks":[{"limit":"export","key":"tenant:acme","cost":1}],"headers":true}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(32)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if !apitest.PostOK(b, client, srv.URL+"/v1/take", tc.body) {
						return
					}
				}
			})
		})
	}
}

// BenchmarkHTTPTake is the handler's own cost for one take, from routing to
// the encoded answer, without a recorder or a request to build per take:
// one request whose body is rewound, and a writer that keeps nothing but
// its header map, cleared per take as net/http's own is new per request.
func BenchmarkHTTPTake(b *testing.B) {
	h := NewHandler(&apitest.BenchDecider{}, nil, DefaultConfig(), nil, nil)
	apitest.BenchServe(b, h, "/v1/take", `{"checks":[{"limit":"export","key":"tenant:acme","cost":1}]}`)
}
