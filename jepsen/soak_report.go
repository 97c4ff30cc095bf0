package jepsen

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteSoakSummary writes the soak's one-screen summary: the load, the
// steps, the answers, each node's resources in the first and the last
// window, every recorded bucket's excess against its bound, and the
// failures.
func WriteSoakSummary(w io.Writer, r SoakResult) error {
	verdict := "PASS"
	if !r.Pass {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "soak %v, seed %d: %s (in %v; %s)\n", r.Duration, r.Seed, verdict, r.Elapsed.Round(time.Second), r.Dir)
	if r.Calibrated > 0 {
		_, cerrs := AnswerTotals(r.CalibrationAnswers)
		fmt.Fprintf(w, "bulk load: %.0f takes/s flat out (calibrated; %d error answers then, not judged), run at %.0f/s; achieved %.0f/s\n",
			r.Calibrated, cerrs, r.Rate, r.Achieved)
	} else {
		fmt.Fprintf(w, "bulk load: run at %.0f/s (given); achieved %.0f/s\n", r.Rate, r.Achieved)
	}

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nSTEP\tAT\tNODE\tCONVERGED")
	for _, s := range r.Steps {
		fmt.Fprintf(tw, "%s\t%.0fs\t%s\t%s\n", s.Kind, float64(s.At)/1e9, s.Node, s.Converge)
	}
	total, errs := AnswerTotals(r.Answers)
	fmt.Fprintf(tw, "\nBULK ANSWER\tCOUNT\tSHARE\t(%d answers, %d errors)\n", total, errs)
	for _, k := range answerRows(r.Answers) {
		fmt.Fprintf(tw, "%s\t%d\t%.4f%%\n", k, r.Answers[k], 100*float64(r.Answers[k])/float64(max(total, 1)))
	}
	if len(r.ErrorsBySegment) > 0 {
		fmt.Fprintln(tw, "\nERRORS AFTER STEP\tAT\tFIRST ERROR\tCOUNT BY KIND AND NODE")
		for _, se := range r.ErrorsBySegment {
			fmt.Fprintf(tw, "%s %s\t%.0fs\t%.1fs\t%v\n", segName(se.Seg), se.Seg.Node, float64(se.Seg.Start)/1e9, float64(se.First)/1e9, se.Count)
		}
	}
	if len(r.Errors) > 0 {
		fmt.Fprintf(tw, "\nerror answers per 10 s (first %d kept): %s\n", len(r.Errors), errorHistogram(r.Errors, 10*time.Second))
	}
	fmt.Fprintln(tw, "\nRECORDED TAKE\tCOUNT")
	for _, k := range sortedKeys(r.Recorded) {
		fmt.Fprintf(tw, "%s\t%d\n", k, r.Recorded[k])
	}
	_ = tw.Flush()

	fmt.Fprintf(w, "\nresources, medians of the first window [%v, %v) and the last [%v, %v] (%d samples);\n"+
		"goroutines and open files also without the callers' HTTP connections (\"-c\"):\n",
		r.Warm, r.Warm+r.Window, r.Duration-r.Window, r.Duration, r.Samples)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tPID\tRSS\tGOROUTINES\tGOROUTINES-c\tOPEN FILES\tFILES-c\tCONNS\tVERDICT")
	for _, f := range r.Flat {
		pid := fmt.Sprint(f.FirstPid)
		v := "restarted: not judged"
		if f.FirstPid != f.LastPid {
			pid = fmt.Sprintf("%d/%d", f.FirstPid, f.LastPid)
		}
		if f.Judged {
			v = map[bool]string{true: "flat", false: "GROWS"}[f.Pass]
		}
		a, b := f.First, f.Last
		fmt.Fprintf(tw, "%s\t%s\t%s -> %s\t%d -> %d\t%d -> %d\t%d -> %d\t%d -> %d\t%d -> %d\t%s\n", f.Node, pid,
			mib(a.RSS), mib(b.RSS), a.Goroutines, b.Goroutines, a.Goroutines-a.Conns, b.Goroutines-b.Conns,
			a.FDs, b.FDs, a.FDs-a.Conns, b.FDs-b.Conns, a.Conns, b.Conns, v)
	}
	_ = tw.Flush()

	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nSEGMENT\tFROM\tLARGEST EXCESS (KEY)\tITS BOUND\tLOST\tFALLBACK ADMISSIONS\tOVER")
	for _, row := range stepRows(r.Buckets) {
		if row.largest.Excess.Excess == 0 {
			row.key = "-"
		}
		fmt.Fprintf(tw, "%s %s\t%.0fs\t%.1f (%s)\t%.1f\t%.0f\t%d\t%d\n", segName(row.seg), row.seg.Node, float64(row.seg.Start)/1e9,
			row.largest.Excess.Excess, row.key, row.largest.Bound, row.lost, row.fallbacks, row.over)
	}
	_ = tw.Flush()

	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nBUCKET\tEXCESS\tBOUND\tLARGEST SEGMENT\tSEG EXCESS\tSEG BOUND\tVERDICT")
	for _, bc := range r.Buckets {
		ws := bc.Largest()
		if !bc.Pass {
			ws = bc.Worst()
		}
		fmt.Fprintf(tw, "%s/%s\t%.1f\t%.1f\t%s %s @%.0fs\t%.1f\t%.1f\t%s\n", bc.ID.Limit, bc.ID.Key, bc.Whole.Excess, bc.Bound,
			segName(ws.Seg), ws.Seg.Node, float64(ws.Seg.Start)/1e9, ws.Excess.Excess, ws.Bound, map[bool]string{true: "ok", false: "OVER"}[bc.Pass])
	}
	_ = tw.Flush()
	if len(r.LogErrors) > 0 {
		fmt.Fprintf(w, "\nlevel=ERROR lines in the node logs: %v\n", r.LogErrors)
	}
	for _, f := range r.Failures {
		fmt.Fprintf(w, "FAIL: %s\n", f)
	}
	return nil
}

// errorHistogram is "40s:12 50s:3 ...": the error answers of errs per
// step of the run, the empty steps left out.
func errorHistogram(errs []ErrorEvent, step time.Duration) string {
	counts := make(map[int64]int)
	var keys []int64
	for _, e := range errs {
		k := e.At / int64(step)
		if counts[k] == 0 {
			keys = append(keys, k)
		}
		counts[k]++
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%v:%d ", time.Duration(k)*step, counts[k])
	}
	return strings.TrimSpace(b.String())
}

// stepRow is one segment of the soak over every recorded bucket.
type stepRow struct {
	seg       SoakSegment
	largest   SegmentCheck // the bucket with the largest excess in it
	key       string
	lost      float64 // summed over the buckets
	fallbacks int     // summed over the buckets
	over      int     // buckets over their bound in it
}

// stepRows returns, per segment (the buckets share them), the largest
// excess of any bucket with that bucket's bound, and the lost debits,
// fallback admissions and buckets over their bound summed over buckets.
func stepRows(bcs []SoakBucketCheck) []stepRow {
	var rows []stepRow
	for _, bc := range bcs {
		for j, sc := range bc.Segments {
			if j == len(rows) {
				rows = append(rows, stepRow{seg: sc.Seg, largest: sc, key: bc.ID.Limit + "/" + bc.ID.Key})
			}
			row := &rows[j]
			if sc.Excess.Excess > row.largest.Excess.Excess {
				row.largest, row.key = sc, bc.ID.Limit+"/"+bc.ID.Key
			}
			row.lost += sc.Lost
			row.fallbacks += sc.Fallbacks
			if !sc.Pass {
				row.over++
			}
		}
	}
	return rows
}
