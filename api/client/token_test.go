package client_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/api/client"
	"github.com/weir-rl/weir/auth"
	"github.com/weir-rl/weir/internal/nodetest"
	"github.com/weir-rl/weir/node" //nolint:depguard // integration tests against a real node, in the external test package only
)

const (
	tokSvc   = "svc-0123456789abcdef0123456789abcdef"
	tokPlain = "plain-0123456789abcdef0123456789abcdef"
)

// startTokenNode starts a node that wants caller tokens: tokSvc may decide
// and hold allotments, tokPlain may only decide.
func startTokenNode(t *testing.T) *node.Node {
	t.Helper()
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.yaml")
	limits := filepath.Join(dir, "limits.yaml")
	body := "version: 1\ntokens:\n" +
		"  - name: svc\n    sha256: " + auth.HashToken(tokSvc) + "\n    scopes: [decide, allot]\n" +
		"  - name: plain\n    sha256: " + auth.HashToken(tokPlain) + "\n    scopes: [decide]\n"
	if err := os.WriteFile(tokens, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(limits, []byte(clusterLimits), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := node.LocalConfig()
	cfg.LimitsPath = limits
	cfg.Security.TokensFile = tokens
	return nodetest.Start(t, cfg, node.Deps{})
}

func dialErr(n *node.Node, opts client.Options) (*client.Client, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return client.Dial(ctx, []string{n.GRPCAddr()}, opts)
}

// Options.Token reaches the node on every call (the ring, takes on the
// shared stream, allotments); without it the node refuses the client.
func TestClientToken(t *testing.T) {
	n := startTokenNode(t)
	if c, err := dialErr(n, client.Options{}); err == nil {
		_ = c.Close()
		t.Fatal("Dial without a token succeeded against a node that wants one")
	}
	c := dial(t, n, client.Options{Token: tokSvc, PlaintextToken: true, Allot: client.AllotOptions{On: true, Threshold: 10}})
	waitUntil(t, 10*time.Second, "a take decided from an allotment", func() bool {
		resp, err := c.Take(t.Context(), api.Check{Limit: "allotted", Key: "k"})
		if err != nil || !resp.Allowed {
			t.Fatalf("take: %+v, %v", resp, err)
		}
		return resp.Results[0].Source == api.SourceAllotment
	})
	// A token without the allot scope still decides; its client asks for
	// an allotment once, is refused, and leaves the limit to its owner.
	p := dial(t, n, client.Options{Token: tokPlain, PlaintextToken: true, Allot: client.AllotOptions{On: true, Threshold: 10}})
	waitUntil(t, 10*time.Second, "the refused ask", func() bool {
		resp, err := p.Take(t.Context(), api.Check{Limit: "allotted", Key: "k2"})
		if err != nil || !resp.Allowed || resp.Results[0].Source != api.SourceOwner {
			t.Fatalf("take: %+v, %v", resp, err)
		}
		return p.Stats().AllotFailures > 0
	})
	if st := p.Stats(); st.Allotted != 0 || st.AllotAsks != 1 {
		t.Fatalf("stats %+v: want one refused ask, nothing allotted", st)
	}
}

// NewWith sends the token on the caller's own connection too.
func TestClientTokenOnCallersConnection(t *testing.T) {
	n := startTokenNode(t)
	conn, err := grpc.NewClient(n.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if _, err := client.New(conn).Take(t.Context(), api.Check{Limit: "exact", Key: "k"}); err == nil {
		t.Fatal("a take without a token was answered")
	}
	c, err := client.NewWith(conn, client.Options{Token: tokPlain, PlaintextToken: true})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := c.Take(t.Context(), api.Check{Limit: "exact", Key: "k"}); err != nil || !resp.Allowed {
		t.Fatalf("take with the token: %+v, %v", resp, err)
	}
}

func TestClientTokenNotOverPlaintext(t *testing.T) {
	if err := (client.Options{Token: tokSvc}).Validate(); err == nil {
		t.Fatal("a token over plaintext validated")
	}
	if err := (client.Options{Token: tokSvc, PlaintextToken: true}).Validate(); err != nil {
		t.Fatal(err)
	}
}
