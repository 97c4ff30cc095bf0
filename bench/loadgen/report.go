package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
)

// baseline is the target the Weir targets are compared with.
const baseline = "redis-lua"

// report implements `loadgen report [-compare A -to B] [FILE ...]`: it
// reads the JSON lines written with -json (from stdin when no file is
// named) and prints markdown tables, one pair per (label, limit, keys)
// group: every cell, then each Weir target against redis-lua at the same
// concurrency. With -compare it prints instead one table pairing the cells
// labelled A with those labelled B (writeCompare).
func report(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadgen report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cmpA := fs.String("compare", "", "label of the cells to compare (e.g. \"3 nodes\")")
	cmpB := fs.String("to", "", "with -compare: label of the cells compared with (e.g. \"1 node\")")
	if err := fs.Parse(args); err != nil {
		return exitFlag(err)
	}
	if (*cmpA == "") != (*cmpB == "") {
		fmt.Fprintln(stderr, "loadgen report: -compare and -to go together")
		return 2
	}
	args = fs.Args()
	var results []cellResult
	read := func(name string, r io.Reader) error {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for line := 1; sc.Scan(); line++ {
			if len(sc.Bytes()) == 0 {
				continue
			}
			var res cellResult
			if err := json.Unmarshal(sc.Bytes(), &res); err != nil {
				return fmt.Errorf("loadgen report: %s:%d: %w", name, line, err)
			}
			results = append(results, res)
		}
		return sc.Err()
	}
	if len(args) == 0 {
		if err := read("stdin", os.Stdin); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
	}
	for _, name := range args {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintln(stderr, "loadgen report:", err)
			return 1
		}
		err = read(name, f)
		_ = f.Close()
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
	}
	if len(results) == 0 {
		fmt.Fprintln(stderr, "loadgen report: no results")
		return 1
	}
	if *cmpA != "" {
		if !writeCompare(stdout, results, *cmpA, *cmpB) {
			fmt.Fprintf(stderr, "loadgen report: no cell labelled %q has a match labelled %q\n", *cmpA, *cmpB)
			return 1
		}
		return 0
	}
	writeReport(stdout, results)
	return 0
}

// groupKey is what must match for two cells to be compared.
type groupKey struct {
	Label string
	Limit string
	Keys  int
}

// writeReport prints the markdown tables of results.
func writeReport(w io.Writer, results []cellResult) {
	var order []groupKey
	groups := map[groupKey][]cellResult{}
	for _, r := range results {
		k := groupKey{r.Label, r.Limit, r.Keys}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	for gi, k := range order {
		if gi > 0 {
			fmt.Fprintln(w)
		}
		if len(order) > 1 || k.Label != "" {
			fmt.Fprintf(w, "#### %s limit=%s keys=%d\n\n", k.Label, k.Limit, k.Keys)
		}
		writeGroup(w, groups[k])
	}
}

func writeGroup(w io.Writer, rs []cellResult) {
	fmt.Fprintln(w, "| target | concurrency | req/s | mean µs | p50 µs | p99 µs | p99.9 µs | allowed | denied | errors | server CPU µs/req | loadgen CPU µs/req |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rs {
		fmt.Fprintf(w, "| %s | %d | %.0f | %s | %s | %s | %s | %d | %d | %d | %s | %s |\n",
			r.Target, r.Concurrency, r.Throughput, num(r.MeanUs), num(r.P50Us), num(r.P99Us), num(r.P999Us),
			r.Allowed, r.Denied, r.Errors, num(r.serverCPUPerDecision()), num(r.loadgenCPUPerDecision()))
	}
	base := map[int]cellResult{}
	for _, r := range rs {
		if r.Target == baseline {
			base[r.Concurrency] = r
		}
	}
	var rows []cellResult
	for _, r := range rs {
		if _, ok := base[r.Concurrency]; ok && r.Target != baseline {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return
	}
	slices.SortStableFunc(rows, func(a, b cellResult) int { return a.Concurrency - b.Concurrency })
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| concurrency | target | req/s | redis-lua req/s | throughput Weir/Redis | p50 Weir/Redis | p99 Weir/Redis | server CPU/req Weir/Redis |")
	fmt.Fprintln(w, "|---:|---|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		b := base[r.Concurrency]
		fmt.Fprintf(w, "| %d | %s | %.0f | %.0f | %s | %s | %s | %s |\n",
			r.Concurrency, r.Target, r.Throughput, b.Throughput,
			ratio(r.Throughput, b.Throughput), ratio(r.P50Us, b.P50Us), ratio(r.P99Us, b.P99Us),
			ratio(r.serverCPUPerDecision(), b.serverCPUPerDecision()))
	}
}

// num formats microseconds: one decimal below 100, none above.
func num(us float64) string {
	if us >= 100 {
		return strconv.FormatFloat(us, 'f', 0, 64)
	}
	return strconv.FormatFloat(us, 'f', 1, 64)
}

// ratio formats a/b with two decimals, or "n/a" when b is zero.
func ratio(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return strconv.FormatFloat(a/b, 'f', 2, 64) + "×"
}
