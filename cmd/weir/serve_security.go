package main

import (
	"flag"
	"net"
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

// protectedMode confines what a node started without protection serves to
// the loopback interface, as Redis's protected mode answers only loopback
// until a password is set, and returns a sentence per confinement for the
// log. given reports whether a flag was set (on the command line or by its
// WEIR_ variable).
//
//   - The public API (HTTP, gRPC) listens on 127.0.0.1 when there is no
//     --tokens-file and no public address was given (--http-addr,
//     --grpc-addr, --resp-addr): an open API is served to other hosts only
//     when someone named the address it listens on.
//   - Gossip and the peer service listen on 127.0.0.1 when there is no
//     --cluster-secret-file and no gossip address, seed or advertised
//     address was given (--gossip-addr, --join, --advertise-addr,
//     --peer-addr): plaintext gossip would let any host join and take over
//     keys.
//
// A node given its addresses, a tokens file or a secret is not changed.
func protectedMode(cfg *node.Config, given func(name string) bool) []string {
	var out []string
	if cfg.Security.TokensFile == "" && !given("http-addr") && !given("grpc-addr") && !given("resp-addr") {
		cfg.HTTPAddr, cfg.GRPCAddr = loopback(cfg.HTTPAddr), loopback(cfg.GRPCAddr)
		out = append(out, "no --tokens-file and no --http-addr/--grpc-addr: the open API listens on loopback only ("+
			cfg.HTTPAddr+", "+cfg.GRPCAddr+"); give a tokens file, or name the addresses (--http-addr :8080) to serve other hosts")
	}
	if cfg.Clustered && cfg.ClusterSecretFile == "" && !given("gossip-addr") && !given("join") && !given("advertise-addr") && !given("peer-addr") {
		cfg.Ring.BindAddr = "127.0.0.1"
		out = append(out, "no --cluster-secret-file and no --gossip-addr/--join: plaintext gossip and the peer service listen on loopback only; "+
			"give a cluster secret, or name the addresses, to form a cluster with other hosts")
	}
	return out
}

// loopback returns addr with its host replaced by 127.0.0.1 when it names
// every interface (":8080", "0.0.0.0:8080", "[::]:8080"); other addresses,
// and those that do not parse (Validate reports them), are returned as
// they are.
func loopback(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || (host != "" && host != "0.0.0.0" && host != "::") {
		return addr
	}
	return net.JoinHostPort("127.0.0.1", port)
}
