package jepsen

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// syntheticScenario is a 3-second run: a hot key admitting 2 per bin, one
// slow take at 1.1 s, a fault over [1 s, 2 s] and one lease key.
func syntheticScenario() ReportScenario {
	var ops []Op
	id := int64(0)
	for t := int64(0); t < 3*int64(time.Second); t += BinNs / 2 {
		id++
		ops = append(ops, Op{ID: id, Limit: "hot", Key: "hot-1", Cost: 1, Call: t, Return: t + int64(time.Millisecond), Result: Allowed, Source: "owner"})
	}
	ops = append(ops,
		Op{ID: 100, Limit: "hot", Key: "hot-1", Cost: 3, Call: 1100 * ms, Return: 1300 * ms, Result: Denied},
		grant("L1", 100, 110, 2000, 7),
		release("L1", 500))
	res := Result{
		Name: "3-kill<x>", Fault: Kill, Nodes: 3, Targets: []string{"n1"}, Seed: 42, Pass: false,
		Failures: []string{"leases: conc/k: 5 held at once > bound 4"},
		Hot:      Limit{Name: "hot", Capacity: 12, RatePerSec: 6},
		Buckets:  []BucketCheck{{ID: BucketID{"hot", "hot-1"}, Owner: "n1", Relation: OwnedByTarget, Bound: 9, Pass: true}},
		Avail:    map[string]Availability{"before": {Ops: 10, Answered: 10}},
	}
	phases := []Phase{{"before", 0, int64(time.Second)}, {"during", int64(time.Second), 2 * int64(time.Second)}, {"after", 2 * int64(time.Second), 3 * int64(time.Second)}}
	res.Leases = CheckLeases(ops, phases, time.Second,
		func(BucketID) LeaseBound { return NewLeaseBound(ConcLimit{Permits: 4}, Kill, OwnedByTarget, 3) },
		func(BucketID) (string, Relation) { return "n2", OwnedElsewhere })
	res.Dir = "/runs/x/3-kill"
	res.Linear = []LinearCheck{
		{ID: BucketID{"hot", "hot-1"}, Instance: "n1/ab/1", Ops: 40, Result: LinearOK, Pass: true},
		{ID: BucketID{"hot", "hot-2"}, Instance: "n2/cd/7", Ops: 12, Unknown: 1, Result: LinearIllegal, Visualization: "linear-hot-hot-2.html"},
	}
	ev := []Event{
		{At: 0, Kind: "start"},
		{At: int64(time.Second), Kind: "inject", Detail: "kill n1"},
		{At: 2 * int64(time.Second), Kind: "heal", Detail: "restart n1"},
		{At: 3 * int64(time.Second), Kind: "end"},
	}
	return ReportScenario{Result: res, Ops: ops, Events: ev}
}

func TestAdmittedAndLatencyPerBin(t *testing.T) {
	sc := syntheticScenario()
	ad := AdmittedPerBin(sc.Ops, BucketID{"hot", "hot-1"}, 3*int64(time.Second))
	if len(ad) != 13 || ad[0] != 2 || ad[5] != 2 || ad[12] != 0 {
		t.Fatalf("admitted per bin = %v, want 2 per full bin", ad)
	}
	p50, p99, ok := LatencyPerBin(sc.Ops, 3*int64(time.Second))
	if !ok[0] || p50[0] != 1 || p99[4] != 200 || p50[4] != 1 {
		t.Fatalf("latency: p50 %v p99 %v", p50, p99)
	}
}

func TestWriteHTML(t *testing.T) {
	var b bytes.Buffer
	if err := WriteHTML(&b, "run <1>", []ReportScenario{syntheticScenario()}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"<!DOCTYPE html>", "<title>run &lt;1&gt;</title>",
		`<h2 id="3-kill&lt;x&gt;">3-kill&lt;x&gt; <span class="fail">FAIL</span></h2>`,
		`<li class="fail">leases: conc/k: 5 held at once &gt; bound 4</li>`,
		"timeline", "inject 1.00s", "heal 2.00s", `class="fault"`,
		"admitted cost per 250 ms, hot keys (limit hot: capacity 12, 6/s)",
		"hot-1 (n1)", "rate 1.5 per bin", `stroke-dasharray`,
		"take latency per 250 ms", ">p50<", ">p99<",
		"<td>hot/hot-1</td><td>n1</td><td>target-owned</td>",
		"<td>conc/k</td><td>n2</td><td>other-owned</td><td>1/4</td><td>0/11</td><td>0/11</td>",
		"1 of 2 instances replay exactly, 52 decisions",
		`<td>n2/cd/7</td><td>12</td><td>1</td><td><span class="fail">illegal</span></td><td><a href="3-kill/linear-hot-hot-2.html">`,
		"</svg>", "</body></html>",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, bad := range []string{"<script", "http://", "https://", "NaN", "Inf"} {
		if bad == "http://" {
			// the SVG namespace is the only URL allowed
			out = strings.ReplaceAll(out, `xmlns="http://www.w3.org/2000/svg"`, "")
		}
		if strings.Contains(out, bad) {
			t.Errorf("report contains %q (must be self-contained and finite)", bad)
		}
	}
}

func TestLoadReportScenario(t *testing.T) {
	sc := syntheticScenario()
	dir := t.TempDir()
	sc.Result.Dir = dir
	if err := save(dir, sc.Ops, sc.Events, sc.Result); err != nil {
		t.Fatal(err)
	}
	got, err := LoadReportScenario(sc.Result)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Ops) != len(sc.Ops) || len(got.Events) != 4 || got.Ops[len(got.Ops)-1].Kind != KindRelease {
		t.Fatalf("loaded %d ops, %d events", len(got.Ops), len(got.Events))
	}
	if _, err := LoadReportScenario(Result{Dir: filepath.Join(dir, "missing")}); err == nil {
		t.Fatal("want an error for a missing history")
	}
	if _, err := os.Stat(filepath.Join(dir, "history.jsonl")); err != nil {
		t.Fatal(err)
	}
}
