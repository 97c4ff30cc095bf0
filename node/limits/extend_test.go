package limits

import (
	"testing"

	"github.com/weir-rl/weir/bucket"
)

func TestWithLimits(t *testing.T) {
	f := Default()
	extra := []Limit{{Name: "envoy:d.k", Kind: KindRate, Bucket: bucket.Limit{Algorithm: bucket.FixedWindow, Capacity: 3, Calendar: bucket.Second}}}
	g, err := f.WithLimits(extra)
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := g.Lookup("envoy:d.k"); !ok || l.Bucket.Capacity != 3 {
		t.Fatalf("extra limit: %+v %v", l, ok)
	}
	if _, ok := g.Lookup("export"); !ok || g.Version != f.Version {
		t.Fatal("the file's own limits or version are gone")
	}
	if _, ok := f.Lookup("envoy:d.k"); ok || len(f.Limits) == len(g.Limits) {
		t.Fatal("WithLimits changed the original file")
	}
	if _, err := f.WithLimits([]Limit{{Name: "export"}}); err == nil {
		t.Fatal("a clash with the file's own name was accepted")
	}
}
