package limits

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestParseInlineIsTheFileParser: every inline limit is accepted or
// rejected exactly as the same entry in a limits file, with the same
// messages (less the line) and, when valid, the same Limit.
func TestParseInlineIsTheFileParser(t *testing.T) {
	specs := []Inline{
		{Capacity: 6, Rate: "2/s"},
		{Algorithm: "gcra", Burst: 16, Rate: "30/60s"},
		{Algorithm: "sliding_window", Limit: 100, Window: "1m"},
		{Algorithm: "fixed_window", Limit: 1000, Window: "month"},
		{Capacity: 6},
		{Rate: "2/s"},
		{Algorithm: "gcra", Capacity: 5, Rate: "1/s"},
		{Algorithm: "gcra", Burst: -1, Rate: "1/s"},
		{Capacity: 2_000_000_000_000_000, Rate: "1/s"},
		{Capacity: 6, Rate: "0/s"},
		{Capacity: 6, Rate: "2/0s"},
		{Capacity: 6, Rate: "2/400d"},
		{Capacity: 6, Rate: "two/s"},
		{Algorithm: "sliding_window", Limit: 100, Window: "month"},
		{Algorithm: "fixed_window", Limit: 100, Window: "1m"},
		{Algorithm: "sliding_window", Limit: 100, Window: "60"},
		{Algorithm: "leaky", Limit: 5},
		{Algorithm: "token_bucket", Capacity: 1, Rate: "1000000000000000/1ms"},
	}
	line := regexp.MustCompile(`^test\.yaml: line \d+: `)
	for _, in := range specs {
		t.Run(fmt.Sprintf("%+v", in), func(t *testing.T) {
			var b strings.Builder
			b.WriteString("version: 1\nlimits:\n  - name: x\n")
			if in.Algorithm != "" {
				fmt.Fprintf(&b, "    algorithm: %s\n", in.Algorithm)
			}
			for _, f := range []struct {
				k string
				v int64
			}{{"capacity", in.Capacity}, {"burst", in.Burst}, {"limit", in.Limit}} {
				if f.v != 0 {
					fmt.Fprintf(&b, "    %s: %d\n", f.k, f.v)
				}
			}
			if in.Rate != "" {
				fmt.Fprintf(&b, "    rate: %s\n", strconv.Quote(in.Rate))
			}
			if in.Window != "" {
				fmt.Fprintf(&b, "    window: %s\n", strconv.Quote(in.Window))
			}
			f, ferr := Parse([]byte(b.String()), "test.yaml")
			l, ierr := ParseInline("x", in)
			if (ferr == nil) != (ierr == nil) {
				t.Fatalf("file: %v\ninline: %v", ferr, ierr)
			}
			if ferr != nil {
				var want []string
				for _, m := range strings.Split(ferr.Error(), "\n") {
					want = append(want, line.ReplaceAllString(m, ""))
				}
				if got := ierr.Error(); got != strings.Join(want, "; ") {
					t.Fatalf("inline error %q\nfile errors  %q", got, want)
				}
				if !errors.Is(ierr, ErrInvalid) {
					t.Fatalf("%v does not match ErrInvalid", ierr)
				}
				return
			}
			fl := f.Limits[0]
			fl.Line, l.Inline = 0, false
			if fl != l {
				t.Fatalf("inline %+v\nfile   %+v", l, fl)
			}
		})
	}
	if _, err := ParseInline("x", Inline{Capacity: 1, Rate: strings.Repeat("1", MaxInlineFieldLen+1)}); err == nil {
		t.Fatal("an over-long rate was accepted")
	}
}
