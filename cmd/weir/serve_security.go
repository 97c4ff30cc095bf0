package main

import (
	"flag"

	"github.com/weir-rl/weir/node"
)

// securityFlags binds the serve flags of the security group (peer
// certificates, public TLS, caller tokens, server hardening) to cfg. They
// are kept together here so other flag groups merge without conflict.
func securityFlags(fs *flag.FlagSet, cfg *node.Config) {
	fs.StringVar(&cfg.PeerTLS.CertFile, "peer-tls-cert-file", "", "operator peer certificate (PEM); with --peer-tls-key-file and --peer-tls-ca-file it replaces the one derived from the cluster secret")
	fs.StringVar(&cfg.PeerTLS.KeyFile, "peer-tls-key-file", "", "key of --peer-tls-cert-file (PEM)")
	fs.StringVar(&cfg.PeerTLS.CAFile, "peer-tls-ca-file", "", "CA (PEM) that signed every member's peer certificate")
}
