package main

import (
	"flag"
	"strconv"

	"github.com/weir-rl/weir/node"
)

// securityFlags binds the serve flags of the security group (peer
// certificates, public TLS, caller tokens, server hardening) to cfg. They
// are kept together here so other flag groups merge without conflict.
func securityFlags(fs *flag.FlagSet, cfg *node.Config) {
	fs.StringVar(&cfg.Security.PeerTLS.CertFile, "peer-tls-cert-file", "", "operator peer certificate (PEM); with --peer-tls-key-file and --peer-tls-ca-file it replaces the one derived from the cluster secret")
	fs.StringVar(&cfg.Security.PeerTLS.KeyFile, "peer-tls-key-file", "", "key of --peer-tls-cert-file (PEM)")
	fs.StringVar(&cfg.Security.PeerTLS.CAFile, "peer-tls-ca-file", "", "CA (PEM) that signed every member's peer certificate")

	fs.StringVar(&cfg.Security.TLS.CertFile, "tls-cert-file", "", "serve the public HTTP and gRPC APIs over TLS with this certificate chain (PEM); reloaded when it changes")
	fs.StringVar(&cfg.Security.TLS.KeyFile, "tls-key-file", "", "key of --tls-cert-file (PEM)")
	fs.StringVar(&cfg.Security.TLS.ClientCAFile, "tls-client-ca-file", "", "require client certificates signed by a CA in this file (PEM)")

	fs.StringVar(&cfg.Security.TokensFile, "tokens-file", "", "caller tokens (YAML, SHA-256 hashes; weir token hash); reloaded when it changes. Empty: the API is open")
	fs.BoolVar(&cfg.Security.ProtectMetrics, "protect-metrics", false, "with --tokens-file, require a read-scope token for /metrics")

	l := &cfg.Security.Limits
	d := node.DefaultServerLimits()
	fs.DurationVar(&l.HTTPReadHeaderTimeout, "http-read-header-timeout", d.HTTPReadHeaderTimeout, "longest time to read a request's headers, and to wait for a new connection's first request")
	fs.DurationVar(&l.HTTPReadTimeout, "http-read-timeout", d.HTTPReadTimeout, "longest time to read a whole request, body included")
	fs.DurationVar(&l.HTTPWriteTimeout, "http-write-timeout", d.HTTPWriteTimeout, "longest time to write a response (a queued lease acquire gets its wait on top)")
	fs.DurationVar(&l.HTTPIdleTimeout, "http-idle-timeout", d.HTTPIdleTimeout, "close keep-alive connections idle this long")
	fs.IntVar(&l.HTTPMaxHeaderBytes, "http-max-header-bytes", d.HTTPMaxHeaderBytes, "largest request header block; more is 431")
	fs.IntVar(&l.MaxConns, "max-conns", d.MaxConns, "cap on open connections per public listener (HTTP, gRPC)")
	fs.Func("grpc-max-concurrent-streams", "cap on concurrent calls per gRPC connection (default 256)", func(s string) error {
		v, err := strconv.ParseUint(s, 10, 32)
		l.GRPCMaxConcurrentStreams = uint32(v)
		return err
	})
	fs.IntVar(&l.GRPCMaxRecvBytes, "grpc-max-recv-bytes", d.GRPCMaxRecvBytes, "largest gRPC request message; more is ResourceExhausted")
	fs.DurationVar(&l.GRPCKeepaliveMinTime, "grpc-keepalive-min-time", d.GRPCKeepaliveMinTime, "disconnect gRPC clients that ping more often than this")
	fs.DurationVar(&l.GRPCMaxConnectionIdle, "grpc-max-connection-idle", d.GRPCMaxConnectionIdle, "close gRPC connections without calls for this long")

	rc := &cfg.RESP
	fs.DurationVar(&rc.AuthTimeout, "resp-auth-timeout", rc.AuthTimeout, "with --tokens-file, close Redis-protocol connections not authenticated this long after they opened")
	fs.DurationVar(&rc.CommandTimeout, "resp-command-timeout", rc.CommandTimeout, "close Redis-protocol connections whose command has not arrived whole this long after its first byte")
	fs.DurationVar(&rc.IdleTimeout, "resp-idle-timeout", rc.IdleTimeout, "close Redis-protocol connections idle this long between commands")
}
