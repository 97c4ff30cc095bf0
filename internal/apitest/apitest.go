// Package apitest holds what the tests of api's front ends (api/httpapi,
// api/grpcapi, api/envoyrls, api/authz) share: a deterministic Decider that
// records every call, the answers of the embedded default limits file's
// "export" limit that they assert on, the checks their fuzz targets make of
// every accepted request, a small caller policy, and what the benchmarks
// of an HTTP handler or server share, node's too (bench.go: a reusable
// ResponseWriter, a serve loop, a checked POST). It is for tests only.
package apitest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/auth"
)

// RenewCall is one call of Decider.Renew.
type RenewCall struct {
	ID  string
	TTL time.Duration
}

// Decider is a deterministic api.Decider that records every call. Each
// behaviour is a function field; a nil field gives the default documented
// on its method. Mu guards the recorded calls and the function fields; a
// test that changes a function field while a server runs holds it.
type Decider struct {
	Forgotten []string // names passed to Forget

	Mu       sync.Mutex
	Takes    [][]api.Check
	Acquires []api.AcquireRequest
	Renews   []RenewCall
	Releases []string
	Clusters [][2]string
	Allots   []api.AllotRequest
	Returns  []api.ReturnRequest

	TakeFn    func(ctx context.Context, checks []api.Check) (api.TakeResponse, error)
	AcquireFn func(req api.AcquireRequest) (api.AcquireResponse, error)
	RenewFn   func(id string, ttl time.Duration) (time.Duration, error)
	ReleaseFn func(id string) error
	ClusterFn func(limit, key string) (api.ClusterInfo, error)
	AllotFn   func(req api.AllotRequest) (api.AllotResponse, error)
	NotReady  bool
}

var _ api.Decider = (*Decider)(nil)

// ExportAllowed is the "export" limit of the embedded default limits file
// (docs/architecture.md §4) (capacity 6, 2/s, so a 3 s window) with 5
// tokens left after an allowed take.
func ExportAllowed() api.Result {
	return api.Result{
		Limit: "export", Allowed: true, Remaining: 5, Capacity: 6,
		ResetAfter: 500 * time.Millisecond, Window: 3 * time.Second,
	}
}

// ExportDenied is the denial of docs/architecture.md §5.1: 500 ms to retry,
// 3 s to full.
func ExportDenied() api.Result {
	return api.Result{
		Limit: "export", Allowed: false, Remaining: 0, Capacity: 6,
		RetryAfter: 500 * time.Millisecond, ResetAfter: 3 * time.Second, Window: 3 * time.Second,
	}
}

// DenyExport answers any take with ExportDenied, for Decider.TakeFn.
func DenyExport(_ context.Context, _ []api.Check) (api.TakeResponse, error) {
	return api.TakeResponse{
		Allowed: false, RetryAfter: 500 * time.Millisecond, RulesVersion: 3,
		Results: []api.Result{ExportDenied()},
	}, nil
}

// Take allows every check with ExportAllowed figures (named after the
// check's limit) unless TakeFn is set.
func (f *Decider) Take(ctx context.Context, checks []api.Check) (api.TakeResponse, error) {
	f.Mu.Lock()
	f.Takes = append(f.Takes, append([]api.Check(nil), checks...))
	fn := f.TakeFn
	f.Mu.Unlock()
	if fn != nil {
		return fn(ctx, checks)
	}
	resp := api.TakeResponse{Allowed: true, RulesVersion: 3}
	for _, c := range checks {
		r := ExportAllowed()
		r.Limit = c.Limit
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

// Acquire grants lease "l-1" (fencing token 17, 30 s, 8 permits) unless
// AcquireFn is set.
func (f *Decider) Acquire(_ context.Context, req api.AcquireRequest) (api.AcquireResponse, error) {
	f.Mu.Lock()
	f.Acquires = append(f.Acquires, req)
	fn := f.AcquireFn
	f.Mu.Unlock()
	if fn != nil {
		return fn(req)
	}
	return api.AcquireResponse{
		Granted: true, ID: "l-1", FencingToken: 17, TTL: 30 * time.Second,
		Permits: 8, RulesVersion: 3,
	}, nil
}

// Renew grants the ttl asked for (30 s for 0) unless RenewFn is set.
func (f *Decider) Renew(_ context.Context, id string, ttl time.Duration) (time.Duration, error) {
	f.Mu.Lock()
	f.Renews = append(f.Renews, RenewCall{id, ttl})
	fn := f.RenewFn
	f.Mu.Unlock()
	if fn != nil {
		return fn(id, ttl)
	}
	if ttl == 0 {
		ttl = 30 * time.Second
	}
	return ttl, nil
}

// Release succeeds unless ReleaseFn is set.
func (f *Decider) Release(_ context.Context, id string) error {
	f.Mu.Lock()
	f.Releases = append(f.Releases, id)
	fn := f.ReleaseFn
	f.Mu.Unlock()
	if fn != nil {
		return fn(id)
	}
	return nil
}

// Cluster answers node n1 at epoch 7 with members n1 (alive) and n2
// (suspect), and owner n2 when asked about a key, unless ClusterFn is set.
func (f *Decider) Cluster(_ context.Context, limit, key string) (api.ClusterInfo, error) {
	f.Mu.Lock()
	f.Clusters = append(f.Clusters, [2]string{limit, key})
	fn := f.ClusterFn
	f.Mu.Unlock()
	if fn != nil {
		return fn(limit, key)
	}
	info := api.ClusterInfo{Node: "n1", Epoch: 7, Members: []api.Member{
		{Name: "n1", Addr: "10.0.0.1:7946", State: "alive", LimitsVersion: 3},
		{Name: "n2", Addr: "10.0.0.2:7946", State: "suspect", LimitsVersion: 3},
	}}
	if limit != "" {
		info.Owner = "n2"
	}
	return info, nil
}

// Readiness is not ready, with reason "test: not ready", when NotReady is set.
func (f *Decider) Readiness() api.Readiness {
	if f.NotReady {
		return api.Readiness{Reason: "test: not ready"}
	}
	return api.Readiness{Ready: true}
}

// Forget forgets n2, refuses n1 as alive and knows no other member.
func (f *Decider) Forget(_ context.Context, name string) (bool, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.Forgotten = append(f.Forgotten, name)
	switch name {
	case "n2":
		return true, nil
	case "n1":
		return false, api.Errorf(api.CodeInvalid, "member n1 is alive")
	}
	return false, nil
}

// Calls returns how many takes, acquires, renews, releases and cluster
// calls the Decider received.
func (f *Decider) Calls() int {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return len(f.Takes) + len(f.Acquires) + len(f.Renews) + len(f.Releases) + len(f.Clusters)
}

// LastTake returns the checks of the last take, failing t when there was
// none.
func (f *Decider) LastTake(t testing.TB) []api.Check {
	t.Helper()
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if len(f.Takes) == 0 {
		t.Fatal("Decider.Take was not called")
	}
	return f.Takes[len(f.Takes)-1]
}

// BenchDecider denies every take with DenyExport without recording it, so
// that benchmarks measure the front end alone.
type BenchDecider struct{ Decider }

// Take implements api.Decider.
func (*BenchDecider) Take(ctx context.Context, checks []api.Check) (api.TakeResponse, error) {
	return DenyExport(ctx, checks)
}

// EvidenceDecider answers every take with one ExportAllowed result that
// carries evidence: run "n2/ab12", decided at 1_700_000_000_123_456_789 ns,
// bucket 0x30007.
func EvidenceDecider() *Decider {
	return &Decider{TakeFn: func(_ context.Context, checks []api.Check) (api.TakeResponse, error) {
		r := ExportAllowed()
		r.Evidence = api.Evidence{Run: "n2/ab12", DecidedAt: time.Unix(0, 1_700_000_000_123_456_789), Bucket: 0x30007}
		return api.TakeResponse{Allowed: true, RulesVersion: 3, Results: []api.Result{r}}, nil
	}}
}

// The bounds the fuzz targets decode with: the front ends' defaults.
const (
	FuzzMaxKeyBytes = 512
	FuzzMaxChecks   = 100
)

// WantInvalid fails t unless err is a CodeInvalid *api.Error with a detail.
func WantInvalid(t testing.TB, err error) {
	t.Helper()
	e, ok := errors.AsType[*api.Error](err)
	if !ok || e.Code != api.CodeInvalid || e.Detail == "" {
		t.Fatalf("error %v (%T) is not a CodeInvalid *Error with a detail", err, err)
	}
}

// WantValidChecks fails t unless checks pass the input checks under the
// fuzz bounds: 1 to FuzzMaxChecks checks, each with a positive cost and a
// limit and key of 1 to 512 bytes of valid UTF-8.
func WantValidChecks(t testing.TB, checks []api.Check) {
	t.Helper()
	if len(checks) == 0 || len(checks) > FuzzMaxChecks {
		t.Fatalf("accepted %d checks", len(checks))
	}
	for i, c := range checks {
		if c.Cost < 1 || c.Limit == "" || c.Key == "" || len(c.Key) > 512 || len(c.Limit) > 512 ||
			!utf8.ValidString(c.Key) || !utf8.ValidString(c.Limit) {
			t.Fatalf("accepted bad check %d: %+v", i, c)
		}
	}
}

// Ctx returns a context that ends after 10 s or with the test.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// WantCode fails t unless err is a gRPC status with code and message msg.
func WantCode(t testing.TB, err error, code codes.Code, msg string) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != code || st.Message() != msg {
		t.Fatalf("got %v %q, want %v %q", st.Code(), st.Message(), code, msg)
	}
}

// Policy returns a caller policy of two tokens: "acme", with the decide
// scope, confined to limit export and key prefix "tenant:acme:"; and
// "ops", with the admin and read scopes.
func Policy(t testing.TB) *auth.Policy {
	t.Helper()
	file := "version: 1\ntokens:\n" +
		"  - {name: acme, sha256: " + auth.HashToken("acme") + ", scopes: [decide], key_prefix: \"tenant:acme:\", limits: [export]}\n" +
		"  - {name: ops, sha256: " + auth.HashToken("ops") + ", scopes: [admin, read]}\n"
	p, err := auth.Parse([]byte(file), "test")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Allot records req and answers with AllotFn, or grants what was wanted
// for a second.
func (f *Decider) Allot(_ context.Context, req api.AllotRequest) (api.AllotResponse, error) {
	f.Mu.Lock()
	f.Allots = append(f.Allots, req)
	fn := f.AllotFn
	f.Mu.Unlock()
	if fn != nil {
		return fn(req)
	}
	return api.AllotResponse{Tokens: req.Want, TTL: time.Second, Capacity: 6, Window: 3 * time.Second}, nil
}

// Return records req.
func (f *Decider) Return(_ context.Context, req api.ReturnRequest) error {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.Returns = append(f.Returns, req)
	return nil
}
