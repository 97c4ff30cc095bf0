package authz

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/auth"
	"github.com/weir-rl/weir/internal/apitest"
)

func testAuthConfig(t *testing.T, failures *[]auth.Reason) Config {
	t.Helper()
	p := apitest.Policy(t)
	return Config{Policy: func() *auth.Policy { return p }, OnFailure: func(r auth.Reason) { *failures = append(*failures, r) }}
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
		call   func(d api.Decider) error
		code   api.Code // 0: allowed
		reason auth.Reason
	}{
		{"own key", func(d api.Decider) error {
			_, err := d.Take(caller("acme"), []api.Check{{Limit: "export", Key: "tenant:acme:1", Cost: 1}})
			return err
		}, 0, ""},
		{"other tenant in a multi-check", func(d api.Decider) error {
			_, err := d.Take(caller("acme"), []api.Check{{Limit: "export", Key: "tenant:acme:1", Cost: 1}, {Limit: "export", Key: "tenant:evil:x", Cost: 1}})
			return err
		}, api.CodeForbidden, auth.ReasonKeyPrefix},
		{"other limit", func(d api.Decider) error {
			_, err := d.Take(caller("acme"), []api.Check{{Limit: "search", Key: "tenant:acme:1", Cost: 1}})
			return err
		}, api.CodeForbidden, auth.ReasonLimit},
		{"no caller in the context", func(d api.Decider) error {
			_, err := d.Take(context.Background(), []api.Check{{Limit: "export", Key: "tenant:acme:1", Cost: 1}})
			return err
		}, api.CodeUnauthenticated, auth.ReasonMissing},
		{"lease of another tenant", func(d api.Decider) error {
			_, err := d.Acquire(caller("acme"), api.AcquireRequest{Limit: "export", Key: "tenant:evil:x"})
			return err
		}, api.CodeForbidden, auth.ReasonKeyPrefix},
		{"decide token forgets", func(d api.Decider) error {
			_, err := d.Forget(caller("acme"), "n2")
			return err
		}, api.CodeForbidden, auth.ReasonScope},
		{"admin token forgets", func(d api.Decider) error {
			_, err := d.Forget(caller("ops"), "n2")
			return err
		}, 0, ""},
		{"admin token takes", func(d api.Decider) error {
			_, err := d.Take(caller("ops"), []api.Check{{Limit: "export", Key: "k", Cost: 1}})
			return err
		}, api.CodeForbidden, auth.ReasonScope},
		{"read token reads the cluster", func(d api.Decider) error {
			_, err := d.Cluster(caller("ops"), "", "")
			return err
		}, 0, ""},
	}
	for _, tt := range tests {
		failures = nil
		f := &apitest.Decider{}
		err := tt.call(Decider(f, cfg))
		called := len(f.Takes)+len(f.Acquires)+len(f.Forgotten)+len(f.Clusters) > 0
		if tt.code == 0 {
			if err != nil || !called {
				t.Errorf("%s: err %v, reached the decider %v; want allowed", tt.name, err, called)
			}
			continue
		}
		e, ok := errors.AsType[*api.Error](err)
		if !ok || e.Code != tt.code || called || len(failures) != 1 || failures[0] != tt.reason {
			t.Errorf("%s: err %v, reached the decider %v, failures %v; want code %v, reason %q, not reached", tt.name, err, called, failures, tt.code, tt.reason)
		}
	}
	// Without a policy every call goes through.
	f := &apitest.Decider{}
	if _, err := Decider(f, Config{}).Forget(context.Background(), "n2"); err != nil || len(f.Forgotten) != 1 {
		t.Fatalf("open API: %v", err)
	}
}

// stubOperator answers Hot and Stats and counts the calls that reached it.
type stubOperator struct{ calls int }

func (s *stubOperator) Hot(context.Context, string, int) (api.HotKeys, error) {
	s.calls++
	return api.HotKeys{Node: "n1"}, nil
}

func (s *stubOperator) Stats(context.Context) (api.ClusterStats, error) {
	s.calls++
	return api.ClusterStats{Node: "n1"}, nil
}

// TestOperatorNeedsRead: hot keys and stats name every tenant's traffic,
// so they need the read scope; a refusal never reaches the Operator.
func TestOperatorNeedsRead(t *testing.T) {
	var failures []auth.Reason
	cfg := testAuthConfig(t, &failures)
	p := cfg.Policy()
	as := func(tok string) context.Context { return WithCaller(context.Background(), p.Authenticate(tok).Token) }
	for _, tt := range []struct {
		name string
		ctx  context.Context
		code api.Code // 0: allowed
	}{
		{"read token", as("ops"), 0},
		{"decide token", as("acme"), api.CodeForbidden},
		{"no token", context.Background(), api.CodeUnauthenticated},
	} {
		s := &stubOperator{}
		op := Operator(s, cfg)
		_, errHot := op.Hot(tt.ctx, "", 10)
		_, errStats := op.Stats(tt.ctx)
		for _, err := range []error{errHot, errStats} {
			e, _ := errors.AsType[*api.Error](err)
			if tt.code == 0 && err != nil || tt.code != 0 && (e == nil || e.Code != tt.code) {
				t.Errorf("%s: err %v, want code %v", tt.name, err, tt.code)
			}
		}
		if want := map[bool]int{true: 2, false: 0}[tt.code == 0]; s.calls != want {
			t.Errorf("%s: the Operator saw %d calls, want %d", tt.name, s.calls, want)
		}
	}
	s := &stubOperator{}
	if _, err := Operator(s, Config{}).Stats(context.Background()); err != nil || s.calls != 1 {
		t.Fatalf("open API: %v", err)
	}
}

// TestRingForDecideTokens: a decide token may read the ring alone (a
// context marked by api.ForRing), which a cluster-aware client routes by,
// but not the cluster view.
func TestRingForDecideTokens(t *testing.T) {
	var failures []auth.Reason
	cfg := testAuthConfig(t, &failures)
	ctx := WithCaller(context.Background(), cfg.Policy().Authenticate("acme").Token)
	d := Decider(&apitest.Decider{}, cfg)
	if _, err := d.Cluster(api.ForRing(ctx), "", ""); err != nil {
		t.Fatalf("the ring for a decide token: %v", err)
	}
	if _, err := d.Cluster(ctx, "", ""); err == nil {
		t.Fatal("the cluster view was served to a decide token")
	}
}

// TestReloadReachesHeldTokens: a caller's token kept in a context from
// before a reload (a RESP connection, a gRPC stream) is judged by the
// policy in force at each call: removed, it is unauthenticated; narrowed to
// another key prefix, the old prefix is forbidden; nothing reaches the
// wrapped Decider on a refusal.
func TestReloadReachesHeldTokens(t *testing.T) {
	parse := func(file string) *auth.Policy {
		p, err := auth.Parse([]byte("version: 1\ntokens:\n"+file), "test")
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	tok := func(prefix string) string {
		return "  - {name: acme, sha256: " + auth.HashToken("acme") + ", scopes: [decide], key_prefix: \"" + prefix + "\"}\n"
	}
	other := "  - {name: ops, sha256: " + auth.HashToken("ops") + ", scopes: [admin]}\n"
	var cur atomic.Pointer[auth.Policy]
	cur.Store(parse(tok("tenant:acme:") + other))
	var failures []auth.Reason
	cfg := Config{Policy: cur.Load, OnFailure: func(r auth.Reason) { failures = append(failures, r) }}
	held := WithCaller(context.Background(), cur.Load().Authenticate("acme").Token)
	fake := &apitest.Decider{}
	d := Decider(fake, cfg)
	take := func(key string) error {
		_, err := d.Take(held, []api.Check{{Limit: "export", Key: key, Cost: 1}})
		return err
	}
	if err := take("tenant:acme:1"); err != nil {
		t.Fatalf("before the reload: %v", err)
	}
	cur.Store(parse(tok("tenant:acme:eu:") + other)) // narrowed
	if err := take("tenant:acme:1"); errCode(err) != api.CodeForbidden {
		t.Fatalf("narrowed token on its old prefix: %v, want forbidden", err)
	}
	if err := take("tenant:acme:eu:1"); err != nil {
		t.Fatalf("narrowed token on its new prefix: %v", err)
	}
	cur.Store(parse(other)) // removed
	if err := take("tenant:acme:eu:1"); errCode(err) != api.CodeUnauthenticated {
		t.Fatalf("removed token: %v, want unauthenticated", err)
	}
	if _, err := d.Cluster(WithCaller(api.ForRing(context.Background()), cur.Load().Authenticate("ops").Token), "", ""); errCode(err) != api.CodeForbidden {
		t.Fatalf("ops token without read on the ring: %v, want forbidden", err)
	}
	if n := len(fake.Takes); n != 2 {
		t.Fatalf("the wrapped Decider saw %d takes, want the 2 allowed", n)
	}
	if want := []auth.Reason{auth.ReasonKeyPrefix, auth.ReasonUnknown, auth.ReasonScope}; !slices.Equal(failures, want) {
		t.Fatalf("failures %v, want %v", failures, want)
	}
}

// errCode is the api.Code of err, 0 when it carries none.
func errCode(err error) api.Code {
	if e, ok := errors.AsType[*api.Error](err); ok {
		return e.Code
	}
	return 0
}
