package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/weir-rl/weir/internal/testpki"
	"github.com/weir-rl/weir/internal/tlsreload"
	"github.com/weir-rl/weir/node"
)

// startTLSNode starts an in-process node serving over TLS and returns its
// https:// base URL and the CA file that verifies it.
func startTLSNode(t *testing.T) (base, caFile string) {
	t.Helper()
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "ca")
	pair := ca.Server(t, dir, "node")
	cfg := node.LocalConfig()
	cfg.NodeName = "t"
	cfg.Security.TLS = tlsreload.Config{CertFile: pair.CertFile, KeyFile: pair.KeyFile}
	n, err := node.New(cfg, node.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = n.Shutdown(ctx)
	})
	return "https://" + n.HTTPAddr(), ca.CertFile
}

func TestCLISpeaksTLS(t *testing.T) {
	base, caFile := startTLSNode(t)
	if code, out, errb := runCmd("take", "--addr", base, "--tls-ca-file", caFile, "export", "k"); code != 0 {
		t.Fatalf("take over TLS with the CA: exit %d, %s %s", code, out, errb)
	}
	if code, _, errb := runCmd("take", "--addr", base, "export", "k"); code != 2 || !strings.Contains(errb, "certificate") {
		t.Fatalf("take over TLS without the CA: exit %d, stderr %q; want 2 and a certificate error", code, errb)
	}
	if code, _, errb := runCmd("take", "--addr", base, "--insecure-skip-verify", "export", "k"); code != 0 {
		t.Fatalf("take with --insecure-skip-verify: exit %d, %s", code, errb)
	}
	if code, out, errb := runCmd("status", "--addr", base, "--tls-ca-file", caFile); code != 0 || !strings.Contains(out, "node t") {
		t.Fatalf("status over TLS: exit %d, %s %s", code, out, errb)
	}
	if code, _, errb := runCmd("healthcheck", "--addr", base, "--tls-ca-file", caFile); code != 0 {
		t.Fatalf("healthcheck over TLS: exit %d, %s", code, errb)
	}
}
