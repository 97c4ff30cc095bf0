package bucket

import (
	"testing"
	"time"
)

func TestStoreExtractAt(t *testing.T) {
	s := NewStore(LocalConfig())
	l := Limit{Algorithm: TokenBucket, Capacity: 6, Rate: Rate{N: 2, Per: time.Second}}
	t0 := time.Unix(1000, 0)
	if s.Has("export", "a") {
		t.Fatal("empty store has a bucket")
	}
	if _, ok := s.ExtractAt(t0, "export", "a"); ok {
		t.Fatal("extracted a bucket from an empty store")
	}
	if _, _, err := s.TakeAt(t0, []Check{{Name: "export", Limit: l, Key: "a", Cost: 4}}, nil); err != nil {
		t.Fatal(err)
	}
	if !s.Has("export", "a") || s.Len() != 1 {
		t.Fatal("take did not create the bucket")
	}
	e, ok := s.ExtractAt(t0.Add(500*time.Millisecond), "export", "a")
	if !ok || e.Name != "export" || e.Key != "a" {
		t.Fatalf("ExtractAt = %+v, %v", e, ok)
	}
	// Two tokens as of the last take, which was 500ms (one token) ago.
	if e.Snapshot.Count != 2 || e.Snapshot.Since != 500*time.Millisecond {
		t.Fatalf("snapshot = %+v, want 2 tokens 500ms ago", e.Snapshot)
	}
	if s.Has("export", "a") || s.Len() != 0 {
		t.Fatal("ExtractAt left the bucket in the store")
	}
	// The snapshot lands on another store with a different clock and keeps
	// its debt: three tokens, not a fresh six.
	other := NewStore(LocalConfig())
	t1 := time.Unix(5_000_000, 0)
	other.MergeAt(t1, []Entry{e}, func(string, Limit) (Limit, bool, bool) { return l, false, true })
	ds, _, err := other.TakeAt(t1, []Check{{Name: "export", Limit: l, Key: "a", Cost: 1}}, nil)
	if err != nil || ds[0].Remaining != 2 {
		t.Fatalf("after handoff: %+v %v, want 2 remaining", ds, err)
	}
}

func TestStoreSnapshotAtLeavesTheBucket(t *testing.T) {
	s := NewStore(LocalConfig())
	l := Limit{Algorithm: TokenBucket, Capacity: 6, Rate: Rate{N: 2, Per: time.Second}}
	t0 := time.Unix(1000, 0)
	if _, ok := s.SnapshotAt(t0, "export", "a"); ok {
		t.Fatal("snapshot of a bucket the store does not hold")
	}
	if _, _, err := s.TakeAt(t0, []Check{{Name: "export", Limit: l, Key: "a", Cost: 4}}, nil); err != nil {
		t.Fatal(err)
	}
	e, ok := s.SnapshotAt(t0.Add(500*time.Millisecond), "export", "a")
	if !ok || e.Snapshot.Count != 2 || e.Snapshot.Since != 500*time.Millisecond {
		t.Fatalf("SnapshotAt = %+v, %v; want 2 tokens 500ms ago", e, ok)
	}
	if !s.Has("export", "a") || s.Len() != 1 {
		t.Fatal("SnapshotAt removed the bucket")
	}
}
