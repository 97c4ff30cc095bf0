package jepsen

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// Row is one line of the summary: the worst bucket (largest excess over
// its bound) among the buckets of one relation in one scenario.
type Row struct {
	Scenario  string
	Fault     Fault
	Relation  Relation
	Bucket    BucketID
	Excess    float64
	Ratio     float64
	Bound     float64
	Fallbacks int     // allowed fallback decisions on the bucket
	Avail     float64 // share answered during the fault, all nodes
	AvailRest float64 // share answered during the fault by nodes not hit
	P99       time.Duration
	Converge  time.Duration
	// Leases is the lease verdict of the worst lease key of the relation:
	// "max/bound" held at once ("-" without lease keys), with "!" when
	// over the bound and "f<n>" for fencing-order violations.
	Leases string
	// Linear is "ok" when every owner bucket instance of the scenario
	// replayed exactly, else "<failed>/<instances>!"; "?" counts
	// instances porcupine gave up on.
	Linear  string
	Verdict string
}

// linearCell formats the linearizability verdict of r's instances.
func (r Result) linearCell() string {
	if len(r.Linear) == 0 {
		return "-"
	}
	failed, unknown := 0, 0
	for _, lc := range r.Linear {
		switch {
		case !lc.Pass:
			failed++
		case lc.Result == LinearUnknown:
			unknown++
		}
	}
	c := fmt.Sprintf("ok %d", len(r.Linear))
	if failed > 0 {
		c = fmt.Sprintf("%d/%d!", failed, len(r.Linear))
	}
	if unknown > 0 {
		c += fmt.Sprintf(" ?%d", unknown)
	}
	return c
}

// leaseCell formats the lease verdict of the keys of relation rel in r:
// the most leases held at once in the healthy phases (before the fault and
// once settled) against permits, then during or after the fault against
// the fault's bound, each for the worst key; "!" marks a bound exceeded,
// "L<n>" refusals only an unreclaimed lease explains, "F<n>" fencing-order
// violations among one owner's grants while healthy (these fail), and
// "f<n>" fencing-order violations over the whole run (report-only).
func (r Result) leaseCell(rel Relation) string {
	var healthy, faulty *PhaseMax
	fencing, leaks, healthyFencing, any := 0, 0, 0, false
	for i := range r.Leases {
		k := &r.Leases[i]
		if k.Relation != rel {
			continue
		}
		any = true
		fencing += len(k.Fencing)
		leaks += len(k.Leaks)
		healthyFencing += len(k.FencingHealthy)
		for j := range k.Phases {
			p := &k.Phases[j]
			w := &faulty
			if Healthy(p.Phase) {
				w = &healthy
			}
			if *w == nil || p.Max-p.Bound > (*w).Max-(*w).Bound {
				*w = p
			}
		}
	}
	if !any {
		return "-"
	}
	cell := func(p *PhaseMax) string {
		if p == nil {
			return "-"
		}
		c := fmt.Sprintf("%d/%d", p.Max, p.Bound)
		if p.Max > p.Bound {
			c += "!"
		}
		return c
	}
	c := cell(healthy)
	if r.Fault != None {
		c += " " + cell(faulty)
	}
	if leaks > 0 {
		c += fmt.Sprintf(" L%d!", leaks)
	}
	if healthyFencing > 0 {
		c += fmt.Sprintf(" F%d!", healthyFencing)
	}
	if fencing > 0 {
		c += fmt.Sprintf(" f%d", fencing)
	}
	return c
}

// Rows summarizes a result: one row per relation present.
func (r Result) Rows() []Row {
	phase := "during"
	if r.Fault == None {
		phase = "before"
	}
	av := r.Avail[phase]
	verdict := "PASS"
	switch {
	case !r.Pass && r.KnownBug:
		verdict = "XFAIL"
	case !r.Pass:
		verdict = "FAIL"
	case r.KnownBug:
		verdict = "XPASS"
	}
	var rows []Row
	for _, rel := range []Relation{OwnedByTarget, OwnedElsewhere} {
		var worst *BucketCheck
		for i := range r.Buckets {
			b := &r.Buckets[i]
			if b.Relation != rel {
				continue
			}
			if worst == nil || worse(b, worst) {
				worst = b
			}
		}
		if worst == nil {
			continue
		}
		v := verdict
		if !worst.Pass && r.Pass {
			v = "PASS (detected)"
		}
		rows = append(rows, Row{
			Scenario: r.Name, Fault: r.Fault, Relation: rel, Bucket: worst.ID,
			Excess: worst.Whole.Excess, Ratio: worst.Whole.Ratio(), Bound: worst.Bound, Fallbacks: worst.Fallbacks,
			Avail: av.Share(), AvailRest: r.AvailOther.Share(), P99: av.P99, Converge: r.Converge,
			Leases: r.leaseCell(rel), Linear: r.linearCell(), Verdict: v,
		})
	}
	return rows
}

// worse orders buckets for the summary: failed before passed, then by
// excess over bound, then by excess.
func worse(a, b *BucketCheck) bool {
	if a.Pass != b.Pass {
		return !a.Pass
	}
	if da, db := a.Whole.Excess-a.Bound, b.Whole.Excess-b.Bound; da != db && (a.Whole.Excess > 0 || b.Whole.Excess > 0) {
		return da > db
	}
	return a.Whole.Excess > b.Whole.Excess
}

// WriteSummary prints the one-screen table of results, then the allotment
// figures of the scenarios with allotments, then each failure.
func WriteSummary(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tkeys\tworst key\texcess\tratio\tbound\tfb\tavail\tavail(rest)\tp99\theal\tleases max/bound\tlinear\tverdict\t")
	for _, r := range results {
		for _, row := range r.Rows() {
			conv := "-"
			if row.Converge > 0 {
				conv = row.Converge.Round(100 * time.Millisecond).String()
			}
			fmt.Fprintf(tw, "%s\t%s\t%s/%s\t%.1f\t%.2f\t%.1f\t%d\t%.1f%%\t%.1f%%\t%v\t%s\t%s\t%s\t%s\t\n",
				row.Scenario, row.Relation, row.Bucket.Limit, row.Bucket.Key, row.Excess, row.Ratio, row.Bound, row.Fallbacks,
				100*row.Avail, 100*row.AvailRest, row.P99.Round(time.Millisecond), conv, row.Leases, row.Linear, row.Verdict)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range results {
		for _, ac := range r.Allot {
			fmt.Fprintf(w, "%s: %s\n", r.Name, ac)
		}
		if m := r.AllotMetrics; m != nil {
			fmt.Fprintf(w, "%s: allotment metrics, all nodes: %.0f grants, %.0f refreshes, %.0f returns, %.0f owner denials, %.0f local denials, %.0f tokens expired (stranded), %.0f outstanding at the end\n",
				r.Name, m["weir_allotment_grants_total"], m["weir_allotment_refreshes_total"], m["weir_allotment_returns_total"],
				m["weir_allotment_denials_total"], m["weir_allotment_local_denials_total"], m["weir_allotment_expired_tokens_total"],
				m["weir_allotments_outstanding_tokens"])
		}
	}
	for _, r := range results {
		for _, f := range r.Failures {
			tag := ""
			if r.KnownBug {
				tag = " [known bug, xfail]"
			}
			fmt.Fprintf(w, "%s%s: %s\n", r.Name, tag, f)
		}
	}
	var b strings.Builder
	for _, r := range results {
		fmt.Fprintf(&b, "%s (targets %v) %v; ", r.Name, r.Targets, r.Elapsed.Round(time.Second))
	}
	_, err := fmt.Fprintln(w, strings.TrimSuffix(b.String(), "; "))
	return err
}
