package main

import (
	"bytes"
	"encoding/csv"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var (
	testHot  = workload{Name: "hot", Keys: 1}
	testZipf = workload{Name: "zipf", Keys: 1000, Dist: distZipf}
	infoCeil = targetInfo{Name: "ceiling-grpc", Group: "ceiling"}
	infoRed  = targetInfo{Name: redisName, Group: "redis"}
	infoOne  = targetInfo{Name: "weir-grpc", Group: "weir 1 node", Ceiling: "ceiling-grpc", VsRedis: true, Weir: true}
	infoTrio = targetInfo{Name: "weir3-grpc-rr", Group: "weir 3 nodes", Ceiling: "ceiling-grpc", OneNode: "weir-grpc", VsRedis: true, Weir: true}
)

// testRow is a passing cell with the given throughput and p99.
func testRow(wl workload, t targetInfo, callers int, rps, p99 float64) suiteRow {
	res := cellResult{
		Target: t.Name, Concurrency: callers, Keys: wl.Keys, Seconds: 1, Throughput: rps,
		Allowed: uint64(rps), Decisions: uint64(rps), P50Us: p99 / 3, P99Us: p99, P999Us: 2 * p99,
	}
	if t.Weir {
		res.ServerCPUSeconds = 0.5
		res.Scraped, res.Forwarded = true, rps/2
	}
	r := suiteRow{Workload: wl, Target: t, Result: res}
	r.Check = checkCell(r.Result)
	return r
}

func testRows() []suiteRow {
	return []suiteRow{
		testRow(testHot, infoCeil, 1, 10000, 100),
		testRow(testHot, infoOne, 1, 4000, 400),
		testRow(testHot, infoRed, 1, 8000, 200),
		testRow(testHot, infoTrio, 1, 1000, 2000),
		testRow(testHot, infoCeil, 16, 20000, 1000),
		testRow(testHot, infoOne, 16, 15000, 3000),
		testRow(testHot, infoRed, 16, 30000, 900),
		testRow(testHot, infoTrio, 16, 6000, 9000),
		testRow(testZipf, infoOne, 1, 3000, 500),
	}
}

func TestCheckCell(t *testing.T) {
	for _, tc := range []struct {
		name string
		res  cellResult
		want string
	}{
		{"ok", cellResult{Decisions: 5, Allowed: 5}, "ok"},
		{"nothing decided", cellResult{}, "no decisions"},
		{"denied", cellResult{Decisions: 5, Allowed: 3, Denied: 2}, "2 denied"},
		{"errors", cellResult{Decisions: 5, Allowed: 5, Errors: 1, FirstError: "boom"}, "1 errors (boom)"},
		{"metrics", cellResult{Decisions: 5, Allowed: 5, MetricsError: "refused"}, "metrics not read"},
		{"several", cellResult{Errors: 3, FirstError: "x"}, "no decisions; 3 errors (x)"},
	} {
		if got := checkCell(tc.res); got != tc.want {
			t.Errorf("%s: checkCell = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestSameRunRatio(t *testing.T) {
	for _, tc := range []struct {
		num, den float64
		want     float64
		ok       bool
	}{
		{10, 4, 2.5, true},
		{1, 3, 1.0 / 3, true},
		{5, 0, 0, false},
		{0, 5, 0, false},
		{-1, 5, 0, false},
		{math.NaN(), 5, 0, false},
		{5, math.Inf(1), 0, false},
	} {
		got, ok := sameRunRatio(tc.num, tc.den)
		if ok != tc.ok || got != tc.want {
			t.Errorf("sameRunRatio(%v, %v) = %v, %v; want %v, %v", tc.num, tc.den, got, ok, tc.want, tc.ok)
		}
	}
}

func TestReplicationCostIsTheSameRunRatio(t *testing.T) {
	on := targetInfo{Name: "weir3-client", Group: "weir 3 nodes", ReplOff: "weir3-client-norepl", Weir: true}
	off := targetInfo{Name: "weir3-client-norepl", Group: "weir 3 nodes", Weir: true}
	rows := []suiteRow{
		testRow(testHot, on, 64, 9000, 100),
		testRow(testHot, off, 64, 10000, 100),
		testRow(testHot, on, 16, 5000, 100),
		testRow(testZipf, off, 16, 8000, 100),
	}
	tab := newSuiteTable(rows)
	if q := tab.ratios(rows[0]); !q.HasReplOff || q.VsReplOff != 0.9 {
		t.Errorf("weir3-client at 64: %+v, want repl ÷ off 0.9", q)
	}
	if q := tab.ratios(rows[1]); q.HasReplOff {
		t.Errorf("the replication-off row has a ratio against itself: %+v", q)
	}
	// The off cell at 16 callers is of another workload: no ratio.
	if q := tab.ratios(rows[2]); q.HasReplOff {
		t.Errorf("weir3-client at 16 paired across workloads: %+v", q)
	}
	var b strings.Builder
	if err := writeMarkdown(&b, rows); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "| 0.90× | – | ok |") {
		t.Errorf("Markdown lacks the repl ÷ off ratio:\n%s", b.String())
	}
}

func TestAllotmentGainIsTheSameRunRatio(t *testing.T) {
	on := targetInfo{Name: "weir3-grpc-rr-allot", Group: "weir 3 nodes", AllotOff: "weir3-grpc-rr", Weir: true}
	off := targetInfo{Name: "weir3-grpc-rr", Group: "weir 3 nodes", Weir: true}
	rows := []suiteRow{testRow(testHot, off, 64, 10000, 100), testRow(testHot, on, 64, 30000, 100)}
	tab := newSuiteTable(rows)
	if q := tab.ratios(rows[1]); !q.HasAllotOff || q.VsAllotOff != 3 || q.HasReplOff {
		t.Errorf("weir3-grpc-rr-allot at 64: %+v, want allot ÷ off 3", q)
	}
	var b strings.Builder
	if err := writeMarkdown(&b, rows); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "| – | 3.00× | ok |") {
		t.Errorf("Markdown lacks the allot ÷ off ratio:\n%s", b.String())
	}
}

func TestRatiosPairCellsOfTheSameRun(t *testing.T) {
	rows := testRows()
	tab := newSuiteTable(rows)
	one16 := tab.ratios(rows[5])
	if !one16.HasRedis || one16.VsRedis != 0.5 || !one16.HasCeiling || one16.VsCeiling != 0.75 || one16.HasOneNode {
		t.Errorf("weir-grpc at 16: %+v, want ÷Redis 0.5, ÷ceiling 0.75, no cluster ratio", one16)
	}
	trio1 := tab.ratios(rows[3])
	if !trio1.HasOneNode || trio1.VsOneNode != 0.25 || trio1.VsRedis != 0.125 || trio1.VsCeiling != 0.1 {
		t.Errorf("weir3 at 1: %+v, want ÷1 node 0.25, ÷Redis 0.125, ÷ceiling 0.1", trio1)
	}
	// zipf has no Redis and no ceiling cell: the ratios are missing, not
	// borrowed from another workload.
	if z := tab.ratios(rows[8]); z.HasRedis || z.HasCeiling {
		t.Errorf("zipf weir-grpc: %+v, want no ratios", z)
	}
	// A failed baseline gives no ratio, and neither does a failed row.
	rows[6].Check = "3 errors (x)"
	tab = newSuiteTable(rows)
	if q := tab.ratios(rows[5]); q.HasRedis {
		t.Errorf("ratio against a failed Redis cell: %+v", q)
	}
	rows[5].Check = "1 denied"
	if q := tab.ratios(rows[5]); q.HasCeiling {
		t.Errorf("ratio of a failed cell: %+v", q)
	}
}

func TestForwardedShareAndServerCPU(t *testing.T) {
	r := testRow(testHot, infoTrio, 16, 6000, 9000)
	if f, ok := forwardedShare(r); !ok || f != 0.5 {
		t.Errorf("forwardedShare = %v, %v; want 0.5", f, ok)
	}
	if c, ok := serverCPU(r); !ok || c != 0.5e6/6000 {
		t.Errorf("serverCPU = %v, %v; want %v", c, ok, 0.5e6/6000)
	}
	c := testRow(testHot, infoCeil, 16, 20000, 1000)
	if _, ok := forwardedShare(c); ok {
		t.Error("a ceiling has a forwarded share")
	}
	if _, ok := serverCPU(c); ok {
		t.Error("a ceiling has a server CPU figure")
	}
}

func TestWriteMarkdown(t *testing.T) {
	var b bytes.Buffer
	if err := writeMarkdown(&b, testRows()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"### hot (1 key)\n",
		"### zipf (1k keys, s=1.1)\n",
		"| 16 | weir-grpc | 15000 | 1000 | 3000 | 6000 | 33.3 | 50.0 % | 15000 | 0 | 0 | 0.50× | 0.75× | – | – | – | ok |",
		"| 1 | weir3-grpc-rr | 1000 | 667 | 2000 | 4000 | 500 | 50.0 % | 1000 | 0 | 0 | 0.12× | 0.10× | 0.25× | – | – | ok |",
		"| 1 | ceiling-grpc | 10000 | 33.3 | 100 | 200 | – | – | 10000 | 0 | 0 | – | – | – | – | – | ok |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
	// Every table row has as many cells as the header.
	for line := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(line, "|") && strings.Count(line, "|")-strings.Count(line, `\|`) != 18 {
			t.Errorf("row with %d separators: %q", strings.Count(line, "|"), line)
		}
	}
}

func TestMarkdownEscapesChecks(t *testing.T) {
	r := testRow(testHot, infoOne, 1, 10, 10)
	r.Check = "rpc error: a|b\nc"
	var b bytes.Buffer
	if err := writeMarkdown(&b, []suiteRow{r}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `rpc error: a\|b c |`) {
		t.Errorf("check not escaped:\n%s", b.String())
	}
}

func TestWriteCSVRoundTrips(t *testing.T) {
	rows := testRows()
	var b bytes.Buffer
	if err := writeCSV(&b, rows); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(rows)+1 || strings.Join(recs[0], ",") != strings.Join(csvHeader, ",") {
		t.Fatalf("got %d records, header %v", len(recs), recs[0])
	}
	col := func(name string) int {
		for i, h := range csvHeader {
			if h == name {
				return i
			}
		}
		t.Fatalf("no column %s", name)
		return -1
	}
	trio := recs[4] // rows[3]
	if trio[col("target")] != "weir3-grpc-rr" || trio[col("callers")] != "1" || trio[col("workload")] != "hot" {
		t.Fatalf("row 4 is %v", trio)
	}
	if v, _ := strconv.ParseFloat(trio[col("vs_one_node")], 64); v != 0.25 {
		t.Errorf("vs_one_node = %q, want 0.25", trio[col("vs_one_node")])
	}
	if v, _ := strconv.ParseFloat(trio[col("decisions_per_s")], 64); v != 1000 {
		t.Errorf("decisions_per_s = %q", trio[col("decisions_per_s")])
	}
	if c := recs[1]; c[col("vs_redis")] != "" || c[col("server_cpu_us_per_decision")] != "" {
		t.Errorf("a ceiling row has figures it cannot have: %v", c)
	}
	if z := recs[9]; z[col("dist")] != "zipf" || z[col("keys")] != "1000" {
		t.Errorf("zipf row: %v", z)
	}
}

// svgPolyline is a parsed <polyline>.
type svgPolyline struct {
	panel, target string
	pts           [][2]float64
}

// parseSVG checks the plot is well-formed XML and returns its lines.
func parseSVG(t *testing.T, b []byte) []svgPolyline {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(b))
	var out []svgPolyline
	panel := ""
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("plot is not well-formed XML: %v", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		attr := func(n string) string {
			for _, a := range se.Attr {
				if a.Name.Local == n {
					return a.Value
				}
			}
			return ""
		}
		switch se.Name.Local {
		case "g":
			if p := attr("data-panel"); p != "" {
				panel = p
			}
		case "polyline":
			pl := svgPolyline{panel: panel, target: attr("data-target")}
			for p := range strings.FieldsSeq(attr("points")) {
				x, y, _ := strings.Cut(p, ",")
				fx, err1 := strconv.ParseFloat(x, 64)
				fy, err2 := strconv.ParseFloat(y, 64)
				if err1 != nil || err2 != nil {
					t.Fatalf("bad point %q", p)
				}
				pl.pts = append(pl.pts, [2]float64{fx, fy})
			}
			out = append(out, pl)
		}
	}
}

func TestWriteSVG(t *testing.T) {
	rows := testRows()
	var b bytes.Buffer
	if err := writeSVG(&b, rows); err != nil {
		t.Fatal(err)
	}
	lines := parseSVG(t, b.Bytes())
	byKey := map[string]svgPolyline{}
	for _, l := range lines {
		byKey[l.panel+" "+l.target] = l
	}
	// hot: 4 targets × 2 metrics; zipf: weir-grpc × 2 metrics.
	if len(lines) != 10 {
		t.Fatalf("%d lines, want 10: %v", len(lines), byKey)
	}
	red, one := byKey["hot/throughput redis-lua"], byKey["hot/throughput weir-grpc"]
	if len(red.pts) != 2 || len(one.pts) != 2 {
		t.Fatalf("throughput lines: %v / %v", red, one)
	}
	// SVG y grows downwards: more throughput is higher up.
	if !(red.pts[1][1] < one.pts[1][1]) || !(one.pts[1][1] < one.pts[0][1]) {
		t.Errorf("throughput y not ordered by value: redis %v, weir %v", red.pts, one.pts)
	}
	if !(red.pts[0][0] < red.pts[1][0]) {
		t.Errorf("callers not left to right: %v", red.pts)
	}
	// p99 on a log axis: 3000 µs sits above 400 µs, and 2000 above 200.
	p1, p2 := byKey["hot/p99 weir-grpc"], byKey["hot/p99 redis-lua"]
	if !(p1.pts[1][1] < p1.pts[0][1]) || !(p1.pts[0][1] < p2.pts[0][1]) {
		t.Errorf("p99 y not ordered: weir %v, redis %v", p1.pts, p2.pts)
	}
	// The zipf panel has one point per measured caller count.
	if z := byKey["zipf/throughput weir-grpc"]; len(z.pts) != 1 {
		t.Errorf("zipf line %v, want one point", z)
	}
}

func TestWriteSVGLeavesOutFailedCells(t *testing.T) {
	rows := testRows()
	rows[5].Check = "2 errors (x)" // weir-grpc, hot, 16 callers
	var b bytes.Buffer
	if err := writeSVG(&b, rows); err != nil {
		t.Fatal(err)
	}
	for _, l := range parseSVG(t, b.Bytes()) {
		if l.panel == "hot/throughput" && l.target == "weir-grpc" && len(l.pts) != 1 {
			t.Errorf("failed cell plotted: %v", l.pts)
		}
	}
	if err := writeSVG(&b, nil); err == nil {
		t.Error("no rows: want an error")
	}
}

func TestNiceCeilAndLabels(t *testing.T) {
	for _, tc := range []struct{ in, want float64 }{
		{0, 1}, {1, 1}, {1.1, 2}, {19000, 20000}, {21000, 25000}, {26000, 50000}, {51000, 100000}, {0.03, 0.05},
	} {
		if got := niceCeil(tc.in); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("niceCeil(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	for in, want := range map[float64]string{25000: "25k", 1e6: "1M", 2.5e6: "2.5M", 10: "10", 0: "0"} {
		if got := axisLabel(in); got != want {
			t.Errorf("axisLabel(%v) = %q, want %q", in, got, want)
		}
	}
	if got := humanCount(1_000_000); got != "1M" {
		t.Errorf("humanCount = %q", got)
	}
}

func TestKeyPicker(t *testing.T) {
	const keys, n = 1000, 20000
	for _, d := range []keyDist{distUniform, distZipf} {
		p := newKeyPicker(d, keys, 7)
		counts := make([]int, keys)
		for range n {
			k := p.next()
			if k < 0 || k >= keys {
				t.Fatalf("%v: key %d out of range", d, k)
			}
			counts[k]++
		}
		// Uniform: the first key gets about n/keys = 20; Zipf(1.1): key 0
		// gets a large share (about 1/ζ over 1000 keys, ~0.17).
		switch d {
		case distUniform:
			if counts[0] > 80 {
				t.Errorf("uniform: key 0 drawn %d times of %d", counts[0], n)
			}
		case distZipf:
			if counts[0] < n/10 || counts[0] <= counts[10] {
				t.Errorf("zipf: key 0 drawn %d times, key 10 %d, of %d", counts[0], counts[10], n)
			}
		}
	}
	if p := newKeyPicker(distZipf, 1, 3); p.next() != 0 {
		t.Error("one key: want index 0")
	}
	if _, err := parseKeyDist("pareto"); err == nil {
		t.Error("parseKeyDist accepted pareto")
	}
}

func TestParseSuiteFlags(t *testing.T) {
	cfg, err := parseSuiteFlags([]string{"-quick"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Duration != 300_000_000 || cfg.Warmup != 100_000_000 || len(cfg.Callers) != 4 || len(cfg.Workloads) != 3 {
		t.Errorf("quick: %+v", cfg)
	}
	cfg, err = parseSuiteFlags([]string{"-quick", "-seconds", "2", "-callers", "1,64", "-workloads", "zipf"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Duration != 2_000_000_000 || len(cfg.Callers) != 2 || cfg.Workloads[0].Dist != distZipf || cfg.Workloads[0].Keys != 100_000 || cfg.GubernatorBin != "bin/gubernator" || cfg.Self == "" {
		t.Errorf("explicit: %+v", cfg)
	}
	for _, bad := range [][]string{{"-seconds", "0"}, {"-callers", "0"}, {"-workloads", "cold"}, {"-keys", "1"}, {"extra"}} {
		if _, err := parseSuiteFlags(bad, io.Discard); err == nil {
			t.Errorf("%v: want an error", bad)
		}
	}
}

// TestStartCPUProfile: -cpuprofile writes a profile pprof reads back
// (gzip-compressed protobuf), and a path it cannot create is an error
// before the run starts.
func TestStartCPUProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	stop, err := startCPUProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("profile file: %d bytes, %v; want a gzip stream", len(b), err)
	}
	if _, err := startCPUProfile(filepath.Join(t.TempDir(), "missing", "cpu.pprof")); err == nil {
		t.Fatal("a profile path in a missing directory was accepted")
	}
	cfg, err := parseSuiteFlags([]string{"-cpuprofile", path}, io.Discard)
	if err != nil || cfg.CPUProfile != path {
		t.Fatalf("-cpuprofile: %q, %v", cfg.CPUProfile, err)
	}
}
