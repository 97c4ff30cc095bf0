package jepsen

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/weir-rl/weir/internal/weirbuild"
)

// realCluster skips unless WEIR_JEPSEN=1 (and root): the real-cluster tests
// start processes in network namespaces and take tens of seconds. It
// returns a weir binary: $WEIR_BIN or one built into a temp dir.
func realCluster(t *testing.T) string {
	t.Helper()
	if os.Getenv("WEIR_JEPSEN") != "1" {
		t.Skip("set WEIR_JEPSEN=1 (as root) to run real-cluster tests")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for ip netns and iptables")
	}
	if bin := os.Getenv("WEIR_BIN"); bin != "" {
		abs, err := filepath.Abs(bin)
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	bin := filepath.Join(t.TempDir(), "weir")
	if err := weirbuild.Build(bin, "github.com/weir-rl/weir/cmd/weir", ""); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestBrokenBuildIsDetected is the acceptance test of the over-admission
// checker: three nodes started with --cluster=false each decide every key
// from a full bucket (as if forwarding were disabled), and the checker must
// report excess beyond the bound (exactness).
func TestBrokenBuildIsDetected(t *testing.T) {
	bin := realCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nw := &Net{Prefix: "wjt", N: 3, Subnet: "10.77.1."}
	if err := nw.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	defer nw.Cleanup(context.Background())
	sc := DefaultScenario()
	sc.Name, sc.Fault, sc.Before = "3-broken", None, 5*time.Second
	sc.Standalone, sc.ExpectViolation = true, true
	sc.Seed, sc.Nodes, sc.Dir = 1, NetnsNodes(bin, "", nw), t.TempDir()
	res, err := Run(ctx, sc)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Detected || !res.Pass {
		t.Fatalf("broken build not detected: %+v", res.Failures)
	}
	worst := 0.0
	for _, b := range res.Buckets {
		worst = max(worst, b.Whole.Excess-b.Bound)
	}
	if worst < sc.Hot.Bucket().Capacity {
		t.Fatalf("broken build: worst excess over bound %.1f, want at least one capacity", worst)
	}
	t.Logf("worst excess over bound: %.1f tokens", worst)
}
