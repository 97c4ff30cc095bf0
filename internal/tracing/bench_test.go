package tracing

import (
	"context"
	"net/http"
	"testing"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/tap"

	"github.com/weir-rl/weir/api"
)

// BenchmarkUntraced is what a decision no caller traced pays, per front
// end and tracer state: the trace-context lookup of the front end plus
// the decision span (with a forward and an owner step).
func BenchmarkUntraced(b *testing.B) {
	info := &tap.Info{FullMethodName: "/weir.v1.Limiter/Take", Header: metadata.Pairs(
		":authority", "127.0.0.1:8081", "content-type", "application/grpc", "user-agent", "grpc-go/1.85.0")}
	h := http.Header{"Content-Type": {"application/json"}, "User-Agent": {"curl/8"}, "Accept": {"*/*"}}
	on, err := New(Config{Endpoint: "http://127.0.0.1:1"}, "n1")
	if err != nil {
		b.Fatal(err)
	}
	checks := []api.Check{{Limit: "l", Key: "k", Cost: 1}}
	for _, bc := range []struct {
		name string
		tr   *Tracer
	}{{"off", &Tracer{}}, {"on-ratio0", on}} {
		b.Run(bc.name+"/grpc", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ctx, _ := fromGRPC(context.Background(), info)
				ctx, span := bc.tr.Decision(ctx)
				_, fspan, _ := bc.tr.Forward(ctx, "peer", "take")
				fspan.EndForward(nil, false)
				span.EndTake(checks, api.TakeResponse{}, nil)
			}
		})
		b.Run(bc.name+"/http", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ctx, span := bc.tr.Decision(FromHTTP(context.Background(), h))
				_, fspan, _ := bc.tr.Forward(ctx, "peer", "take")
				fspan.EndForward(nil, false)
				span.EndTake(checks, api.TakeResponse{}, nil)
			}
		})
	}
}
