package main

import (
	"context"
	"fmt"
	"time"
)

// Rounds: the cells of one workload and number of callers measured in
// slices, the targets taking turns.
//
// With -rounds 1 (the default) each target runs its cell in one piece, one
// target after another. A change in the machine's background load between
// a target's cell and its reference's (its ceiling, Redis + Lua, one node)
// then moves their ratio: on a shared machine, single cells scatter by
// ±0.1–0.2 around the median of several runs. With -rounds N, each cell's
// measured time is cut into N slices of -seconds/N. Round by round every
// target runs one slice, in the suite's order in odd rounds and in reverse
// in even ones (A B C, C B A, A B C, ...), so that a drift in background
// load hits a target and its reference alike, wherever they stand in the
// order. Each slice opens its callers and warms up (-warmup) before it
// measures, as a cell does.
//
// A row is the sum of its slices: decisions, errors, CPU time and forwards
// add up, the latency histograms merge, and the throughput is the
// decisions over the summed measured seconds.

// runGroup runs the cells of workload wl at callers callers, one per spec,
// in cfg.Rounds rounds (at least one), and hands each row to progress: as
// it ends with one round, in the order of specs at the end with more. It
// returns the rows in the order of specs; when a server of a spec died or
// ctx ended, it returns the rows complete by then (in the last round) with
// the error.
func runGroup(ctx context.Context, cfg suiteConfig, specs []suiteSpec, wl workload, callers int, progress func(suiteRow)) ([]suiteRow, error) {
	rounds := max(cfg.Rounds, 1)
	slice := cfg
	slice.Duration = cfg.Duration / time.Duration(rounds)
	rows := make([]suiteRow, len(specs))
	complete := make([]bool, len(specs))
	finished := func() []suiteRow {
		var out []suiteRow
		for i, ok := range complete {
			if ok {
				out = append(out, rows[i])
			}
		}
		return out
	}
	for r := range rounds {
		for k := range specs {
			i := k
			if r%2 == 1 {
				i = len(specs) - 1 - k
			}
			s := specs[i]
			for _, p := range s.servers {
				if !p.alive() {
					return finished(), fmt.Errorf("%w: %s (%w):\n%s", errStopped, p.name, p.err, p.logTail())
				}
			}
			row := runSuiteCell(ctx, slice, s, wl, callers)
			if r == 0 {
				rows[i] = row
			} else {
				rows[i] = rows[i].plus(row)
			}
			if r == rounds-1 {
				complete[i] = true
				if rounds == 1 && progress != nil {
					progress(rows[i]) // as it ends
				}
			}
			if err := ctx.Err(); err != nil {
				return finished(), err
			}
		}
	}
	if rounds > 1 && progress != nil {
		for _, row := range rows { // in order, the last round may have run in reverse
			progress(row)
		}
	}
	return rows, nil
}

// plus is row a and its next slice b as one row: the results summed, and
// the first check of the two that is not "ok", else "ok".
func (a suiteRow) plus(b suiteRow) suiteRow {
	a.Result = a.Result.plus(b.Result)
	if a.Check == "ok" {
		a.Check = b.Check
	}
	return a
}

// plus is r and its next slice o as one result over both measured phases.
// A CPU time either slice does not know (zero) leaves the sum unknown, and
// forwards count as scraped only when both slices were.
func (r cellResult) plus(o cellResult) cellResult {
	r.Seconds += o.Seconds
	r.Allowed += o.Allowed
	r.Denied += o.Denied
	r.Errors += o.Errors
	r.Decisions = r.Allowed + r.Denied
	if r.FirstError == "" {
		r.FirstError = o.FirstError
	}
	r.ServerCPUSeconds = sumKnown(r.ServerCPUSeconds, o.ServerCPUSeconds)
	r.LoadgenCPUSeconds = sumKnown(r.LoadgenCPUSeconds, o.LoadgenCPUSeconds)
	r.Scraped = r.Scraped && o.Scraped
	r.Forwarded += o.Forwarded
	r.ForwardBatches += o.ForwardBatches
	r.ForwardErrors += o.ForwardErrors
	if r.MetricsError == "" {
		r.MetricsError = o.MetricsError
	}
	h := &histogram{}
	for _, x := range []*histogram{r.hist, o.hist} {
		if x != nil {
			h.merge(x)
		}
	}
	r.hist = h
	r.summarize()
	return r
}

// sumKnown is a+b, or 0 (unknown) when either is.
func sumKnown(a, b float64) float64 {
	if a == 0 || b == 0 {
		return 0
	}
	return a + b
}

// roundsNote is the header line's account of how cells were measured.
func roundsNote(cfg suiteConfig) string {
	if cfg.Rounds <= 1 {
		return "targets interleaved at each number of callers"
	}
	return fmt.Sprintf("each cell in %d slices of %v, each slice after its own warm-up, the targets taking turns at each number of callers (in order, then in reverse)",
		cfg.Rounds, cfg.Duration/time.Duration(cfg.Rounds))
}
