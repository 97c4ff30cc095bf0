package envoyconf

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse: Parse never panics; it returns a file or Errors, each with
// the file's name, and what it accepts builds and matches without panicking.
func FuzzParse(f *testing.F) {
	paths, _ := filepath.Glob("testdata/readme/*.yaml")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("domain: d\ndescriptors:\n  - key: a\n    value: '*b*'\n    share_threshold: true\n    rate_limit: {unit: second, requests_per_unit: 1}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("f.yaml", data)
		if err != nil {
			es, ok := errors.AsType[Errors](err)
			if !ok || len(es) == 0 || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not a non-empty Errors", err)
			}
			for _, e := range es {
				if e.File != "f.yaml" || e.Msg == "" || e.Line < 0 {
					t.Fatalf("bad problem %+v", e)
				}
			}
			return
		}
		c, err := Build(file)
		if err != nil {
			return
		}
		for _, r := range c.Rules() {
			c.Match(r.Domain, []Entry{{Key: "a", Value: "xbx"}, {Key: "b", Value: ""}})
		}
	})
}
