package jepsen

import (
	"slices"
	"testing"
)

// TestUpgradeSwapsBinary: with FromBin every node starts from the older
// binary until Upgrade moves that node (and only it) to Bin; without
// FromBin every start runs Bin.
func TestUpgradeSwapsBinary(t *testing.T) {
	nw := &Net{Prefix: "wt", N: 3}
	c := NewCluster(ClusterConfig{Bin: "/new/weir", FromBin: "/old/weir", Net: nw, Limits: "l.yaml"})
	bins := func() []string {
		var out []string
		for i := 1; i <= 3; i++ {
			out = append(out, c.args(i)[3])
		}
		return out
	}
	if got := bins(); !slices.Equal(got, []string{"/old/weir", "/old/weir", "/old/weir"}) {
		t.Fatalf("before the upgrade: %v", got)
	}
	if err := c.Upgrade(2); err != nil {
		t.Fatal(err)
	}
	if got := bins(); !slices.Equal(got, []string{"/old/weir", "/new/weir", "/old/weir"}) {
		t.Fatalf("after upgrading n2: %v", got)
	}
	plain := NewCluster(ClusterConfig{Bin: "/new/weir", Net: nw, Limits: "l.yaml"})
	if got := plain.args(1)[3]; got != "/new/weir" {
		t.Fatalf("without FromBin: %s", got)
	}
	if b := FaultBound(Upgrade, OwnedByTarget, 3); b != FaultBound(Leave, OwnedByTarget, 3) {
		t.Errorf("upgrade bound %+v, want graceful leave's", b)
	}
}
