package limits

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParse checks that Parse never panics, and that its result is
// consistent: an error is a non-empty *FileError of line-numbered problems,
// and a File has a working index over uniquely named, valid limits.
func FuzzParse(f *testing.F) {
	f.Add(DefaultYAML())
	f.Add([]byte("version: 1\nlimits:\n  - {name: x, capacity: 6, rate: 2/s}\n"))
	f.Add([]byte("version: 1\nlimits:\n  - {name: db, kind: concurrency, permits: 8, lease_ttl: 30s, queue: {length: 16, max_wait: 5s}}\n"))
	f.Add([]byte("version: 1\nlimits:\n  - {name: x, capacity: &a 6, rate: 2/s}\n  - {name: y, capacity: *a, rate: 1/5s}\n"))
	f.Add([]byte("version: 1\ninline_limits: true\n---\nversion: 2\n"))
	f.Add([]byte("a: &a [*a, *a]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data, "fuzz.yaml")
		if err != nil {
			if file != nil {
				t.Fatal("a File with an error")
			}
			var fe *FileError
			if !errors.As(err, &fe) || len(fe.Errors) == 0 {
				t.Fatalf("error %T %v is not a non-empty *FileError", err, err)
			}
			for _, e := range fe.Errors {
				if e.Msg == "" || e.Line < 0 {
					t.Fatalf("bad problem %+v", e)
				}
			}
			if !strings.HasPrefix(err.Error(), "fuzz.yaml: ") {
				t.Fatalf("message lacks the source: %q", err)
			}
			return
		}
		if len(file.index) != len(file.Limits) {
			t.Fatalf("index has %d names for %d limits", len(file.index), len(file.Limits))
		}
		for i := range file.Limits {
			l := &file.Limits[i]
			if got, ok := file.Lookup(l.Name); !ok || got != l {
				t.Fatalf("Lookup(%q) = %p, %v", l.Name, got, ok)
			}
			switch l.Kind {
			case KindRate:
				if err := l.Bucket.Validate(); err != nil {
					t.Fatalf("limit %q: %v", l.Name, err)
				}
			case KindConcurrency:
				if l.Permits < 1 || l.LeaseTTL < MinLeaseTTL || l.MaxLeaseTTL < l.LeaseTTL || l.MaxLeaseTTL > MaxLeaseTTLLimit ||
					(l.Queue.Length > 0) != (l.Queue.MaxWait > 0) {
					t.Fatalf("limit %q invalid: %+v", l.Name, l)
				}
			default:
				t.Fatalf("limit %q has kind %v", l.Name, l.Kind)
			}
		}
	})
}
