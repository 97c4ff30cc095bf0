package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-rl/weir/internal/nodetest"
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
	n := nodetest.Start(t, cfg, node.Deps{})
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

func TestTokenCommands(t *testing.T) {
	if code, out, _ := runCmd("token", "hash", "test"); code != 0 || strings.TrimSpace(out) != "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" {
		t.Fatalf("token hash: exit %d, %q", code, out)
	}
	var out, errb strings.Builder
	if code := tokenCmd([]string{"hash"}, strings.NewReader("test\n"), &out, &errb); code != 0 || strings.TrimSpace(out.String()) != "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" {
		t.Fatalf("token hash from stdin: exit %d, %q", code, out.String())
	}
	code, newOut, _ := runCmd("token", "new")
	if code != 0 || !strings.Contains(newOut, "token:  ") || !strings.Contains(newOut, "sha256: ") {
		t.Fatalf("token new: exit %d, %q", code, newOut)
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(good, []byte("version: 1\ntokens:\n  - {name: a, sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08, scopes: [decide]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errb := runCmd("token", "check", good); code != 0 || !strings.Contains(out, "1 tokens") {
		t.Fatalf("token check: %d %s %s", code, out, errb)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("version: 1\ntokens:\n  - {name: a, sha256: test, scopes: [decide]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errb := runCmd("token", "check", bad); code != 1 || !strings.Contains(errb, "line 3") {
		t.Fatalf("token check of a bad file: %d %s", code, errb)
	}
}

// TestCLISendsToken: weir take --token reaches a node that requires one.
func TestCLISendsToken(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(path, []byte("version: 1\ntokens:\n  - {name: a, sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08, scopes: [decide]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := node.LocalConfig()
	cfg.NodeName = "t"
	cfg.Security.TokensFile = path
	n := nodetest.Start(t, cfg, node.Deps{})
	base := "http://" + n.HTTPAddr()
	if code, out, _ := runCmd("take", "--addr", base, "export", "k"); code != 2 || !strings.Contains(out, "unauthenticated") {
		t.Fatalf("take without a token: exit %d, %s", code, out)
	}
	if code, out, errb := runCmd("take", "--addr", base, "--token", "test", "export", "k"); code != 0 {
		t.Fatalf("take with a token: exit %d, %s %s", code, out, errb)
	}
}
