package cluster

import (
	"testing"
	"time"

	"github.com/weir-rl/weir/ring"
)

// TestChangeLogRecordsNothingAlone: while the ring has no other live
// member the change log records no change; a resync with a peer records
// them again, and every resync asks the next flush for every key.
func TestChangeLogRecordsNothingAlone(t *testing.T) {
	r := newChangeLog(DefaultReplicationConfig(), nil)
	now := time.Unix(1_800_000_000, 0)
	r.resync(true)
	r.Bucket("l", "a", now)
	r.Lease("l", "b", now)
	b, l, all := r.take()
	if len(b) != 0 || len(l) != 0 || !all {
		t.Fatalf("alone: %d buckets, %d leases recorded, all %v; want none and all", len(b), len(l), all)
	}
	r.resync(false)
	r.Bucket("l", "a", now)
	r.Lease("l", "b", now)
	b, l, all = r.take()
	if len(b) != 1 || len(l) != 1 || !all {
		t.Fatalf("with a peer: %d buckets, %d leases recorded, all %v; want one each and all", len(b), len(l), all)
	}
}

func TestAlone(t *testing.T) {
	self := ring.Member{Name: "n1", State: ring.Alive}
	other := func(s ring.State) ring.Member { return ring.Member{Name: "n2", State: s} }
	for _, tc := range []struct {
		members []ring.Member
		want    bool
	}{
		{[]ring.Member{self}, true},
		{[]ring.Member{self, other(ring.Dead)}, true},
		{[]ring.Member{self, other(ring.Left)}, true},
		{[]ring.Member{self, other(ring.Suspect)}, true},
		{[]ring.Member{self, other(ring.Alive)}, false},
	} {
		if got := alone(ring.NewView(1, "n1", tc.members)); got != tc.want {
			t.Errorf("%v: alone %v, want %v", tc.members, got, tc.want)
		}
	}
}
