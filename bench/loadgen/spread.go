package main

import (
	"encoding/csv"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// spread is `loadgen spread RUN.csv ...`: it reads the bench.csv of
// several suite runs of the same cells and prints, for every same-run
// ratio a cell has (÷ Redis, ÷ ceiling, cluster ÷ 1 node, repl ÷ off,
// allot ÷ off, and p50 ÷ Redis's p50), its value in each run, the median
// and the range. One run's ratio can move by a third between runs on a
// shared machine (bench/README.md, "Reading the run"); a target is read
// from the median of runs taken one after another, and the range says how
// far to trust it. A ratio missing from a run (a failed cell) is left out
// of that run's column and of the median.
func spread(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadgen spread", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: loadgen spread RUN1/bench.csv RUN2/bench.csv ...")
	}
	if err := fs.Parse(args); err != nil {
		return exitFlag(err)
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	var runs []spreadRun
	for _, name := range fs.Args() {
		run, err := readSpreadRun(name)
		if err != nil {
			fmt.Fprintln(stderr, "loadgen spread:", err)
			return 1
		}
		runs = append(runs, run)
	}
	writeSpread(stdout, fs.Args(), runs)
	return 0
}

// spreadRatios are the ratio columns of bench.csv that spread reads, with
// the names it prints.
var spreadRatios = []struct{ column, name string }{
	{"vs_redis", "÷ Redis"},
	{"vs_ceiling", "÷ ceiling"},
	{"vs_one_node", "cluster ÷ 1 node"},
	{"vs_repl_off", "repl ÷ off"},
	{"vs_allot_off", "allot ÷ off"},
}

// p50VsRedis is the ratio spread computes itself, from the p50 column of
// a row with a vs_redis ratio and of redis-lua's row of the same workload
// and callers.
const p50VsRedis = "p50 ÷ Redis p50"

// spreadKey names one ratio of one cell.
type spreadKey struct {
	workload string
	callers  int
	target   string
	ratio    string // a spreadRatios name, or p50VsRedis
}

// spreadRun is one run's ratios, and its keys in the order they came.
type spreadRun struct {
	values map[spreadKey]float64
	order  []spreadKey
}

// readSpreadRun reads one bench.csv.
func readSpreadRun(name string) (spreadRun, error) {
	f, err := os.Open(name)
	if err != nil {
		return spreadRun{}, err
	}
	defer func() { _ = f.Close() }()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return spreadRun{}, fmt.Errorf("%s: %w", name, err)
	}
	if len(recs) == 0 {
		return spreadRun{}, fmt.Errorf("%s: empty", name)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	for _, c := range []string{"workload", "callers", "target", "p50_us", "check"} {
		if _, ok := col[c]; !ok {
			return spreadRun{}, fmt.Errorf("%s: no column %q: not a suite's bench.csv", name, c)
		}
	}
	run := spreadRun{values: map[spreadKey]float64{}}
	redisP50 := map[[2]string]float64{} // by workload and callers
	for _, r := range recs[1:] {
		if r[col["target"]] == redisName && r[col["check"]] == "ok" {
			if v, err := strconv.ParseFloat(r[col["p50_us"]], 64); err == nil {
				redisP50[[2]string{r[col["workload"]], r[col["callers"]]}] = v
			}
		}
	}
	for line, r := range recs[1:] {
		callers, err := strconv.Atoi(r[col["callers"]])
		if err != nil {
			return spreadRun{}, fmt.Errorf("%s:%d: callers %q: %w", name, line+2, r[col["callers"]], err)
		}
		add := func(ratio string, v float64) {
			k := spreadKey{r[col["workload"]], callers, r[col["target"]], ratio}
			run.values[k] = v
			run.order = append(run.order, k)
		}
		for _, sr := range spreadRatios {
			i, ok := col[sr.column]
			if !ok || r[i] == "" {
				continue
			}
			v, err := strconv.ParseFloat(r[i], 64)
			if err != nil {
				return spreadRun{}, fmt.Errorf("%s:%d: %s %q: %w", name, line+2, sr.column, r[i], err)
			}
			add(sr.name, v)
			if sr.column != "vs_redis" {
				continue
			}
			p50, err := strconv.ParseFloat(r[col["p50_us"]], 64)
			d, ok := redisP50[[2]string{r[col["workload"]], r[col["callers"]]}]
			if q, qok := sameRunRatio(p50, d); err == nil && ok && qok {
				add(p50VsRedis, q) // printed beside ÷ Redis
			}
		}
	}
	return run, nil
}

// writeSpread prints one table: a row per ratio of a cell, in the order
// of the first run that has it, with each run's value, the median and the
// range.
func writeSpread(w io.Writer, names []string, runs []spreadRun) {
	var keys []spreadKey
	seen := map[spreadKey]bool{}
	for _, run := range runs {
		for _, k := range run.order {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	fmt.Fprintf(w, "Same-run ratios of %d runs (%s), median and range.\n\n", len(runs), strings.Join(names, ", "))
	fmt.Fprint(w, "| workload | callers | target | ratio |")
	for i := range runs {
		fmt.Fprintf(w, " run %d |", i+1)
	}
	fmt.Fprintln(w, " median | min–max |")
	fmt.Fprint(w, "|---|---:|---|---|")
	fmt.Fprint(w, strings.Repeat("---:|", len(runs)))
	fmt.Fprintln(w, "---:|---:|")
	for _, k := range keys {
		var vals []float64
		fmt.Fprintf(w, "| %s | %d | %s | %s |", k.workload, k.callers, k.target, k.ratio)
		for _, run := range runs {
			v, ok := run.values[k]
			if ok {
				vals = append(vals, v)
			}
			fmt.Fprintf(w, " %s |", fmtRatio(v, ok))
		}
		med, lo, hi, ok := medianRange(vals)
		fmt.Fprintf(w, " %s | %s |\n", fmtRatio(med, ok), rangeOf(lo, hi, ok))
	}
}

// medianRange returns the median (the mean of the middle two for an even
// count), the least and the greatest of vals; ok is false for none.
func medianRange(vals []float64) (med, lo, hi float64, ok bool) {
	if len(vals) == 0 {
		return 0, 0, 0, false
	}
	s := slices.Clone(vals)
	slices.Sort(s)
	n := len(s)
	med = s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return med, s[0], s[n-1], true
}

// rangeOf formats lo–hi, or "–" when missing.
func rangeOf(lo, hi float64, ok bool) string {
	if !ok {
		return "–"
	}
	return strconv.FormatFloat(lo, 'f', 2, 64) + "–" + strconv.FormatFloat(hi, 'f', 2, 64)
}
