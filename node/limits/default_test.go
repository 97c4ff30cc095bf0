package limits

import (
	"bytes"
	"testing"
	"time"

	"github.com/weir-rl/weir/bucket"
)

func TestDefault(t *testing.T) {
	f := Default()
	if f.Source != DefaultSource || f.Version != 3 || f.InlineLimits {
		t.Fatalf("Default = source %q version %d inline %v", f.Source, f.Version, f.InlineLimits)
	}
	want := map[string]Limit{
		"export": {Name: "export", Bucket: bucket.Limit{Algorithm: bucket.TokenBucket, Capacity: 6, Rate: bucket.Rate{N: 2, Per: time.Second}}},
		"login": {
			Name: "login", Bucket: bucket.Limit{Algorithm: bucket.GCRA, Capacity: 5, Rate: bucket.Rate{N: 10, Per: time.Minute}},
			OnOwnerUnreachable: PolicyClosed,
		},
		"search":  {Name: "search", Bucket: bucket.Limit{Algorithm: bucket.SlidingWindow, Capacity: 100, Window: time.Minute}},
		"monthly": {Name: "monthly", Bucket: bucket.Limit{Algorithm: bucket.FixedWindow, Capacity: 1_000_000, Calendar: bucket.Month}},
		"export-db": {
			Name: "export-db", Kind: KindConcurrency, Permits: 8, LeaseTTL: 30 * time.Second, MaxLeaseTTL: 5 * time.Minute,
			Queue: Queue{Length: 16, MaxWait: 5 * time.Second},
		},
	}
	if len(f.Limits) != len(want) {
		t.Fatalf("Default has %d limits, want %d", len(f.Limits), len(want))
	}
	for name, w := range want {
		got, ok := f.Lookup(name)
		if !ok {
			t.Errorf("Default lacks %q", name)
			continue
		}
		if got.Line == 0 {
			t.Errorf("%q has no line", name)
		}
		g := *got
		g.Line = 0
		if g != w {
			t.Errorf("%q:\ngot  %+v\nwant %+v", name, g, w)
		}
	}
	if Default() == f {
		t.Error("Default returned the same *File twice")
	}
}

func TestDefaultYAMLIsACopy(t *testing.T) {
	a := DefaultYAML()
	if !bytes.Contains(a, []byte("name: export-db")) {
		t.Fatal("DefaultYAML lacks export-db")
	}
	a[0] = '!'
	if DefaultYAML()[0] == '!' {
		t.Fatal("DefaultYAML returned the embedded slice")
	}
	if _, err := Parse(DefaultYAML(), "x"); err != nil {
		t.Fatal(err)
	}
}
