package limits

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weir-rl/weir/bucket"
)

// mustParse parses src or fails the test.
func mustParse(t *testing.T, src string) *File {
	t.Helper()
	f, err := Parse([]byte(src), "test.yaml")
	if err != nil {
		t.Fatalf("Parse: %v\n--- input:\n%s", err, src)
	}
	return f
}

func TestParseGood(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want Limit // compared with Line cleared
	}{
		{"token bucket", `
version: 1
limits:
  - name: export
    capacity: 6
    rate: 2/s
`, Limit{Name: "export", Bucket: bucket.Limit{Algorithm: bucket.TokenBucket, Capacity: 6, Rate: bucket.Rate{N: 2, Per: time.Second}}}},
		{"token bucket explicit, shadow, open", `
version: 1
limits:
  - name: a.b_c-D9
    kind: rate
    algorithm: token_bucket
    capacity: 1_000
    rate: 5/10s
    shadow: true
    on_owner_unreachable: open
`, Limit{Name: "a.b_c-D9", Bucket: bucket.Limit{Capacity: 1000, Rate: bucket.Rate{N: 5, Per: 10 * time.Second}}, Shadow: true, OnOwnerUnreachable: PolicyOpen}},
		{"token bucket with allotments, defaults", `
version: 1
limits:
  - name: hot
    capacity: 200
    rate: 100/s
    allotments: auto
`, Limit{
			Name: "hot", Bucket: bucket.Limit{Capacity: 200, Rate: bucket.Rate{N: 100, Per: time.Second}},
			Allotments: Allotments{Auto: true, Threshold: 50, Horizon: 50 * time.Millisecond, TTL: 2 * time.Second},
		}},
		{"token bucket with allotments, tuned", `
version: 1
limits:
  - name: hot
    capacity: 200
    rate: 100/s
    allotments: auto
    allotment_threshold: 30/10s
    allotment_horizon: 20ms
    allotment_ttl: 500ms
`, Limit{
			Name: "hot", Bucket: bucket.Limit{Capacity: 200, Rate: bucket.Rate{N: 100, Per: time.Second}},
			Allotments: Allotments{Auto: true, Threshold: 3, Horizon: 20 * time.Millisecond, TTL: 500 * time.Millisecond},
		}},
		{"allotments off", `
version: 1
limits:
  - name: cold
    capacity: 2
    rate: 1/s
    allotments: off
`, Limit{Name: "cold", Bucket: bucket.Limit{Capacity: 2, Rate: bucket.Rate{N: 1, Per: time.Second}}}},
		{"gcra", `
version: 1
limits:
  - name: login
    algorithm: gcra
    rate: 10/m
    burst: 5
    on_owner_unreachable: closed
`, Limit{Name: "login", Bucket: bucket.Limit{Algorithm: bucket.GCRA, Capacity: 5, Rate: bucket.Rate{N: 10, Per: time.Minute}}, OnOwnerUnreachable: PolicyClosed}},
		{"sliding window in days", `
version: 1
limits:
  - {name: search, algorithm: sliding_window, limit: 100, window: 7d}
`, Limit{Name: "search", Bucket: bucket.Limit{Algorithm: bucket.SlidingWindow, Capacity: 100, Window: 7 * 24 * time.Hour}}},
		{"fixed window", `
version: 1
limits:
  - name: daily
    algorithm: fixed_window
    limit: 10
    window: day
`, Limit{Name: "daily", Bucket: bucket.Limit{Algorithm: bucket.FixedWindow, Capacity: 10, Calendar: bucket.Day}}},
		{"concurrency, default max_lease_ttl, no queue", `
version: 1
limits:
  - name: db
    kind: concurrency
    permits: 8
    lease_ttl: 30s
`, Limit{Name: "db", Kind: KindConcurrency, Permits: 8, LeaseTTL: 30 * time.Second, MaxLeaseTTL: 300 * time.Second}},
		{"concurrency, default max_lease_ttl capped", `
version: 1
limits:
  - name: db
    kind: concurrency
    permits: 1
    lease_ttl: 2d
`, Limit{Name: "db", Kind: KindConcurrency, Permits: 1, LeaseTTL: 48 * time.Hour, MaxLeaseTTL: MaxLeaseTTLLimit}},
		{"concurrency, everything", `
version: 1
limits:
  - name: db
    kind: concurrency
    permits: 8
    lease_ttl: 30s
    max_lease_ttl: 1h
    queue: { length: 16, max_wait: 5s }
    strict: true
    on_owner_unreachable: closed
    shadow: true
`, Limit{
			Name: "db", Kind: KindConcurrency, Permits: 8, LeaseTTL: 30 * time.Second, MaxLeaseTTL: time.Hour,
			Queue: Queue{Length: 16, MaxWait: 5 * time.Second}, Strict: true, OnOwnerUnreachable: PolicyClosed, Shadow: true,
		}},
		{"concurrency, empty and null queue", `
version: 1
limits:
  - {name: db, kind: concurrency, permits: 2, lease_ttl: 1s, queue: {length: 0}}
`, Limit{Name: "db", Kind: KindConcurrency, Permits: 2, LeaseTTL: time.Second, MaxLeaseTTL: 10 * time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := mustParse(t, tc.src)
			if f.Version != 1 || len(f.Limits) != 1 || f.Source != "test.yaml" {
				t.Fatalf("got version %d, %d limits, source %q", f.Version, len(f.Limits), f.Source)
			}
			got, ok := f.Lookup(tc.want.Name)
			if !ok || got != &f.Limits[0] {
				t.Fatalf("Lookup(%q) = %p, %v; want &Limits[0]", tc.want.Name, got, ok)
			}
			if got.Line != 4 && got.Line != 5 {
				t.Errorf("Line = %d, want the line of the list item", got.Line)
			}
			g := *got
			g.Line = 0
			if !reflect.DeepEqual(g, tc.want) {
				t.Errorf("got  %+v\nwant %+v", g, tc.want)
			}
		})
	}
}

func TestParseAliases(t *testing.T) {
	f := mustParse(t, `
version: 2
limits:
  - name: a
    capacity: &cap 6
    rate: &r 2/s
  - name: b
    capacity: *cap
    rate: *r
`)
	b, ok := f.Lookup("b")
	if !ok || b.Bucket.Capacity != 6 || b.Bucket.Rate != (bucket.Rate{N: 2, Per: time.Second}) {
		t.Fatalf("Lookup(b) = %+v, %v", b, ok)
	}
}

func TestParseTopLevel(t *testing.T) {
	f := mustParse(t, "version: 0\ninline_limits: true\n")
	if f.Version != 0 || !f.InlineLimits || len(f.Limits) != 0 {
		t.Fatalf("got %+v", f)
	}
	if _, ok := f.Lookup("x"); ok {
		t.Fatal("Lookup in an empty file found something")
	}
	f = mustParse(t, "version: 9\nlimits: []\ninline_limits: true\n")
	if f.Version != 9 {
		t.Fatalf("version %d", f.Version)
	}
	var nilFile *File
	if _, ok := nilFile.Lookup("x"); ok {
		t.Fatal("nil File Lookup found something")
	}
}

func TestParseOrderAndLookup(t *testing.T) {
	f := mustParse(t, `version: 1
limits:
  - {name: c, capacity: 1, rate: 1/s}
  - {name: a, capacity: 2, rate: 1/s}
  - {name: B, capacity: 3, rate: 1/s}
`)
	if got := f.Names(); !reflect.DeepEqual(got, []string{"c", "a", "B"}) {
		t.Fatalf("Names = %v", got)
	}
	for i, n := range []string{"c", "a", "B"} {
		l, ok := f.Lookup(n)
		if !ok || l.Bucket.Capacity != int64(i+1) || l.Line != 3+i {
			t.Errorf("Lookup(%q) = %+v, %v", n, l, ok)
		}
	}
	if _, ok := f.Lookup("b"); ok {
		t.Error("names are case-sensitive; Lookup(b) found B")
	}
}

// TestParseBad checks that each bad input is rejected with the expected
// problems, each at its line. want lists "line N: substring" per problem, in
// order; the count must match exactly, so every problem is reported once.
func TestParseBad(t *testing.T) {
	tb := func(extra string) string {
		return "version: 1\nlimits:\n  - name: x\n    capacity: 6\n    rate: 2/s\n" + extra
	}
	conc := func(extra string) string {
		return "version: 1\nlimits:\n  - name: db\n    kind: concurrency\n    permits: 8\n    lease_ttl: 30s\n" + extra
	}
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{"empty", "", []string{"file is empty"}},
		{"allotments neither off nor auto", tb("    allotments: on\n"), []string{`line 6: limit "x": "allotments" must be off or auto, got "on"`}},
		{"allotment field without auto", tb("    allotment_ttl: 1s\n"), []string{`line 6: limit "x": "allotment_ttl" needs allotments: auto`}},
		{
			"allotments of a gcra limit", "version: 1\nlimits:\n  - name: g\n    algorithm: gcra\n    rate: 1/s\n    burst: 2\n    allotments: auto\n",
			[]string{`line 7: limit "g": field "allotments" does not apply to algorithm gcra`},
		},
		{"allotments of a shadow limit", tb("    shadow: true\n    allotments: auto\n"), []string{`line 7: limit "x": allotments do not apply to a shadow limit`}},
		{"allotment horizon out of range", tb("    allotments: auto\n    allotment_horizon: 20s\n"), []string{`line 7: limit "x": "allotment_horizon" must be in [1ms, 10s], got 20s`}},
		{
			"allotment ttl under twice the horizon", tb("    allotments: auto\n    allotment_horizon: 1s\n    allotment_ttl: 1500ms\n"),
			[]string{`line 6: limit "x": allotment_ttl (1.5s) must be at least twice allotment_horizon (1s)`},
		},
		{"allotment threshold not a rate", tb("    allotments: auto\n    allotment_threshold: 5\n"), []string{`line 7: limit "x": "allotment_threshold" must be a string`}},
		{"only a comment", "# nothing\n", []string{"file is empty"}},
		{"null document", "~\n", []string{"line 1: file is empty"}},
		{"not a mapping", "- a\n- b\n", []string{"line 1: the file must be a mapping"}},
		{"syntax error", "version: 1\nlimits: [\n", []string{"YAML syntax"}},
		{"tab indentation", "version: 1\nlimits:\n\t- name: x\n", []string{"line 3: YAML syntax"}},
		{"two documents", tb("---\nversion: 2\n"), []string{"line 6: a second YAML document"}},
		{"duplicate top-level key (yaml)", "version: 1\nversion: 2\ninline_limits: true\n", []string{`line 2: field "version" appears twice (first on line 1)`}},
		{"unknown top-level field", tb("inline_limit: true\n"), []string{`line 6: unknown field "inline_limit" (did you mean "inline_limits"?)`}},
		{"merge key", "version: 1\ninline_limits: true\n<<: {a: 1}\n", []string{`line 3: unknown field "<<" (YAML merge keys are not supported)`}},
		{"missing version", "inline_limits: true\n", []string{`line 1: missing "version"`}},
		{"negative version", "version: -1\ninline_limits: true\n", []string{`line 1: "version" must be >= 0, got -1`}},
		{"string version", "version: \"3\"\ninline_limits: true\n", []string{`line 1: "version" must be a whole number, got "3"`}},
		{"float version", "version: 1.5\ninline_limits: true\n", []string{`line 1: "version" must be a whole number, got the number 1.5`}},
		{"huge version", "version: 99999999999999999999\ninline_limits: true\n", []string{`line 1: "version" must be a whole number`}},
		{"inline_limits not bool", "version: 1\ninline_limits: yes\n", []string{`line 2: "inline_limits" must be true or false, got "yes"`}},
		{"no limits", "version: 1\nlimits: []\n", []string{"line 2: no limits defined and inline_limits is false"}},
		{"limits not a list", "version: 1\nlimits: {name: x}\n", []string{`line 2: "limits" must be a list of limits, got a mapping`}},
		{"limit not a mapping", "version: 1\nlimits:\n  - export\n", []string{`line 3: limits[0]: each limit must be a mapping`}},
		{"missing name", "version: 1\nlimits:\n  - capacity: 6\n    rate: 2/s\n", []string{`line 3: limits[0]: missing "name"`}},
		{"empty name", "version: 1\nlimits:\n  - name: ''\n    capacity: 6\n    rate: 2/s\n", []string{`line 3: limits[0]: "name" is empty`}},
		{"null name", "version: 1\nlimits:\n  - name:\n    capacity: 6\n    rate: 2/s\n", []string{`line 3: limits[0]: "name" must be a word like export-db, got nothing`}},
		{"bad name chars", "version: 1\nlimits:\n  - name: a/b\n    capacity: 6\n    rate: 2/s\n", []string{`line 3: limits[0]: "name" "a/b" may contain only`}},
		{"long name", "version: 1\nlimits:\n  - name: " + strings.Repeat("n", 65) + "\n    capacity: 6\n    rate: 2/s\n", []string{`line 3: limits[0]: "name" is longer than 64`}},
		{"duplicate names", tb("  - name: x\n    capacity: 1\n    rate: 1/s\n"), []string{`line 6: duplicate limit name "x" (first defined on line 3)`}},
		{"unknown field names its line", tb("    capcity: 7\n"), []string{`line 6: limit "x": unknown field "capcity" (did you mean "capacity"?)`}},
		{"unknown field, no suggestion", tb("    colour: blue\n"), []string{`line 6: limit "x": unknown field "colour"`}},
		{"repeated field", tb("    capacity: 7\n"), []string{`line 6: limit "x": field "capacity" appears twice (first on line 4)`}},
		{"non-scalar key", tb("    ? [a]\n    : 1\n"), []string{`line 6: limit "x": field names must be plain words, got a list`}},
		{"window on token_bucket", tb("    window: 1m\n"), []string{`line 6: limit "x": field "window" does not apply to algorithm token_bucket (it takes "capacity", "rate")`}},
		{"burst on token_bucket", tb("    burst: 3\n"), []string{`line 6: limit "x": field "burst" does not apply to algorithm token_bucket`}},
		{"permits on rate", tb("    permits: 3\n"), []string{`line 6: limit "x": field "permits" applies only to kind concurrency`}},
		{"strict on rate", tb("    strict: true\n"), []string{`line 6: limit "x": field "strict" applies only to kind concurrency`}},
		{"capacity zero", "version: 1\nlimits:\n  - name: x\n    capacity: 0\n    rate: 2/s\n", []string{`line 4: limit "x": "capacity" must be >= 1, got 0`}},
		{"capacity negative", "version: 1\nlimits:\n  - name: x\n    capacity: -3\n    rate: 2/s\n", []string{`line 4: limit "x": "capacity" must be >= 1, got -3`}},
		{"capacity quoted", "version: 1\nlimits:\n  - name: x\n    capacity: \"6\"\n    rate: 2/s\n", []string{`line 4: limit "x": "capacity" must be a whole number, got "6"`}},
		{"capacity float", "version: 1\nlimits:\n  - name: x\n    capacity: 6.0\n    rate: 2/s\n", []string{`line 4: limit "x": "capacity" must be a whole number, got the number 6.0`}},
		{"capacity too large for bucket", "version: 1\nlimits:\n  - name: x\n    capacity: 9000000000000000000\n    rate: 2/s\n", []string{`line 4: limit "x": "capacity" must be at most 1000000000000000, got 9000000000000000000`}},
		{"refill too long", "version: 1\nlimits:\n  - name: x\n    capacity: 1000000000\n    rate: 1/366d\n", []string{`line 3: limit "x": capacity 1000000000 at rate`}},
		{"missing capacity", "version: 1\nlimits:\n  - name: x\n    rate: 2/s\n", []string{`line 3: limit "x": token_bucket needs "capacity"`}},
		{"missing rate", "version: 1\nlimits:\n  - name: x\n    capacity: 2\n", []string{`line 3: limit "x": token_bucket needs "rate"`}},
		{"bad rate", "version: 1\nlimits:\n  - name: x\n    capacity: 2\n    rate: 2/x\n", []string{`line 5: limit "x": rate "2/x": period "x"`}},
		{"rate as number", "version: 1\nlimits:\n  - name: x\n    capacity: 2\n    rate: 2\n", []string{`line 5: limit "x": "rate" must be a string, got the number 2`}},
		{"gcra missing burst", "version: 1\nlimits:\n  - name: x\n    algorithm: gcra\n    rate: 1/s\n", []string{`line 3: limit "x": gcra needs "burst"`}},
		{"gcra capacity", "version: 1\nlimits:\n  - name: x\n    algorithm: gcra\n    rate: 1/s\n    burst: 2\n    capacity: 2\n", []string{`line 7: limit "x": field "capacity" does not apply to algorithm gcra (it takes "rate", "burst")`}},
		{"gcra burst zero", "version: 1\nlimits:\n  - name: x\n    algorithm: gcra\n    rate: 1/s\n    burst: 0\n", []string{`line 6: limit "x": "burst" must be >= 1, got 0`}},
		{"unknown algorithm", "version: 1\nlimits:\n  - name: x\n    algorithm: leaky_bucket\n    capacity: 1\n", []string{`line 4: limit "x": unknown algorithm "leaky_bucket"`}},
		{"algorithm wrong case", "version: 1\nlimits:\n  - name: x\n    algorithm: GCRA\n", []string{`line 4: limit "x": unknown algorithm "GCRA"`}},
		{"unknown kind", "version: 1\nlimits:\n  - name: x\n    kind: quota\n", []string{`line 4: limit "x": unknown kind "quota" (want rate or concurrency)`}},
		{"unknown kind still reports unknown fields", "version: 1\nlimits:\n  - name: x\n    kind: quota\n    bogus: 1\n", []string{`line 4: limit "x": unknown kind`, `line 5: limit "x": unknown field "bogus"`}},
		{"sliding window missing window", "version: 1\nlimits:\n  - {name: x, algorithm: sliding_window, limit: 3}\n", []string{`line 3: limit "x": sliding_window needs "window"`}},
		{"sliding window calendar word", "version: 1\nlimits:\n  - {name: x, algorithm: sliding_window, limit: 3, window: month}\n", []string{`line 3: limit "x": "window": bad duration "month"`}},
		{"sliding window no unit", "version: 1\nlimits:\n  - {name: x, algorithm: sliding_window, limit: 3, window: 60}\n", []string{`line 3: limit "x": "window" needs a unit, like 60s`}},
		{"sliding window too short", "version: 1\nlimits:\n  - {name: x, algorithm: sliding_window, limit: 3, window: 10us}\n", []string{`line 3: limit "x": "window" must be between 1ms and 366d, got 10µs`}},
		{"sliding window too long", "version: 1\nlimits:\n  - {name: x, algorithm: sliding_window, limit: 3, window: 400d}\n", []string{`"window" must be between 1ms and 366d, got 400d`}},
		{"sliding window negative", "version: 1\nlimits:\n  - {name: x, algorithm: sliding_window, limit: 3, window: -1m}\n", []string{`"window" must be between`}},
		{"sliding window rate", "version: 1\nlimits:\n  - {name: x, algorithm: sliding_window, limit: 3, window: 1m, rate: 1/s}\n", []string{`field "rate" does not apply to algorithm sliding_window (it takes "limit", "window")`}},
		{"fixed window duration", "version: 1\nlimits:\n  - {name: x, algorithm: fixed_window, limit: 3, window: 1h}\n", []string{`line 3: limit "x": fixed_window "window" is a calendar unit: minute, hour, day or month (UTC), got "1h"; for a rolling window use sliding_window`}},
		{"fixed window limit zero", "version: 1\nlimits:\n  - {name: x, algorithm: fixed_window, limit: 0, window: hour}\n", []string{`"limit" must be >= 1, got 0`}},
		{"bad policy", tb("    on_owner_unreachable: fail\n"), []string{`line 6: limit "x": unknown on_owner_unreachable "fail" (want local, open or closed)`}},
		{"bad shadow", tb("    shadow: 1\n"), []string{`line 6: limit "x": "shadow" must be true or false, got the number 1`}},
		{"algorithm on concurrency", conc("    algorithm: gcra\n"), []string{`line 7: limit "db": "algorithm" does not apply to kind concurrency`}},
		{"capacity on concurrency", conc("    capacity: 3\n"), []string{`line 7: limit "db": field "capacity" does not apply to kind concurrency (it takes "permits", "lease_ttl", "max_lease_ttl", "queue", "strict")`}},
		{"missing permits and ttl", "version: 1\nlimits:\n  - name: db\n    kind: concurrency\n", []string{`line 3: limit "db": concurrency limit needs "permits"`, `line 3: limit "db": concurrency limit needs "lease_ttl"`}},
		{"permits zero", "version: 1\nlimits:\n  - {name: db, kind: concurrency, permits: 0, lease_ttl: 1s}\n", []string{`"permits" must be between 1 and 1000000000, got 0`}},
		{"permits too many", "version: 1\nlimits:\n  - {name: db, kind: concurrency, permits: 1000000001, lease_ttl: 1s}\n", []string{`"permits" must be between 1 and`}},
		{"lease_ttl zero", "version: 1\nlimits:\n  - {name: db, kind: concurrency, permits: 1, lease_ttl: 0s}\n", []string{`"lease_ttl" must be between 1ms and 7d, got 0s`}},
		{"lease_ttl too long", "version: 1\nlimits:\n  - {name: db, kind: concurrency, permits: 1, lease_ttl: 8d}\n", []string{`"lease_ttl" must be between 1ms and 7d, got 8d`}},
		{"lease_ttl absurd", "version: 1\nlimits:\n  - {name: db, kind: concurrency, permits: 1, lease_ttl: 99999999999d}\n", []string{`"lease_ttl": bad duration "99999999999d"`}},
		{"lease_ttl overflow", "version: 1\nlimits:\n  - {name: db, kind: concurrency, permits: 1, lease_ttl: 9999999999h}\n", []string{`"lease_ttl": bad duration "9999999999h"`}},
		{"max_lease_ttl below lease_ttl", conc("    max_lease_ttl: 10s\n"), []string{`line 7: limit "db": "max_lease_ttl" (10s) must be >= "lease_ttl" (30s)`}},
		{"max_lease_ttl too long", conc("    max_lease_ttl: 30d\n"), []string{`line 7: limit "db": "max_lease_ttl" must be at most 7d, got 30d`}},
		{"queue not a mapping", conc("    queue: 16\n"), []string{`line 7: limit "db": "queue" must be a mapping like { length: 16, max_wait: 5s }, got the number 16`}},
		{"queue unknown field", conc("    queue: {length: 1, max_wait: 1s, size: 3}\n"), []string{`line 7: limit "db": queue: unknown field "size"`}},
		{"queue missing length", conc("    queue: {max_wait: 1s}\n"), []string{`line 7: limit "db": "queue" needs "length"`}},
		{"queue negative length", conc("    queue: {length: -1, max_wait: 1s}\n"), []string{`"queue.length" must be between 0 and 1000000, got -1`}},
		{"queue length without wait", conc("    queue:\n      length: 4\n"), []string{`line 7: limit "db": "queue.max_wait" must be > 0 when "queue.length" is 4`}},
		{"queue wait without length", conc("    queue:\n      length: 0\n      max_wait: 2s\n"), []string{`line 9: limit "db": "queue.max_wait" is set but "queue.length" is 0`}},
		{"queue wait too long", conc("    queue: {length: 1, max_wait: 2h}\n"), []string{`"queue.max_wait" must be between 0s and 1h0m0s, got 2h0m0s`}},
		{"strict not bool", conc("    strict: 'true'\n"), []string{`line 7: limit "db": "strict" must be true or false, got "true"`}},
		{"several problems, all reported in line order", `version: x
limits:
  - name: a
    capacity: 0
    rate: 0/s
  - name: a
    kind: concurrency
    permits: 1
    lease_ttl: 1s
    window: 1m
bogus: 1
`, []string{
			`line 1: "version" must be a whole number`,
			`line 4: limit "a": "capacity" must be >= 1, got 0`,
			`line 5: limit "a": rate "0/s": count must be > 0`,
			`line 6: duplicate limit name "a" (first defined on line 3)`,
			`line 10: limit "a": field "window" does not apply to kind concurrency`,
			`line 11: unknown field "bogus"`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse([]byte(tc.src), "limits.yaml")
			if err == nil {
				t.Fatalf("Parse accepted the file: %+v\n--- input:\n%s", f, tc.src)
			}
			if f != nil {
				t.Errorf("Parse returned a File with an error")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("errors.Is(err, ErrInvalid) = false for %v", err)
			}
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Fatalf("error %T is not a *FileError", err)
			}
			if fe.Source != "limits.yaml" {
				t.Errorf("Source = %q", fe.Source)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tc.want) || len(fe.Errors) != len(tc.want) {
				t.Fatalf("got %d problems, want %d:\n%v", len(fe.Errors), len(tc.want), err)
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(lines[i], "limits.yaml: ") || !strings.Contains(lines[i], w) {
					t.Errorf("problem %d = %q\nwant it to contain %q", i, lines[i], w)
				}
			}
		})
	}
}

func TestFileErrorFormat(t *testing.T) {
	e := &FileError{Errors: []*Error{{Line: 0, Msg: "file is empty"}, {Line: 7, Msg: "bad"}}}
	if got, want := e.Error(), "file is empty\nline 7: bad"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	e.Source = "f.yaml"
	if got, want := e.Error(), "f.yaml: file is empty\nf.yaml: line 7: bad"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	var one *Error
	if !errors.As(e, &one) || one.Msg != "file is empty" {
		t.Errorf("errors.As(*Error) = %v", one)
	}
}

func TestParseTooLarge(t *testing.T) {
	data := make([]byte, MaxFileSize+1)
	for i := range data {
		data[i] = '#'
	}
	_, err := Parse(data, "big.yaml")
	if err == nil || !strings.Contains(err.Error(), "big.yaml: file is larger than") {
		t.Fatalf("err = %v", err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "limits.yaml")
	if err := os.WriteFile(path, []byte("version: 4\nlimits:\n  - {name: x, capacity: 1, rate: 1/s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Load(path)
	if err != nil || f.Version != 4 || f.Source != path {
		t.Fatalf("Load = %+v, %v", f, err)
	}
	if err := os.WriteFile(path, []byte("version: 4\nlimits:\n  - {name: x, capacity: 0, rate: 1/s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(path)
	if err == nil || !strings.HasPrefix(err.Error(), path+": line 3: limit \"x\": \"capacity\" must be >= 1") {
		t.Fatalf("Load error = %v", err)
	}
	_, err = Load(filepath.Join(dir, "missing.yaml"))
	if err == nil || errors.Is(err, ErrInvalid) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Load(missing) error = %v; want a not-exist error that is not ErrInvalid", err)
	}
}

func TestKindPolicyStrings(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{KindRate.String(), "rate"},
		{KindConcurrency.String(), "concurrency"},
		{Kind(9).String(), "kind(9)"},
		{PolicyLocal.String(), "local"},
		{PolicyOpen.String(), "open"},
		{PolicyClosed.String(), "closed"},
		{Policy(7).String(), "policy(7)"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
	for _, p := range []Policy{PolicyLocal, PolicyOpen, PolicyClosed} {
		if got, err := ParsePolicy(p.String()); err != nil || got != p {
			t.Errorf("ParsePolicy(%q) = %v, %v", p, got, err)
		}
	}
	if _, err := ParsePolicy("Open"); err == nil || !strings.HasPrefix(err.Error(), "limits: ") {
		t.Errorf("ParsePolicy(Open) error = %v", err)
	}
}

func BenchmarkLookup(b *testing.B) {
	f := Default()
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := f.Lookup("export-db"); !ok {
			b.Fatal("missing")
		}
	}
}

func BenchmarkLookupParallel(b *testing.B) {
	f := Default()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, ok := f.Lookup("export"); !ok {
				b.Fatal("missing")
			}
		}
	})
}

func BenchmarkParseDefault(b *testing.B) {
	data := DefaultYAML()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(data, "x"); err != nil {
			b.Fatal(err)
		}
	}
}
