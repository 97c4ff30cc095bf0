package main

import (
	"errors"
	"flag"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/weir-rl/weir/internal/tlsreload"
)

// connFlags are the client commands' connection flags: the node's
// address, TLS to an https:// address, and the caller token.
type connFlags struct {
	addr                      addrValue
	caFile, certFile, keyFile string
	insecure                  bool
	token                     string
}

// addConnFlags binds the connection flags of a client command.
func addConnFlags(fs *flag.FlagSet) *connFlags {
	c := &connFlags{addr: addrValue{raw: "http://127.0.0.1:8080"}}
	fs.Var(&c.addr, "addr", "node HTTP address: host:port, :port or a http:// or https:// URL (a bare address is https:// when a --tls- flag or --insecure-skip-verify is set)")
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

// base is the node's base URL, without a trailing slash: --addr as given
// when it names a scheme, else http://ADDR, or https://ADDR when a TLS
// flag asks for TLS; ":port" is 127.0.0.1:port.
func (c *connFlags) base() string {
	a := strings.TrimRight(c.addr.raw, "/")
	if strings.Contains(a, "://") {
		return a
	}
	if strings.HasPrefix(a, ":") {
		a = "127.0.0.1" + a
	}
	if c.caFile != "" || c.certFile != "" || c.insecure {
		return "https://" + a
	}
	return "http://" + a
}

// addrValue is --addr: an http:// or https:// URL with a host, or a bare
// host, host:port or :port; anything else is refused when parsed.
type addrValue struct{ raw string }

// String implements flag.Value.
func (a *addrValue) String() string { return a.raw }

// Set implements flag.Value.
func (a *addrValue) Set(v string) error {
	u := v
	if !strings.Contains(v, "://") {
		u = "http://" + v
	}
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || (p.Host == "" || p.Hostname() == "" && !strings.HasPrefix(p.Host, ":")) ||
		p.User != nil || p.RawQuery != "" || p.Fragment != "" || strings.Trim(p.Path, "/") != "" {
		return errors.New("want host:port, :port or http(s)://host:port")
	}
	a.raw = v
	return nil
}
