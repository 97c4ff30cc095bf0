package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// targetInfo is what the suite's tables know of a target: its row name
// and what its figures are divided by.
type targetInfo struct {
	// Name is the row name, e.g. "weir-http".
	Name string
	// Group is "ceiling", "redis", "weir 1 node", "weir 3 nodes" or
	// "gubernator 3 nodes".
	Group string
	// Ceiling names the ceiling target whose throughput this one's is
	// divided by ("weir ÷ ceiling"); "" for none.
	Ceiling string
	// OneNode names, for a cluster target, the one-node target it is
	// compared with ("cluster ÷ one node"); "" for none.
	OneNode string
	// ReplOff names the same target on a cluster with replication off
	// (`--replication=false`), so this one's throughput divided by it is
	// what replication costs ("repl ÷ off"); "" for none.
	ReplOff string
	// AllotOff names the same target on a limit with allotments off, so
	// this one's throughput divided by it is what allotments gain
	// ("allot ÷ off"); "" for none.
	AllotOff string
	// VsRedis divides this target's throughput by redis-lua's.
	VsRedis bool
	// Weir says the target is a Weir node, whose /metrics tell the
	// forwarded share.
	Weir bool
}

// redisName is the target Weir is compared with.
const redisName = "redis-lua"

// workload is one key pattern of the suite.
type workload struct {
	Name string // hot, uniform or zipf
	Keys int
	Dist keyDist
}

// String describes the workload for headings.
func (w workload) String() string {
	switch {
	case w.Keys <= 1:
		return w.Name + " (1 key)"
	case w.Dist == distZipf:
		return fmt.Sprintf("%s (%s keys, s=%g)", w.Name, humanCount(w.Keys), zipfS)
	}
	return fmt.Sprintf("%s (%s keys)", w.Name, humanCount(w.Keys))
}

// suiteRow is one measured cell of the suite: a target at one workload
// and one number of callers.
type suiteRow struct {
	Workload workload
	Target   targetInfo
	Result   cellResult
	// Check is "ok", or what the cell's counts broke (errors, denials
	// where none are possible, no decision at all).
	Check string
}

// checkCell says what is wrong with a cell's counts, or "ok". Every suite
// target decides on a limit that cannot deny, so a denial is as wrong as
// an error.
func checkCell(r cellResult) string {
	var bad []string
	if r.Decisions == 0 {
		bad = append(bad, "no decisions")
	}
	if r.Denied > 0 {
		bad = append(bad, fmt.Sprintf("%d denied", r.Denied))
	}
	if r.Errors > 0 {
		bad = append(bad, fmt.Sprintf("%d errors (%s)", r.Errors, r.FirstError))
	}
	if r.MetricsError != "" {
		bad = append(bad, "metrics not read")
	}
	if len(bad) == 0 {
		return "ok"
	}
	return strings.Join(bad, "; ")
}

// sameRunRatio returns num/den, and false when either is not a positive number.
func sameRunRatio(num, den float64) (float64, bool) {
	if !(num > 0) || !(den > 0) || math.IsInf(num, 0) || math.IsInf(den, 0) {
		return 0, false
	}
	return num / den, true
}

// suiteTable indexes a run's rows for the same-run ratios.
type suiteTable struct {
	rows []suiteRow
	at   map[suiteKey]int
}

type suiteKey struct {
	workload string
	callers  int
	target   string
}

// newSuiteTable indexes rows; a later row for the same cell wins.
func newSuiteTable(rows []suiteRow) *suiteTable {
	t := &suiteTable{rows: rows, at: make(map[suiteKey]int, len(rows))}
	for i, r := range rows {
		t.at[suiteKey{r.Workload.Name, r.Result.Concurrency, r.Target.Name}] = i
	}
	return t
}

// throughputOf returns the throughput of target at r's workload and
// callers, and whether that cell was measured and passed its check.
func (t *suiteTable) throughputOf(r suiteRow, target string) (float64, bool) {
	i, ok := t.at[suiteKey{r.Workload.Name, r.Result.Concurrency, target}]
	if !ok || t.rows[i].Check != "ok" {
		return 0, false
	}
	return t.rows[i].Result.Throughput, true
}

// rowRatios are the same-run throughput ratios of one row.
type rowRatios struct {
	VsRedis, VsCeiling, VsOneNode, VsReplOff, VsAllotOff      float64
	HasRedis, HasCeiling, HasOneNode, HasReplOff, HasAllotOff bool
}

// ratios computes r's ratios against the cells of the same workload and
// callers. A ratio is missing when either side is missing or failed.
func (t *suiteTable) ratios(r suiteRow) rowRatios {
	var out rowRatios
	if r.Check != "ok" {
		return out
	}
	x := r.Result.Throughput
	if r.Target.VsRedis {
		if d, ok := t.throughputOf(r, redisName); ok {
			out.VsRedis, out.HasRedis = sameRunRatio(x, d)
		}
	}
	if r.Target.Ceiling != "" {
		if d, ok := t.throughputOf(r, r.Target.Ceiling); ok {
			out.VsCeiling, out.HasCeiling = sameRunRatio(x, d)
		}
	}
	if r.Target.OneNode != "" {
		if d, ok := t.throughputOf(r, r.Target.OneNode); ok {
			out.VsOneNode, out.HasOneNode = sameRunRatio(x, d)
		}
	}
	if r.Target.ReplOff != "" {
		if d, ok := t.throughputOf(r, r.Target.ReplOff); ok {
			out.VsReplOff, out.HasReplOff = sameRunRatio(x, d)
		}
	}
	if r.Target.AllotOff != "" {
		if d, ok := t.throughputOf(r, r.Target.AllotOff); ok {
			out.VsAllotOff, out.HasAllotOff = sameRunRatio(x, d)
		}
	}
	return out
}

// forwardedShare is the share of decisions that a node forwarded to an
// owner, and whether it was measured.
func forwardedShare(r suiteRow) (float64, bool) {
	if !r.Target.Weir || !r.Result.Scraped || r.Result.Decisions == 0 {
		return 0, false
	}
	return r.Result.Forwarded / float64(r.Result.Decisions), true
}

// serverCPU is the server CPU per decision in µs, and whether it was
// measured (a target with no server pid has none).
func serverCPU(r suiteRow) (float64, bool) {
	if r.Result.ServerCPUSeconds <= 0 || r.Result.Decisions == 0 {
		return 0, false
	}
	return r.Result.serverCPUPerDecision(), true
}

// fmtRatio formats a ratio as "0.62×", or "–" when missing.
func fmtRatio(v float64, ok bool) string {
	if !ok {
		return "–"
	}
	return strconv.FormatFloat(v, 'f', 2, 64) + "×"
}

// fmtSig formats a figure with three significant digits (at least the
// integer part), or "–" when missing.
func fmtSig(v float64, ok bool) string {
	if !ok {
		return "–"
	}
	switch a := math.Abs(v); {
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// fmtShare formats a share as a percentage, or "–".
func fmtShare(v float64, ok bool) string {
	if !ok {
		return "–"
	}
	return strconv.FormatFloat(100*v, 'f', 1, 64) + " %"
}

// humanCount writes 1000000 as 1M and 10000 as 10k.
func humanCount(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return strconv.Itoa(n/1_000_000) + "M"
	case n >= 1000 && n%1000 == 0:
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}

// tableHeader is the header of each workload's Markdown table.
const tableHeader = "| callers | target | decisions/s | p50 µs | p99 µs | p99.9 µs | server CPU µs/decision | forwarded | allowed | denied | errors | ÷ Redis | ÷ ceiling | cluster ÷ 1 node | repl ÷ off | allot ÷ off | check |\n" +
	"|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n"

// writeMarkdown writes one table per workload, rows in run order (callers,
// then targets), with the same-run ratios.
func writeMarkdown(w io.Writer, rows []suiteRow) error {
	t := newSuiteTable(rows)
	var b strings.Builder
	for _, wl := range workloadsOf(rows) {
		fmt.Fprintf(&b, "### %s\n\n%s", wl, tableHeader)
		for _, r := range rows {
			if r.Workload.Name != wl.Name {
				continue
			}
			q := t.ratios(r)
			cpu, cpuOK := serverCPU(r)
			fwd, fwdOK := forwardedShare(r)
			res := r.Result
			fmt.Fprintf(&b, "| %d | %s | %.0f | %s | %s | %s | %s | %s | %d | %d | %d | %s | %s | %s | %s | %s | %s |\n",
				res.Concurrency, r.Target.Name, res.Throughput,
				fmtSig(res.P50Us, true), fmtSig(res.P99Us, true), fmtSig(res.P999Us, true),
				fmtSig(cpu, cpuOK), fmtShare(fwd, fwdOK),
				res.Allowed, res.Denied, res.Errors,
				fmtRatio(q.VsRedis, q.HasRedis), fmtRatio(q.VsCeiling, q.HasCeiling), fmtRatio(q.VsOneNode, q.HasOneNode),
				fmtRatio(q.VsReplOff, q.HasReplOff), fmtRatio(q.VsAllotOff, q.HasAllotOff), mdEscape(r.Check))
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// mdEscape keeps a free-text cell from breaking its table row.
func mdEscape(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

// workloadsOf returns the workloads of rows in first-seen order.
func workloadsOf(rows []suiteRow) []workload {
	var out []workload
	seen := map[string]bool{}
	for _, r := range rows {
		if !seen[r.Workload.Name] {
			seen[r.Workload.Name] = true
			out = append(out, r.Workload)
		}
	}
	return out
}

// csvHeader names the CSV columns; empty cells are missing figures.
var csvHeader = []string{
	"workload", "keys", "dist", "callers", "target", "group", "seconds",
	"decisions_per_s", "mean_us", "p50_us", "p99_us", "p999_us", "max_us",
	"server_cpu_us_per_decision", "loadgen_cpu_us_per_decision", "forwarded_share",
	"allowed", "denied", "errors", "vs_redis", "vs_ceiling", "vs_one_node", "vs_repl_off", "vs_allot_off", "check",
}

// writeCSV writes one line per row with full precision.
func writeCSV(w io.Writer, rows []suiteRow) error {
	t := newSuiteTable(rows)
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	num := func(v float64, ok bool) string {
		if !ok {
			return ""
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	for _, r := range rows {
		q := t.ratios(r)
		cpu, cpuOK := serverCPU(r)
		fwd, fwdOK := forwardedShare(r)
		res := r.Result
		lg := res.loadgenCPUPerDecision()
		rec := []string{
			r.Workload.Name, strconv.Itoa(r.Workload.Keys), r.Workload.Dist.String(),
			strconv.Itoa(res.Concurrency), r.Target.Name, r.Target.Group, num(res.Seconds, true),
			num(res.Throughput, true), num(res.MeanUs, true), num(res.P50Us, true), num(res.P99Us, true),
			num(res.P999Us, true), num(res.MaxUs, true),
			num(cpu, cpuOK), num(lg, lg > 0), num(fwd, fwdOK),
			strconv.FormatUint(res.Allowed, 10), strconv.FormatUint(res.Denied, 10), strconv.FormatUint(res.Errors, 10),
			num(q.VsRedis, q.HasRedis), num(q.VsCeiling, q.HasCeiling), num(q.VsOneNode, q.HasOneNode),
			num(q.VsReplOff, q.HasReplOff), num(q.VsAllotOff, q.HasAllotOff), r.Check,
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
