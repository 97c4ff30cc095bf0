package node_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/api/grpcapi"
	"github.com/weir-rl/weir/api/httpapi"
	"github.com/weir-rl/weir/api/weirv1"
	"github.com/weir-rl/weir/internal/apitest"
	"github.com/weir-rl/weir/internal/tracing"
	"github.com/weir-rl/weir/node"
)

// benchNode is a node not yet started: its Decider methods, HTTP handler
// and gRPC service run in the benchmark's goroutines without sockets, so
// a profile shows the decision path and not the network (a benchmark of
// the servers starts it, on loopback ports). It serves bench/limits.yaml,
// whose "bench" limit never denies, so every take is a full allowed
// decision.
func benchNode(b *testing.B) *node.Node {
	b.Helper()
	cfg := node.LocalConfig()
	cfg.LimitsPath = "../bench/limits.yaml"
	cfg.Store.MaxBuckets = 1 << 20
	n, err := node.New(cfg, node.Deps{})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkTake is one allowed check through the engine (validate, own,
// take, count), as both public transports call it.
func BenchmarkTake(b *testing.B) {
	n := benchNode(b)
	ctx := context.Background()
	checks := []api.Check{{Limit: "bench", Key: "k0", Cost: 1}}
	b.ReportAllocs()
	for b.Loop() {
		resp, err := n.Take(ctx, checks)
		if err != nil || !resp.Allowed {
			b.Fatal(err, resp.Allowed)
		}
	}
}

// BenchmarkHTTPTake is POST /v1/take through the node's HTTP handler:
// read, decode, decide, headers, encode. The request and writer are
// reused, so the figures are the handler's own; what the server's
// connection handling costs is the empty-handler ceiling of make bench.
func BenchmarkHTTPTake(b *testing.B) {
	n := benchNode(b)
	h := httpapi.NewHandler(n, n, httpapi.DefaultConfig(), nil, nil)
	apitest.BenchServe(b, h, "/v1/take", `{"checks":[{"limit":"bench","key":"k0","cost":1}]}`)
}

// BenchmarkGRPCTake is weir.v1.Limiter/Take's handler on the node,
// without the gRPC transport (which the empty-method ceiling of make bench
// measures).
func BenchmarkGRPCTake(b *testing.B) {
	n := benchNode(b)
	s := grpcapi.NewServer(n, grpcapi.DefaultConfig())
	ctx := context.Background()
	req := &weirv1.TakeRequest{Checks: []*weirv1.Check{{Limit: "bench", Key: "k0", Cost: 1}}}
	b.ReportAllocs()
	for b.Loop() {
		resp, err := s.Take(ctx, req)
		if err != nil || !resp.GetAllowed() {
			b.Fatal(err)
		}
	}
}

// BenchmarkHTTPTakeParallel is BenchmarkHTTPTake from GOMAXPROCS
// goroutines on one hot key.
func BenchmarkHTTPTakeParallel(b *testing.B) {
	n := benchNode(b)
	h := httpapi.NewHandler(n, n, httpapi.DefaultConfig(), nil, nil)
	const body = `{"checks":[{"limit":"bench","key":"k0","cost":1}]}`
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/take", strings.NewReader(body)))
			if rec.Code != http.StatusOK {
				b.Error(rec.Code)
				return
			}
		}
	})
}

// BenchmarkTakeTracing is BenchmarkTake with tracing off, on at ratio 0
// for a take no caller traced (what every untraced decision pays), and on
// for a caller's sampled trace (the spans' own cost, the export left out:
// the tracer is never started).
func BenchmarkTakeTracing(b *testing.B) {
	sampled := tracing.FromHTTP(context.Background(), http.Header{"Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}})
	for _, bc := range []struct {
		name     string
		endpoint string
		ctx      context.Context
	}{
		{"off", "", context.Background()},
		{"on-ratio0-untraced", "http://127.0.0.1:1", context.Background()},
		{"on-sampled-caller", "http://127.0.0.1:1", sampled},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := node.LocalConfig()
			cfg.LimitsPath = "../bench/limits.yaml"
			cfg.Tracing.Endpoint = bc.endpoint
			n, err := node.New(cfg, node.Deps{})
			if err != nil {
				b.Fatal(err)
			}
			checks := []api.Check{{Limit: "bench", Key: "k0", Cost: 1}}
			b.ReportAllocs()
			for b.Loop() {
				if resp, err := n.Take(bc.ctx, checks); err != nil || !resp.Allowed {
					b.Fatal(err, resp.Allowed)
				}
			}
		})
	}
}
