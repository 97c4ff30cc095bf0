package main

import (
	"strings"
	"testing"

	"github.com/weir-rl/weir/node"
)

// FuzzServeFlags parses arbitrary serve command lines (the TLS, token,
// peer-certificate and server-limit flags among them) the way serve does,
// then validates the Config. Nothing panics, and a Config that validates
// never has half a TLS or peer-certificate setting or a negative bound.
func FuzzServeFlags(f *testing.F) {
	for _, s := range []string{
		"--tls-cert-file a --tls-key-file b --tls-client-ca-file c",
		"--tls-cert-file a",
		"--peer-tls-cert-file a --peer-tls-key-file b",
		"--http-read-timeout -1s --max-conns -5",
		"--grpc-max-concurrent-streams 99999999999 --grpc-max-recv-bytes 10",
		"--gossip-addr 127.0.0.1:65535 --tokens-file t --protect-metrics",
		"--gossip-addr :x --timing lan",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		cfg := node.DefaultConfig()
		pf := processFlags{logFormat: "text"}
		var cf clusterFlags
		fs := newFlagSet("serve")
		serveFlags(fs, &cfg, &cf, &pf)
		if parseWithEnv(fs, strings.Fields(line), func(string) string { return "" }) != nil {
			return
		}
		if cf.apply(&cfg) != nil {
			return
		}
		cfg.NodeName = defaultNodeName(func() (string, error) { return "h", nil }, cfg.Ring.BindPort)
		if cfg.Validate() != nil {
			return
		}
		s := cfg.Security
		if (s.TLS.CertFile == "") != (s.TLS.KeyFile == "") || (s.TLS.ClientCAFile != "" && s.TLS.CertFile == "") {
			t.Fatalf("half a TLS setting validated: %+v", s.TLS)
		}
		if p := s.PeerTLS; (p.CertFile == "") != (p.KeyFile == "") || (p.CertFile == "") != (p.CAFile == "") {
			t.Fatalf("half a peer TLS setting validated: %+v", p)
		}
		l := s.Limits
		if l.HTTPReadTimeout < 0 || l.HTTPWriteTimeout < 0 || l.MaxConns < 0 || l.GRPCMaxRecvBytes < 0 || l.HTTPMaxHeaderBytes < 0 {
			t.Fatalf("a negative bound validated: %+v", l)
		}
		_ = cfg.PeerListenAddr()
	})
}
