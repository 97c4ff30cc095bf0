package main

import (
	"fmt"
	"io"
	"strconv"
)

// cellKey is what must match for two cells of different labels to be
// compared.
type cellKey struct {
	Target      string
	Limit       string
	Keys        int
	Concurrency int
}

// writeCompare prints one markdown table pairing every cell labelled a
// with the cell labelled b of the same target, limit, keys and
// concurrency (the last such cell when there are several): throughputs and
// their ratio, p50 and p99 of each, the a−b differences of the mean and the
// p50 (the cost of what a adds, e.g. a forward), server CPU per request of
// each, and a's forwarding (requests forwarded per request, mean batch
// size, failed forwards) when it was read. It reports whether any pair was
// found; it prints nothing when none was.
func writeCompare(w io.Writer, results []cellResult, a, b string) bool {
	base := map[cellKey]cellResult{}
	for _, r := range results {
		if r.Label == b {
			base[cellKey{r.Target, r.Limit, r.Keys, r.Concurrency}] = r
		}
	}
	var pairs [][2]cellResult
	for _, r := range results {
		if r.Label != a {
			continue
		}
		if o, ok := base[cellKey{r.Target, r.Limit, r.Keys, r.Concurrency}]; ok {
			pairs = append(pairs, [2]cellResult{r, o})
		}
	}
	if len(pairs) == 0 {
		return false
	}
	fmt.Fprintf(w, "| target | limit | keys | callers | %[1]s req/s | %[2]s req/s | req/s %[2]s/%[1]s | %[1]s p50 µs | %[2]s p50 µs | %[1]s p99 µs | %[2]s p99 µs | mean %[2]s−%[1]s µs | p50 %[2]s−%[1]s µs | %[1]s server CPU µs/req | %[2]s server CPU µs/req | %[2]s forwarded/req | %[2]s mean batch | %[2]s forward errors | errors %[1]s/%[2]s |\n", b, a)
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, p := range pairs {
		ra, rb := p[0], p[1]
		fwd, batch, fwdErr := "n/a", "n/a", "n/a"
		if ra.Scraped {
			fwd = strconv.FormatFloat(ra.forwardsPerDecision(), 'f', 2, 64)
			batch = "-"
			if ra.ForwardBatches > 0 {
				batch = strconv.FormatFloat(ra.meanBatch(), 'f', 2, 64)
			}
			fwdErr = strconv.FormatFloat(ra.ForwardErrors, 'f', 0, 64)
		}
		fmt.Fprintf(w, "| %s | %s | %d | %d | %.0f | %.0f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d/%d |\n",
			ra.Target, ra.Limit, ra.Keys, ra.Concurrency, rb.Throughput, ra.Throughput, ratio(ra.Throughput, rb.Throughput),
			num(rb.P50Us), num(ra.P50Us), num(rb.P99Us), num(ra.P99Us),
			signed(ra.MeanUs-rb.MeanUs), signed(ra.P50Us-rb.P50Us),
			num(rb.serverCPUPerDecision()), num(ra.serverCPUPerDecision()),
			fwd, batch, fwdErr, rb.Errors, ra.Errors)
	}
	return true
}

// signed formats a difference in microseconds with its sign.
func signed(us float64) string {
	if us < 0 {
		return "−" + num(-us)
	}
	return "+" + num(us)
}
