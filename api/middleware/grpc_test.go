package middleware_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/api/middleware"
	"github.com/weir-rl/weir/bucket"
)

// peerHost is the key of these tests: the calling connection's address.
func peerHost(ctx context.Context, _ string) (string, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return "", status.Error(codes.Internal, "no peer")
	}
	host, _, err := net.SplitHostPort(p.Addr.String())
	return "ip:" + host, err
}

// grpcApp serves the gRPC health service behind the interceptors of cfg
// and returns a client of it.
func grpcApp(t *testing.T, cfg middleware.GRPCConfig) healthpb.HealthClient {
	t.Helper()
	g, err := middleware.NewGRPC(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(g.UnaryServerInterceptor()), grpc.StreamInterceptor(g.StreamServerInterceptor()))
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		hs.Shutdown()
		srv.Stop()
		<-done
	})
	return healthpb.NewHealthClient(conn)
}

const checkMethod = "/grpc.health.v1.Health/Check"

func TestGRPCUnaryAgainstNode(t *testing.T) {
	w := newWeir(t)
	hc := grpcApp(t, middleware.GRPCConfig{
		Taker: w.client, Key: peerHost, LegacyHeaders: true,
		Routes: map[string]middleware.Route{checkMethod: {Limit: "mw"}},
	})
	for i := range 3 {
		var md metadata.MD
		if _, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Header(&md)); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
		if got := strings.Join(md.Get("ratelimit"), ""); !strings.HasPrefix(got, `"mw";r=`) || md.Get("ratelimit-policy")[0] != `"mw";q=3;w=3600` {
			t.Fatalf("call %d: header metadata %v", i+1, md)
		}
	}
	var md metadata.MD
	_, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Header(&md))
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("over the limit: %v, want ResourceExhausted", err)
	}
	for _, k := range []string{"retry-after", "ratelimit", "ratelimit-policy", "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"} {
		if len(md.Get(k)) != 1 || md.Get(k)[0] == "" {
			t.Errorf("denial metadata %s = %v", k, md.Get(k))
		}
	}
	// Methods without a route and no Default are not limited.
	if _, err := hc.List(context.Background(), &healthpb.HealthListRequest{}); err != nil {
		t.Fatalf("unlimited method: %v", err)
	}
}

// A stream is decided once, when it opens, by Default.
func TestGRPCStreamAgainstNode(t *testing.T) {
	w := newWeir(t)
	hc := grpcApp(t, middleware.GRPCConfig{Taker: w.client, Key: peerHost, Default: &middleware.Route{Limit: "mw"}})
	open := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return err
		}
		_, err = st.Recv() // the health server's first status, or the interceptor's refusal
		return err
	}
	for i := range 3 {
		if err := open(); err != nil {
			t.Fatalf("stream %d: %v", i+1, err)
		}
	}
	if err := open(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("fourth stream: %v, want ResourceExhausted", err)
	}
}

func TestGRPCFailurePolicies(t *testing.T) {
	dead := deadWeir(t)
	fb := bucket.Limit{Algorithm: bucket.FixedWindow, Capacity: 1, Calendar: bucket.Hour}
	for _, tc := range []struct {
		route middleware.Route
		want  []codes.Code
	}{
		{middleware.Route{Limit: "mw", OnUnavailable: middleware.FailOpen}, []codes.Code{codes.OK, codes.OK}},
		{middleware.Route{Limit: "mw", OnUnavailable: middleware.FailClosed}, []codes.Code{codes.Unavailable, codes.Unavailable}},
		{middleware.Route{Limit: "mw", OnUnavailable: middleware.FailLocal, Fallback: fb}, []codes.Code{codes.OK, codes.ResourceExhausted}},
	} {
		t.Run(tc.route.OnUnavailable.String(), func(t *testing.T) {
			hc := grpcApp(t, middleware.GRPCConfig{Taker: dead, Key: peerHost, Default: &tc.route})
			for i, want := range tc.want {
				if _, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{}); status.Code(err) != want {
					t.Fatalf("call %d: %v, want %v", i+1, err, want)
				}
			}
		})
	}
	if _, err := middleware.NewGRPC(middleware.GRPCConfig{Taker: dead, Key: peerHost, Routes: map[string]middleware.Route{checkMethod: {}}}); err == nil {
		t.Fatal("a route without a limit was accepted")
	}
}
