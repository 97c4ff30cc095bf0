package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/internal/ceiling"
)

// BenchmarkHTTPHeaderSets is a net/http round trip on loopback (client and
// server in this process) answering ceiling.Answer with three header sets:
// the HTTP ceiling's (Content-Type only), Weir's as it ships
// (api.SetResultHeaders, no legacy trio) and Weir's with --legacy-headers: what the
// header fields alone cost a take, which "÷ ceiling" in make bench also
// counts.
//
//	go test -run '^$' -bench HTTPHeaderSets -benchtime 2s -count 8 -cpu 2 ./bench/loadgen
func BenchmarkHTTPHeaderSets(b *testing.B) {
	res := api.Result{Limit: "bench", Allowed: true, Remaining: 999999999999, Capacity: 1000000000000, Window: time.Second}
	for _, set := range []struct {
		name         string
		weir, legacy bool
	}{{"ceiling", false, false}, {"weir", true, false}, {"weir-legacy", true, true}} {
		b.Run(set.name, func(b *testing.B) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/json")
				if set.weir {
					w.Header().Set("Cache-Control", "no-store")
					api.SetResultHeaders(w.Header(), res, set.legacy)
				}
				_, _ = io.WriteString(w, ceiling.Answer)
			}))
			defer srv.Close()
			c := srv.Client()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := c.Post(srv.URL, "application/json", strings.NewReader(`{"checks":[{"limit":"bench","key":"k1"}]}`))
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
				}
			})
		})
	}
}
