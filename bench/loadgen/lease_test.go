package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/weir-rl/weir/api/weirv1"
	"github.com/weir-rl/weir/node"
)

// startOnePermitNode runs a node whose only limit, "one", is a concurrency
// limit of one permit.
func startOnePermitNode(t *testing.T) *node.Node {
	t.Helper()
	path := filepath.Join(t.TempDir(), "limits.yaml")
	const file = "version: 1\nlimits:\n  - name: one\n    kind: concurrency\n    permits: 1\n    lease_ttl: 30s\n"
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	return runNodeOn(t, path, nil)
}

func runLease(t *testing.T, tgt *leaseTarget, conc int, requests int64) cellResult {
	t.Helper()
	res, err := runCell(context.Background(), tgt, cellConfig{Concurrency: conc, Requests: requests, Keys: 1, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestLeaseTargetBenchLimit: on bench/limits.yaml's bench-lease nothing is
// refused, at any concurrency.
func TestLeaseTargetBenchLimit(t *testing.T) {
	n := startNode(t)
	tgt, err := newLeaseTarget([]string{n.GRPCAddr()}, 1, "bench-lease", 3, false)
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.close()
	if res := runLease(t, tgt, 4, 300); res.Allowed != 300 || res.Denied != 0 || res.Errors != 0 {
		t.Fatalf("allowed/denied/errors = %d/%d/%d (%s), want 300/0/0", res.Allowed, res.Denied, res.Errors, res.FirstError)
	}
}

// TestLeaseTargetReleases: with one permit, one caller is granted every
// round trip only if each lease is released before the next acquire.
func TestLeaseTargetReleases(t *testing.T) {
	n := startOnePermitNode(t)
	tgt, err := newLeaseTarget([]string{n.GRPCAddr()}, 1, "one", 1, false)
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.close()
	if res := runLease(t, tgt, 1, 50); res.Allowed != 50 || res.Denied != 0 || res.Errors != 0 {
		t.Fatalf("allowed/denied/errors = %d/%d/%d (%s), want 50/0/0", res.Allowed, res.Denied, res.Errors, res.FirstError)
	}
}

// TestLeaseTargetRefusalAndRotate holds the one permit of node a from
// outside: a caller on a alone is refused every time (denials, not
// errors); a rotating caller over a and b is granted on b only, every
// second round trip.
func TestLeaseTargetRefusalAndRotate(t *testing.T) {
	a, b := startOnePermitNode(t), startOnePermitNode(t)
	cc, err := grpc.NewClient(a.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	held, err := weirv1.NewLimiterClient(cc).Acquire(context.Background(), &weirv1.AcquireRequest{Limit: "one", Key: benchKey(0)})
	if err != nil || !held.GetGranted() {
		t.Fatalf("holding the permit: %v, %v", held, err)
	}

	only, err := newLeaseTarget([]string{a.GRPCAddr()}, 1, "one", 1, false)
	if err != nil {
		t.Fatal(err)
	}
	defer only.close()
	if res := runLease(t, only, 2, 20); res.Allowed != 0 || res.Denied != 20 || res.Errors != 0 {
		t.Fatalf("node a only: allowed/denied/errors = %d/%d/%d (%s), want 0/20/0", res.Allowed, res.Denied, res.Errors, res.FirstError)
	}

	both, err := newLeaseTarget([]string{a.GRPCAddr(), b.GRPCAddr()}, 1, "one", 1, true)
	if err != nil {
		t.Fatal(err)
	}
	defer both.close()
	if res := runLease(t, both, 1, 20); res.Allowed != 10 || res.Denied != 10 || res.Errors != 0 {
		t.Fatalf("rotating over a and b: allowed/denied/errors = %d/%d/%d (%s), want 10/10/0", res.Allowed, res.Denied, res.Errors, res.FirstError)
	}
}

// TestLeaseTargetUnknownLimit: a refused request is an error, not a denial.
func TestLeaseTargetUnknownLimit(t *testing.T) {
	n := startNode(t)
	tgt, err := newLeaseTarget([]string{n.GRPCAddr()}, 1, "nope", 1, false)
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.close()
	if res := runLease(t, tgt, 1, 3); res.Errors != 3 || res.Decisions != 0 || res.FirstError == "" {
		t.Fatalf("unknown limit: decisions %d errors %d (%q), want 0 and 3", res.Decisions, res.Errors, res.FirstError)
	}
}
