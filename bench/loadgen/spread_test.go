package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeRunCSV writes rows as a suite run's bench.csv under dir and
// returns its path.
func writeRunCSV(t *testing.T, dir string, rows []suiteRow) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "bench.csv")
	var b bytes.Buffer
	if err := writeCSV(&b, rows); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// spreadLine returns the table line of (workload, callers, target,
// ratio name) in out, or fails.
func spreadLine(t *testing.T, out, cell string) []string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, cell) {
			var f []string
			for _, c := range strings.Split(strings.Trim(l, "|"), "|") {
				f = append(f, strings.TrimSpace(c))
			}
			return f
		}
	}
	t.Fatalf("no line %q in:\n%s", cell, out)
	return nil
}

func TestSpreadMedianAndRange(t *testing.T) {
	dir := t.TempDir()
	// Three runs of one cell pair: weir-grpc at 16 callers does 15k, 9k
	// and 18k against a ceiling of 20k; Redis 30k each time, p50 300 µs.
	var paths []string
	for i, rps := range []float64{15000, 9000, 18000} {
		rows := []suiteRow{
			testRow(testHot, infoCeil, 16, 20000, 1000),
			testRow(testHot, infoOne, 16, rps, 3000),
			testRow(testHot, infoRed, 16, 30000, 900),
		}
		paths = append(paths, writeRunCSV(t, filepath.Join(dir, "run", string(rune('a'+i))), rows))
	}
	var out, errOut bytes.Buffer
	if code := spread(paths, &out, &errOut); code != 0 {
		t.Fatalf("spread: exit %d: %s", code, errOut.String())
	}
	// ÷ ceiling: 0.75, 0.45, 0.90 → median 0.75, range 0.45–0.90.
	got := spreadLine(t, out.String(), "| hot | 16 | weir-grpc | ÷ ceiling |")
	want := []string{"hot", "16", "weir-grpc", "÷ ceiling", "0.75×", "0.45×", "0.90×", "0.75×", "0.45–0.90"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("÷ ceiling line = %q, want %q", got, want)
	}
	// p50 ÷ Redis p50: testRow's p50 is p99/3, so 1000 against 300 µs.
	got = spreadLine(t, out.String(), "| hot | 16 | weir-grpc | p50 ÷ Redis p50 |")
	if got[7] != "3.33×" {
		t.Errorf("p50 ÷ Redis p50 median = %q, want 3.33× (line %q)", got[7], got)
	}
}

func TestSpreadLeavesOutAFailedCell(t *testing.T) {
	dir := t.TempDir()
	ok := writeRunCSV(t, filepath.Join(dir, "a"), []suiteRow{
		testRow(testHot, infoCeil, 16, 20000, 1000),
		testRow(testHot, infoOne, 16, 10000, 3000),
	})
	bad := testRow(testHot, infoOne, 16, 19000, 3000)
	bad.Result.Errors, bad.Result.FirstError = 3, "refused"
	bad.Check = checkCell(bad.Result)
	failed := writeRunCSV(t, filepath.Join(dir, "b"), []suiteRow{testRow(testHot, infoCeil, 16, 20000, 1000), bad})
	var out, errOut bytes.Buffer
	if code := spread([]string{ok, failed}, &out, &errOut); code != 0 {
		t.Fatalf("spread: exit %d: %s", code, errOut.String())
	}
	got := spreadLine(t, out.String(), "| hot | 16 | weir-grpc | ÷ ceiling |")
	if got[4] != "0.50×" || got[5] != "–" || got[6] != "0.50×" {
		t.Errorf("line = %q: want run 1 0.50×, run 2 missing, median 0.50×", got)
	}
}

func TestSpreadRefusesWhatIsNotASuiteCSV(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.csv")
	if err := os.WriteFile(p, []byte("a,b\n1,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := spread([]string{p}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "not a suite's bench.csv") {
		t.Errorf("exit %d, stderr %q: want 1 and why", code, errOut.String())
	}
	if code := spread(nil, &out, &errOut); code != 2 {
		t.Errorf("no files: exit %d, want 2", code)
	}
}
