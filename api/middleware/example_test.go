package middleware_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/api/middleware"
	"github.com/weir-rl/weir/bucket"
)

// An HTTP route limited per client address by the limit "mw" (3 requests,
// then one every 20 minutes), decided by a real node through the Go client.
func ExampleHTTP_Wrap() {
	w, stop, err := startWeir()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()

	m, err := middleware.NewHTTP(middleware.HTTPConfig{
		Taker: w.client, // client.New(conn)
		// The connection's address, never X-Forwarded-For.
		Key: func(r *http.Request) (string, error) {
			host, _, err := net.SplitHostPort(r.RemoteAddr)
			return "ip:" + host, err
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	mux := http.NewServeMux()
	mux.Handle("GET /orders", m.Wrap(middleware.Route{
		Limit:         "mw",
		OnUnavailable: middleware.FailLocal, // if Weir cannot answer: 1 per minute per address, here
		Fallback:      bucket.Limit{Algorithm: bucket.TokenBucket, Capacity: 1, Rate: bucket.Rate{N: 1, Per: time.Minute}},
	}, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "orders") })))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	for range 4 {
		resp, err := http.Get(srv.URL + "/orders")
		if err != nil {
			fmt.Println(err)
			return
		}
		_ = resp.Body.Close()
		fmt.Printf("%d %s Retry-After=%q\n", resp.StatusCode, resp.Header.Get("RateLimit"), resp.Header.Get("Retry-After"))
	}
	// Output:
	// 200 "mw";r=2;t=1200 Retry-After=""
	// 200 "mw";r=1;t=2400 Retry-After=""
	// 200 "mw";r=0;t=3600 Retry-After=""
	// 429 "mw";r=0;t=1200 Retry-After="1200"
}

// gRPC interceptors limiting every method per calling peer, failing closed.
func ExampleGRPC() {
	w, stop, err := startWeir()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()

	g, err := middleware.NewGRPC(middleware.GRPCConfig{
		Taker: w.client,
		Key: func(ctx context.Context, _ string) (string, error) {
			p, _ := peer.FromContext(ctx)
			host, _, err := net.SplitHostPort(p.Addr.String())
			return "ip:" + host, err
		},
		Default: &middleware.Route{Limit: "mw-closed", OnUnavailable: middleware.FailClosed},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(g.UnaryServerInterceptor()), grpc.StreamInterceptor(g.StreamServerInterceptor()))
	healthpb.RegisterHealthServer(srv, health.NewServer()) // the service being limited
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()

	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	for range 4 {
		var md metadata.MD
		_, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Header(&md))
		fmt.Println(status.Code(err), md.Get("ratelimit"))
	}
	// Output:
	// OK ["mw-closed";r=2;t=1200]
	// OK ["mw-closed";r=1;t=2400]
	// OK ["mw-closed";r=0;t=3600]
	// ResourceExhausted ["mw-closed";r=0;t=1200]
}
