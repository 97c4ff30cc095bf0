package node

import (
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"time"

	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
)

// grpcHandshakeTimeout bounds a new public gRPC connection's handshake (TLS
// and HTTP/2 preface): a client that connects and sends nothing would hold
// GracefulStop/Stop for gRPC's default 120 s.
const grpcHandshakeTimeout = 10 * time.Second

// limitListener caps the connections open at once on ln (ServerLimits.MaxConns).
func limitListener(ln net.Listener, l ServerLimits) net.Listener {
	return netutil.LimitListener(ln, l.MaxConns)
}

// newHTTPServer returns the public HTTP server for h, bounded by l, and
// the listener to serve it on: ln capped at l.MaxConns, and wrapped in TLS
// (HTTP/2 and HTTP/1.1 offered) when tlsCfg is not nil.
func newHTTPServer(ln net.Listener, h http.Handler, l ServerLimits, tlsCfg *tls.Config, log *slog.Logger) (net.Listener, *http.Server) {
	ln = limitListener(ln, l)
	if tlsCfg != nil {
		tlsCfg = tlsCfg.Clone()
		tlsCfg.NextProtos = []string{"h2", "http/1.1"}
		ln = tls.NewListener(ln, tlsCfg)
	}
	return ln, &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.HTTPReadHeaderTimeout,
		ReadTimeout:       l.HTTPReadTimeout,
		WriteTimeout:      l.HTTPWriteTimeout,
		IdleTimeout:       l.HTTPIdleTimeout,
		MaxHeaderBytes:    l.HTTPMaxHeaderBytes,
		TLSConfig:         tlsCfg,
		// Failed TLS handshakes and malformed requests are the callers'
		// doing; at Debug they cannot flood the log.
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
}

// grpcStreamWorkers is how many long-lived goroutines run the public gRPC
// server's calls. Without them gRPC starts a goroutine per call, whose
// small first stack the decision path outgrows: the stack copy
// (runtime.newstack under bucket.Store.TakeTenantAt) was 19 % of a node's
// CPU at 64 unary callers, and 4 % with 128 workers; with 8 it was still
// 14 %, since a call finds a worker only when one is idle. A worker's
// stack stays grown between calls, until a collection finds it mostly
// unused and halves it (what is left of the 4 %). When every worker is
// busy, gRPC starts a goroutine for the call as before, so the number
// bounds nothing; an idle worker costs its stack.
func grpcStreamWorkers() uint32 {
	return uint32(max(128, 16*runtime.GOMAXPROCS(0))) //nolint:gosec // small and positive
}

// grpcServerOptions are the public gRPC server's bounds (l), TLS (when
// tlsCfg is not nil) and interceptors.
func grpcServerOptions(l ServerLimits, tlsCfg *tls.Config, unary grpc.UnaryServerInterceptor, stream grpc.StreamServerInterceptor) []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpc.ConnectionTimeout(grpcHandshakeTimeout),
		grpc.MaxConcurrentStreams(l.GRPCMaxConcurrentStreams),
		grpc.MaxRecvMsgSize(l.GRPCMaxRecvBytes),
		grpc.MaxHeaderListSize(uint32(min(l.HTTPMaxHeaderBytes, 1<<30))), //nolint:gosec // bounded above
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: l.GRPCKeepaliveMinTime, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle: l.GRPCMaxConnectionIdle,
			Time:              time.Minute,      // ping a silent client after a minute
			Timeout:           20 * time.Second, // and drop it when the ping is not answered
		}),
	}
	if tlsCfg != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tlsCfg)))
	}
	opts = append(opts, grpc.NumStreamWorkers(grpcStreamWorkers()),
		grpc.ChainUnaryInterceptor(unary), grpc.ChainStreamInterceptor(stream))
	return opts
}
