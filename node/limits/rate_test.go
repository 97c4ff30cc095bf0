package limits

import (
	"strings"
	"testing"
	"time"

	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/internal/textdist"
)

func TestParseRate(t *testing.T) {
	good := []struct {
		in   string
		want bucket.Rate
	}{
		{"2/s", bucket.Rate{N: 2, Per: time.Second}},
		{"100/m", bucket.Rate{N: 100, Per: time.Minute}},
		{"10/h", bucket.Rate{N: 10, Per: time.Hour}},
		{"1000/d", bucket.Rate{N: 1000, Per: 24 * time.Hour}},
		{"5/10s", bucket.Rate{N: 5, Per: 10 * time.Second}},
		{"1/1m30s", bucket.Rate{N: 1, Per: 90 * time.Second}},
		{"3/250ms", bucket.Rate{N: 3, Per: 250 * time.Millisecond}},
		{"1/1ms", bucket.Rate{N: 1, Per: time.Millisecond}},
		{"7/7d", bucket.Rate{N: 7, Per: 7 * 24 * time.Hour}},
		{"1/366d", bucket.Rate{N: 1, Per: 366 * 24 * time.Hour}},
		{"007/s", bucket.Rate{N: 7, Per: time.Second}},
		{"  2/s ", bucket.Rate{N: 2, Per: time.Second}},
		{"1000000000000000/s", bucket.Rate{N: bucket.MaxRateN, Per: time.Second}},
	}
	for _, tc := range good {
		got, err := ParseRate(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	bad := []struct{ in, want string }{
		{"", "want N/period"},
		{"2", "want N/period"},
		{"2/", "period \"\""},
		{"/s", "missing count"},
		{"0/s", "count must be > 0"},
		{"00/s", "count must be > 0"},
		{"-1/s", "must be a positive whole number"},
		{"+1/s", "must be a positive whole number"},
		{"1e99/s", "must be a positive whole number"},
		{"1.5/s", "must be a positive whole number"},
		{"0x10/s", "must be a positive whole number"},
		{"99999999999999999999/s", "too large"},
		{"1000000000000001/s", "count must be at most"},
		{"2/x", `period "x"`},
		{"2/sec", `period "sec"`},
		{"2/S", `period "S"`},
		{"2 / s", `count "2 " must be a positive whole number`},
		{"2/ s", `period " s"`},
		{"2/0s", "period must be between 1ms and 366d"},
		{"2/-1s", "period must be between"},
		{"2/500us", "period must be between"},
		{"2/367d", "period must be between"},
		{"2/0d", `period "0d"`},
		{"2/10", `period "10"`},
		{"2/s/s", `period "s/s"`},
		{"2/99999999999999999d", `period "99999999999999999d"`},
		{"2/9999999999h", `period "9999999999h"`},
	}
	for _, tc := range bad {
		got, err := ParseRate(tc.in)
		if err == nil {
			t.Errorf("ParseRate(%q) = %v, want an error", tc.in, got)
			continue
		}
		if !strings.HasPrefix(err.Error(), "limits: rate ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseRate(%q) error = %q, want it to contain %q", tc.in, err, tc.want)
		}
		if got != (bucket.Rate{}) {
			t.Errorf("ParseRate(%q) returned %v with its error", tc.in, got)
		}
	}
}

func TestParseDuration(t *testing.T) {
	good := map[string]time.Duration{
		"30s": 30 * time.Second, "1m30s": 90 * time.Second, "250ms": 250 * time.Millisecond,
		"7d": 7 * 24 * time.Hour, "1d": 24 * time.Hour, "0s": 0, "1h": time.Hour,
	}
	for in, want := range good {
		if got, err := parseDuration(in); err != nil || got != want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "30", "d", "1.5d", "-1d", "1d2h", "abc", "1y"} {
		if got, err := parseDuration(in); err == nil {
			t.Errorf("parseDuration(%q) = %v, want an error", in, got)
		}
	}
}

func TestEditDistanceSuggest(t *testing.T) {
	if d := textdist.Levenshtein("capcity", "capacity"); d != 1 {
		t.Errorf("Levenshtein = %d", d)
	}
	if s := suggest("lease_tll", concFields); s != "lease_ttl" {
		t.Errorf("suggest = %q", s)
	}
	if s := suggest("Permits", concFields); s != "permits" {
		t.Errorf("suggest = %q", s)
	}
	if s := suggest("zzzzzz", concFields); s != "" {
		t.Errorf("suggest = %q", s)
	}
}
