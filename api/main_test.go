package api

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type renewCall struct {
	ID  string
	TTL time.Duration
}

// fakeDecider is a deterministic Decider that records every call. Each
// behaviour is a function field; a nil field gives the default below.
type fakeDecider struct {
	forgotten []string // names passed to Forget

	mu       sync.Mutex
	takes    [][]Check
	acquires []AcquireRequest
	renews   []renewCall
	releases []string
	clusters [][2]string

	takeFn    func(ctx context.Context, checks []Check) (TakeResponse, error)
	acquireFn func(req AcquireRequest) (AcquireResponse, error)
	renewFn   func(id string, ttl time.Duration) (time.Duration, error)
	releaseFn func(id string) error
	clusterFn func(limit, key string) (ClusterInfo, error)
	notReady  bool
}

var _ Decider = (*fakeDecider)(nil)

// exportResult is the "export" limit of the embedded default limits file (docs/architecture.md §4) (capacity 6, 2/s, so a
// 3 s window) with 5 tokens left after an allowed take.
func exportAllowed() Result {
	return Result{
		Limit: "export", Allowed: true, Remaining: 5, Capacity: 6,
		ResetAfter: 500 * time.Millisecond, Window: 3 * time.Second,
	}
}

// exportDenied is the denial of docs/architecture.md §5.1: 500 ms to retry, 3 s to full.
func exportDenied() Result {
	return Result{
		Limit: "export", Allowed: false, Remaining: 0, Capacity: 6,
		RetryAfter: 500 * time.Millisecond, ResetAfter: 3 * time.Second, Window: 3 * time.Second,
	}
}

// Take allows every check with exportAllowed figures (named after the
// check's limit) unless takeFn is set.
func (f *fakeDecider) Take(ctx context.Context, checks []Check) (TakeResponse, error) {
	f.mu.Lock()
	f.takes = append(f.takes, append([]Check(nil), checks...))
	fn := f.takeFn
	f.mu.Unlock()
	if fn != nil {
		return fn(ctx, checks)
	}
	resp := TakeResponse{Allowed: true, RulesVersion: 3}
	for _, c := range checks {
		r := exportAllowed()
		r.Limit = c.Limit
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

func (f *fakeDecider) Acquire(_ context.Context, req AcquireRequest) (AcquireResponse, error) {
	f.mu.Lock()
	f.acquires = append(f.acquires, req)
	fn := f.acquireFn
	f.mu.Unlock()
	if fn != nil {
		return fn(req)
	}
	return AcquireResponse{
		Granted: true, ID: "l-1", FencingToken: 17, TTL: 30 * time.Second,
		Permits: 8, RulesVersion: 3,
	}, nil
}

func (f *fakeDecider) Renew(_ context.Context, id string, ttl time.Duration) (time.Duration, error) {
	f.mu.Lock()
	f.renews = append(f.renews, renewCall{id, ttl})
	fn := f.renewFn
	f.mu.Unlock()
	if fn != nil {
		return fn(id, ttl)
	}
	if ttl == 0 {
		ttl = 30 * time.Second
	}
	return ttl, nil
}

func (f *fakeDecider) Release(_ context.Context, id string) error {
	f.mu.Lock()
	f.releases = append(f.releases, id)
	fn := f.releaseFn
	f.mu.Unlock()
	if fn != nil {
		return fn(id)
	}
	return nil
}

func (f *fakeDecider) Cluster(_ context.Context, limit, key string) (ClusterInfo, error) {
	f.mu.Lock()
	f.clusters = append(f.clusters, [2]string{limit, key})
	fn := f.clusterFn
	f.mu.Unlock()
	if fn != nil {
		return fn(limit, key)
	}
	info := ClusterInfo{Node: "n1", Epoch: 7, Members: []Member{
		{Name: "n1", Addr: "10.0.0.1:7946", State: "alive", LimitsVersion: 3},
		{Name: "n2", Addr: "10.0.0.2:7946", State: "suspect", LimitsVersion: 3},
	}}
	if limit != "" {
		info.Owner = "n2"
	}
	return info, nil
}

func (f *fakeDecider) Ready() bool { return !f.notReady }

func (f *fakeDecider) Forget(_ context.Context, name string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forgotten = append(f.forgotten, name)
	switch name {
	case "n2":
		return true, nil
	case "n1":
		return false, Errorf(CodeInvalid, "member n1 is alive")
	}
	return false, nil
}

// calls returns how many calls of any kind the Decider received.
func (f *fakeDecider) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.takes) + len(f.acquires) + len(f.renews) + len(f.releases) + len(f.clusters)
}

func (f *fakeDecider) lastTake(t *testing.T) []Check {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.takes) == 0 {
		t.Fatal("Decider.Take was not called")
	}
	return f.takes[len(f.takes)-1]
}
