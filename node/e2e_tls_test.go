package node_test

import (
	"context"
	"crypto/tls"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/weir-rl/weir/api/weirv1"
	"github.com/weir-rl/weir/internal/nodetest"
	"github.com/weir-rl/weir/internal/testpki"
	"github.com/weir-rl/weir/internal/tlsreload"
	"github.com/weir-rl/weir/node"
)

// startTLSNode starts a node serving its public API over TLS with pair,
// optionally verifying clients against clientCA.
func startTLSNode(t *testing.T, pair testpki.Pair, clientCA string) *node.Node {
	t.Helper()
	cfg := node.LocalConfig()
	cfg.NodeName = "tls"
	cfg.Security.TLS = tlsreload.Config{CertFile: pair.CertFile, KeyFile: pair.KeyFile, ClientCAFile: clientCA}
	return nodetest.Start(t, cfg, node.Deps{})
}

func tlsClient(t *testing.T, opts tlsreload.ClientOptions) *tls.Config {
	t.Helper()
	c, err := tlsreload.ClientConfig(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// httpsTake posts one take over HTTPS and returns the status, or the error.
func httpsTake(t *testing.T, base string, tc *tls.Config) (int, error) {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: tc, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	resp, err := c.Post(base+"/v1/take", "application/json", strings.NewReader(`{"checks":[{"limit":"export","key":"k","cost":1}]}`))
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// grpcsTake takes over gRPC with TLS.
func grpcsTake(t *testing.T, addr string, tc *tls.Config) error {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = weirv1.NewLimiterClient(conn).Take(ctx, &weirv1.TakeRequest{Checks: []*weirv1.Check{{Limit: "export", Key: "k", Cost: 1}}})
	return err
}

// TestPublicTLS: HTTP (HTTP/2 and HTTP/1.1) and gRPC answer over TLS to a
// client trusting the CA, and a client trusting another CA fails the
// handshake on both.
func TestPublicTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "ca")
	other := testpki.NewCA(t, dir, "other")
	n := startTLSNode(t, ca.Server(t, dir, "node"), "")
	base := "https://" + n.HTTPAddr()
	good := tlsClient(t, tlsreload.ClientOptions{CAFile: ca.CertFile})
	if code, err := httpsTake(t, base, good); err != nil || code != http.StatusOK {
		t.Fatalf("HTTPS take: %d, %v", code, err)
	}
	if err := grpcsTake(t, n.GRPCAddr(), good); err != nil {
		t.Fatalf("gRPC over TLS: %v", err)
	}
	bad := tlsClient(t, tlsreload.ClientOptions{CAFile: other.CertFile})
	if _, err := httpsTake(t, base, bad); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("HTTPS with the wrong CA: err %v, want a certificate error", err)
	}
	if err := grpcsTake(t, n.GRPCAddr(), bad); err == nil {
		t.Fatal("gRPC with the wrong CA succeeded")
	}
	// Plaintext HTTP to the TLS port gets no decision.
	resp, err := http.Post("http://"+n.HTTPAddr()+"/v1/take", "application/json", strings.NewReader(`{}`))
	if err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plaintext take answered 200 on the TLS port")
		}
	}
}

// TestPublicTLSClientCertificate: with a client CA file, a client without
// a certificate from that CA is refused.
func TestPublicTLSClientCertificate(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "ca")
	clients := testpki.NewCA(t, dir, "clients")
	n := startTLSNode(t, ca.Server(t, dir, "node"), clients.CertFile)
	base := "https://" + n.HTTPAddr()
	cli := clients.Client(t, dir, "cli")
	with := tlsClient(t, tlsreload.ClientOptions{CAFile: ca.CertFile, CertFile: cli.CertFile, KeyFile: cli.KeyFile})
	if code, err := httpsTake(t, base, with); err != nil || code != http.StatusOK {
		t.Fatalf("with a client certificate: %d, %v", code, err)
	}
	if err := grpcsTake(t, n.GRPCAddr(), with); err != nil {
		t.Fatalf("gRPC with a client certificate: %v", err)
	}
	without := tlsClient(t, tlsreload.ClientOptions{CAFile: ca.CertFile})
	if _, err := httpsTake(t, base, without); err == nil {
		t.Fatal("HTTPS without a client certificate succeeded")
	}
	if err := grpcsTake(t, n.GRPCAddr(), without); err == nil {
		t.Fatal("gRPC without a client certificate succeeded")
	}
}

// TestPublicTLSCertificateSwap: a certificate replaced on disk is served by
// the running node's next handshake.
func TestPublicTLSCertificateSwap(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "ca")
	live := ca.Server(t, dir, "first")
	n := startTLSNode(t, live, "")
	tc := tlsClient(t, tlsreload.ClientOptions{CAFile: ca.CertFile})
	servedName := func() string {
		c, err := tls.Dial("tcp", n.HTTPAddr(), tc)
		if err != nil {
			return "error: " + err.Error()
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if got := servedName(); got != "first" {
		t.Fatalf("before the swap: %s", got)
	}
	ca.Server(t, dir, "second").Install(t, live)
	deadline := time.Now().Add(10 * time.Second)
	for servedName() != "second" {
		if time.Now().After(deadline) {
			t.Fatalf("the swapped certificate was not served within 10s: %s", servedName())
		}
		time.Sleep(50 * time.Millisecond) // polling the listener
	}
}
