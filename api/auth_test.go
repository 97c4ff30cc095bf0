package api

import (
	"context"
	"errors"
	"testing"

	"github.com/weir-rl/weir/auth"
)

func testAuthConfig(t *testing.T, failures *[]auth.Reason) AuthConfig {
	t.Helper()
	file := "version: 1\ntokens:\n" +
		"  - {name: acme, sha256: " + auth.HashToken("acme") + ", scopes: [decide], key_prefix: \"tenant:acme:\", limits: [export]}\n" +
		"  - {name: ops, sha256: " + auth.HashToken("ops") + ", scopes: [admin, read]}\n"
	p, err := auth.Parse([]byte(file), "test")
	if err != nil {
		t.Fatal(err)
	}
	return AuthConfig{Policy: func() *auth.Policy { return p }, OnFailure: func(r auth.Reason) { *failures = append(*failures, r) }}
}

// TestAuthorizingDeciderSteps: each row is one call through the policy;
// a refused call never reaches the wrapped Decider.
func TestAuthorizingDeciderSteps(t *testing.T) {
	var failures []auth.Reason
	cfg := testAuthConfig(t, &failures)
	p := cfg.Policy()
	caller := func(tok string) context.Context {
		a := p.Authenticate(tok)
		if !a.OK() {
			return context.Background()
		}
		return WithCaller(context.Background(), a.Token)
	}
	tests := []struct {
		name   string
		call   func(d Decider) error
		code   Code // 0: allowed
		reason auth.Reason
	}{
		{"own key", func(d Decider) error {
			_, err := d.Take(caller("acme"), []Check{{Limit: "export", Key: "tenant:acme:1", Cost: 1}})
			return err
		}, 0, ""},
		{"other tenant in a multi-check", func(d Decider) error {
			_, err := d.Take(caller("acme"), []Check{{Limit: "export", Key: "tenant:acme:1", Cost: 1}, {Limit: "export", Key: "tenant:evil:x", Cost: 1}})
			return err
		}, CodeForbidden, auth.ReasonKeyPrefix},
		{"other limit", func(d Decider) error {
			_, err := d.Take(caller("acme"), []Check{{Limit: "search", Key: "tenant:acme:1", Cost: 1}})
			return err
		}, CodeForbidden, auth.ReasonLimit},
		{"no caller in the context", func(d Decider) error {
			_, err := d.Take(context.Background(), []Check{{Limit: "export", Key: "tenant:acme:1", Cost: 1}})
			return err
		}, CodeUnauthenticated, auth.ReasonMissing},
		{"lease of another tenant", func(d Decider) error {
			_, err := d.Acquire(caller("acme"), AcquireRequest{Limit: "export", Key: "tenant:evil:x"})
			return err
		}, CodeForbidden, auth.ReasonKeyPrefix},
		{"decide token forgets", func(d Decider) error {
			_, err := d.Forget(caller("acme"), "n2")
			return err
		}, CodeForbidden, auth.ReasonScope},
		{"admin token forgets", func(d Decider) error {
			_, err := d.Forget(caller("ops"), "n2")
			return err
		}, 0, ""},
		{"admin token takes", func(d Decider) error {
			_, err := d.Take(caller("ops"), []Check{{Limit: "export", Key: "k", Cost: 1}})
			return err
		}, CodeForbidden, auth.ReasonScope},
		{"read token reads the cluster", func(d Decider) error {
			_, err := d.Cluster(caller("ops"), "", "")
			return err
		}, 0, ""},
	}
	for _, tt := range tests {
		failures = nil
		f := &fakeDecider{}
		err := tt.call(AuthorizingDecider(f, cfg))
		called := len(f.takes)+len(f.acquires)+len(f.forgotten)+len(f.clusters) > 0
		if tt.code == 0 {
			if err != nil || !called {
				t.Errorf("%s: err %v, reached the decider %v; want allowed", tt.name, err, called)
			}
			continue
		}
		e, ok := errors.AsType[*Error](err)
		if !ok || e.Code != tt.code || called || len(failures) != 1 || failures[0] != tt.reason {
			t.Errorf("%s: err %v, reached the decider %v, failures %v; want code %v, reason %q, not reached", tt.name, err, called, failures, tt.code, tt.reason)
		}
	}
	// Without a policy every call goes through.
	f := &fakeDecider{}
	if _, err := AuthorizingDecider(f, AuthConfig{}).Forget(context.Background(), "n2"); err != nil || len(f.forgotten) != 1 {
		t.Fatalf("open API: %v", err)
	}
}
