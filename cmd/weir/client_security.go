package main

import (
	"flag"
	"net/http"
	"time"

	"github.com/weir-rl/weir/internal/tlsreload"
)

// connFlags are the client commands' connection security flags: TLS to an
// https:// address, and the caller token.
type connFlags struct {
	caFile, certFile, keyFile string
	insecure                  bool
	token                     string
}

// addConnFlags binds the connection security flags of a client command.
func addConnFlags(fs *flag.FlagSet) *connFlags {
	c := &connFlags{}
	fs.StringVar(&c.caFile, "tls-ca-file", "", "verify an https:// node against this CA (PEM) instead of the system roots")
	fs.StringVar(&c.certFile, "tls-client-cert-file", "", "client certificate (PEM) for a node that verifies clients")
	fs.StringVar(&c.keyFile, "tls-client-key-file", "", "key of --tls-client-cert-file (PEM)")
	fs.BoolVar(&c.insecure, "insecure-skip-verify", false, "accept any server certificate (tests only)")
	fs.StringVar(&c.token, "token", "", "caller token, sent as Authorization: Bearer (WEIR_TOKEN)")
	return c
}

// client returns an HTTP client with timeout that speaks TLS as the flags
// say and sends the token with every request.
func (c *connFlags) client(timeout time.Duration) (*http.Client, error) {
	tc, err := tlsreload.ClientConfig(tlsreload.ClientOptions{
		CAFile: c.caFile, CertFile: c.certFile, KeyFile: c.keyFile, InsecureSkipVerify: c.insecure,
	})
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	var rt http.RoundTripper = tr
	if c.token != "" {
		rt = bearer{token: c.token, next: tr}
	}
	return &http.Client{Timeout: timeout, Transport: rt}, nil
}

// bearer adds Authorization: Bearer to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}
