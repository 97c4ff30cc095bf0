package node_test

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weir-rl/weir/internal/testpki"
	"github.com/weir-rl/weir/internal/tlsreload"
	"github.com/weir-rl/weir/node"
)

// respClient is a go-redis client of addr with password (AUTH) and TLS
// as given; it retries nothing, so every error is the node's answer.
func respClient(t *testing.T, addr, password string, tc *tls.Config) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr: addr, Password: password, TLSConfig: tc, Protocol: 2,
		MaxRetries: -1, DialTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestRESPNeedsATokenAndKeepsItsConfinement: with a tokens file the Redis
// endpoint answers nothing but the connection commands before AUTH, refuses
// an unknown token, and authorizes each check with the connection's token,
// so a tenant's token spends nothing outside its key prefix.
func TestRESPNeedsATokenAndKeepsItsConfinement(t *testing.T) {
	path := writeLimits(t, tokensFile())
	tn := startNode(t, func(c *node.Config) {
		c.Security.TokensFile = path
		c.RESPAddr = "127.0.0.1:0"
	})
	addr := tn.n.RESPAddr()
	ctx := context.Background()

	if err := respClient(t, addr, "", nil).Do(ctx, "WEIR.TAKE", "export", "tenant:acme:x").Err(); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
		t.Fatalf("WEIR.TAKE before AUTH: %v, want NOAUTH", err)
	}
	if err := respClient(t, addr, "not-a-token", nil).Ping(ctx).Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGPASS") {
		t.Fatalf("AUTH with an unknown token: %v, want WRONGPASS", err)
	}
	acme := respClient(t, addr, tokAcme, nil)
	before := tn.remaining("export", "tenant:evil:x")
	if err := acme.Do(ctx, "WEIR.TAKE", "export", "tenant:evil:x").Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
		t.Fatalf("acme's token on tenant:evil:x: %v, want NOPERM", err)
	}
	// remaining spends one itself, on a fake clock that does not move.
	if after := tn.remaining("export", "tenant:evil:x"); after != before-1 {
		t.Fatalf("a refused take spent: remaining %d, then %d (want %d)", before, after, before-1)
	}
	got, err := acme.Do(ctx, "WEIR.TAKE", "export", "tenant:acme:x").Int64Slice()
	if err != nil || len(got) != 4 || got[0] != 1 {
		t.Fatalf("acme's token on tenant:acme:x: %v, %v; want allowed", got, err)
	}
}

// TestRESPSpeaksTLS: with the public certificate configured, the Redis
// endpoint is TLS too, verified against the CA.
func TestRESPSpeaksTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "ca")
	pair := ca.Server(t, dir, "node")
	tn := startNode(t, func(c *node.Config) {
		c.Security.TLS = tlsreload.Config{CertFile: pair.CertFile, KeyFile: pair.KeyFile}
		c.RESPAddr = "127.0.0.1:0"
	})
	ctx := context.Background()
	got, err := respClient(t, tn.n.RESPAddr(), "", tlsClient(t, tlsreload.ClientOptions{CAFile: ca.CertFile})).Do(ctx, "WEIR.TAKE", "export", "k").Int64Slice()
	if err != nil || len(got) != 4 || got[0] != 1 {
		t.Fatalf("WEIR.TAKE over TLS: %v, %v", got, err)
	}
	if err := respClient(t, tn.n.RESPAddr(), "", nil).Ping(ctx).Err(); err == nil {
		t.Fatal("a plaintext PING on the TLS port was answered")
	}
}
