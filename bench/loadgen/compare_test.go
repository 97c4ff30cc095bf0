package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func compareResults() []cellResult {
	return []cellResult{
		{
			Label: "1 node", Target: "weir-grpc", Limit: "bench", Keys: 1, Concurrency: 16, Throughput: 10000,
			MeanUs: 1000, P50Us: 900, P99Us: 5000, Decisions: 100, ServerCPUSeconds: 0.005, Scraped: true,
		},
		{
			Label: "3 nodes", Target: "weir-grpc", Limit: "bench", Keys: 1, Concurrency: 16, Throughput: 5000,
			MeanUs: 1500, P50Us: 1200, P99Us: 9000, Decisions: 300, ServerCPUSeconds: 0.06,
			Scraped: true, Forwarded: 200, ForwardBatches: 50, ForwardErrors: 1, Errors: 2,
		},
		// No "1 node" cell at this concurrency: no row.
		{Label: "3 nodes", Target: "weir-grpc", Limit: "bench", Keys: 1, Concurrency: 64, Throughput: 7000},
		// Another target at the same concurrency is its own pair.
		{Label: "1 node", Target: "weir-lease-grpc", Limit: "bench-lease", Keys: 1, Concurrency: 16, Throughput: 4000, P50Us: 50},
		{Label: "3 nodes", Target: "weir-lease-grpc", Limit: "bench-lease", Keys: 1, Concurrency: 16, Throughput: 2000, P50Us: 20},
	}
}

func TestWriteCompare(t *testing.T) {
	var b bytes.Buffer
	if !writeCompare(&b, compareResults(), "3 nodes", "1 node") {
		t.Fatal("no pair found")
	}
	out := b.String()
	for _, want := range []string{
		"| target | limit | keys | callers | 1 node req/s | 3 nodes req/s | req/s 3 nodes/1 node |",
		"| weir-grpc | bench | 1 | 16 | 10000 | 5000 | 0.50× | 900 | 1200 | 5000 | 9000 | +500 | +300 | 50.0 | 200 | 0.67 | 4.00 | 1 | 0/2 |",
		"| weir-lease-grpc | bench-lease | 1 | 16 | 4000 | 2000 | 0.50× | 50.0 | 20.0 | 0.0 | 0.0 | +0.0 | −30.0 | 0.0 | 0.0 | n/a | n/a | n/a | 0/0 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("compare lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "| 64 |") {
		t.Errorf("a row without a match:\n%s", out)
	}
	if n := strings.Count(out, "\n"); n != 4 {
		t.Errorf("%d lines, want a header, a rule and 2 rows:\n%s", n, out)
	}
	b.Reset()
	if writeCompare(&b, compareResults(), "owner", "1 node") || b.Len() != 0 {
		t.Errorf("no cell labelled owner: reported a pair or printed %q", b.String())
	}
}

func TestReportCompareFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.jsonl")
	var file bytes.Buffer
	enc := json.NewEncoder(&file)
	for _, r := range compareResults() {
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(path, file.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := report([]string{"-compare", "3 nodes", "-to", "1 node", path}, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "| weir-grpc | bench | 1 | 16 | 10000 | 5000 |") {
		t.Fatalf("report -compare: exit %d, %s%s", code, out.String(), errb.String())
	}
	if code := report([]string{"-compare", "x", "-to", "y", path}, &out, &errb); code != 1 {
		t.Errorf("labels with no cells: exit %d, want 1", code)
	}
	if code := report([]string{"-compare", "x", path}, &out, &errb); code != 2 {
		t.Errorf("-compare without -to: exit %d, want 2", code)
	}
	out.Reset()
	if code := report([]string{path}, &out, &errb); code != 0 || !strings.Contains(out.String(), "#### 3 nodes limit=bench keys=1") {
		t.Errorf("plain report: exit %d:\n%s", code, out.String())
	}
}
