package jepsen

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// BinNs is the width of one bucket of the HTML report's charts: 250 ms.
const BinNs = int64(250 * time.Millisecond)

// ReportScenario is what the HTML report shows of one scenario: its
// result, history and events.
type ReportScenario struct {
	Result Result
	Ops    []Op
	Events []Event
}

// LoadReportScenario reads the history and events Run saved in r.Dir.
func LoadReportScenario(r Result) (ReportScenario, error) {
	rs := ReportScenario{Result: r}
	f, err := os.Open(filepath.Join(r.Dir, "history.jsonl"))
	if err != nil {
		return rs, fmt.Errorf("jepsen: %w", err)
	}
	defer f.Close()
	if rs.Ops, err = ReadJSONL(f); err != nil {
		return rs, err
	}
	b, err := os.ReadFile(filepath.Join(r.Dir, "events.json"))
	if err != nil {
		return rs, fmt.Errorf("jepsen: %w", err)
	}
	if err := json.Unmarshal(b, &rs.Events); err != nil {
		return rs, fmt.Errorf("jepsen: events: %w", err)
	}
	return rs, nil
}

// series is one polyline of a chart: a value per bin (NaN-free; bins
// without data are skipped by using ok=false).
type series struct {
	name  string
	color string
	y     []float64
	ok    []bool
	dash  bool
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"}

// AdmittedPerBin returns, for each bin of BinNs up to end, the cost of
// allowed takes of (limit, key) whose Return falls in it.
func AdmittedPerBin(ops []Op, id BucketID, end int64) []float64 {
	out := make([]float64, end/BinNs+1)
	for _, o := range ops {
		if o.Kind == "" && o.Result == Allowed && o.Limit == id.Limit && o.Key == id.Key && o.Return >= 0 && o.Return <= end {
			out[o.Return/BinNs] += float64(o.Cost)
		}
	}
	return out
}

// LatencyPerBin returns the p50 and p99 latency in milliseconds of the
// answered takes whose Call falls in each bin of BinNs up to end; ok is
// false for bins without answered takes.
func LatencyPerBin(ops []Op, end int64) (p50, p99 []float64, ok []bool) {
	nb := end/BinNs + 1
	lat := make([][]int64, nb)
	for _, o := range ops {
		if o.Kind == "" && (o.Result == Allowed || o.Result == Denied) && o.Call >= 0 && o.Call <= end {
			lat[o.Call/BinNs] = append(lat[o.Call/BinNs], o.Return-o.Call)
		}
	}
	p50, p99, ok = make([]float64, nb), make([]float64, nb), make([]bool, nb)
	for i, l := range lat {
		if len(l) == 0 {
			continue
		}
		p50[i] = float64(quantile(l, 0.50)) / 1e6
		p99[i] = float64(quantile(l, 0.99)) / 1e6
		ok[i] = true
	}
	return p50, p99, ok
}

// chart is one SVG line chart over the run's time axis with the fault
// shaded.
type chart struct {
	title        string
	yLabel       string
	end          int64 // ns, the x axis' end
	ymax         float64
	shade        [2]int64 // fault span; equal ends mean none
	series       []series
	w, h, ml, mb int
}

func (c chart) x(t int64) float64 {
	return float64(c.ml) + float64(c.w-c.ml-10)*float64(t)/float64(max(c.end, 1))
}

func (c chart) y(v float64) float64 {
	top, bottom := 20.0, float64(c.h-c.mb)
	return bottom - (bottom-top)*min(v, c.ymax)/c.ymax
}

func (c chart) svg(b *strings.Builder) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img">`, c.w, c.h, c.w, c.h)
	fmt.Fprintf(b, `<text x="%d" y="14" class="t">%s</text>`, c.ml, html.EscapeString(c.title))
	if c.shade[1] > c.shade[0] {
		fmt.Fprintf(b, `<rect class="fault" x="%.1f" y="20" width="%.1f" height="%d"/>`, c.x(c.shade[0]), c.x(c.shade[1])-c.x(c.shade[0]), c.h-c.mb-20)
	}
	// Axes, y ticks at 0, half and max, x ticks every second.
	fmt.Fprintf(b, `<line class="ax" x1="%d" y1="%.1f" x2="%d" y2="%.1f"/>`, c.ml, c.y(0), c.w-10, c.y(0))
	fmt.Fprintf(b, `<line class="ax" x1="%d" y1="20" x2="%d" y2="%.1f"/>`, c.ml, c.ml, c.y(0))
	for _, v := range []float64{0, c.ymax / 2, c.ymax} {
		fmt.Fprintf(b, `<text x="%d" y="%.1f" class="yl">%s</text>`, c.ml-4, c.y(v)+4, trimFloat(v))
	}
	fmt.Fprintf(b, `<text x="4" y="%d" class="yl0">%s</text>`, c.h/2, html.EscapeString(c.yLabel))
	step := int64(time.Second)
	if c.end > 40*step {
		step *= 5
	}
	for t := int64(0); t <= c.end; t += step {
		fmt.Fprintf(b, `<text x="%.1f" y="%d" class="xl">%ds</text>`, c.x(t), c.h-c.mb+14, t/int64(time.Second))
	}
	for i, s := range c.series {
		var pts []string
		flush := func() {
			if len(pts) > 0 {
				dash := ""
				if s.dash {
					dash = ` stroke-dasharray="5,3"`
				}
				fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="1.5"%s points="%s"/>`, s.color, dash, strings.Join(pts, " "))
			}
			pts = pts[:0]
		}
		for j, v := range s.y {
			if s.ok != nil && !s.ok[j] {
				flush()
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", c.x(int64(j)*BinNs+BinNs/2), c.y(v)))
		}
		flush()
		fmt.Fprintf(b, `<text x="%d" y="%d" fill="%s" class="lg">%s</text>`, c.ml+10+140*(i%4), c.h-4-14*(i/4), s.color, html.EscapeString(s.name))
	}
	b.WriteString("</svg>\n")
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.1f", v)
	return strings.TrimSuffix(s, ".0")
}

// faultSpan returns the inject and heal times from events (0, 0 without a
// fault) and the end of the run.
func faultSpan(ev []Event, ops []Op) (inject, heal, end int64) {
	for _, e := range ev {
		switch e.Kind {
		case "inject":
			inject = e.At
		case "heal":
			heal = e.At
		case "end":
			end = e.At
		}
	}
	if end == 0 {
		for _, o := range ops {
			end = max(end, o.Return)
		}
	}
	return inject, heal, end
}

const htmlHead = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>%s</title>
<style>
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222;max-width:1100px}
h2{border-top:1px solid #ccc;padding-top:.6em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:2px 8px;text-align:right}
th{background:#f4f4f4}.pass{color:#080;font-weight:bold}.fail{color:#c00;font-weight:bold}
svg{display:block;margin:.4em 0}.t{font-weight:bold;font-size:12px}.ax{stroke:#888}
.yl{font-size:10px;text-anchor:end}.yl0{font-size:10px}.xl{font-size:10px;text-anchor:middle}.lg{font-size:11px}
.fault{fill:#fdd}.ev{font-size:11px}
</style></head><body>
`

// WriteHTML writes a self-contained HTML page (inline SVG, no external
// assets) with, per scenario: the fault timeline, the admitted cost of the
// hot keys per 250 ms against the limit's rate, the take latency (p50 and
// p99 per 250 ms) and the checkers' verdicts.
func WriteHTML(w io.Writer, title string, scs []ReportScenario) error {
	var b strings.Builder
	fmt.Fprintf(&b, htmlHead, html.EscapeString(title))
	fmt.Fprintf(&b, "<h1>%s</h1>\n<ul>\n", html.EscapeString(title))
	for _, sc := range scs {
		fmt.Fprintf(&b, `<li><a href="#%s">%s</a> %s</li>`+"\n", html.EscapeString(sc.Result.Name), html.EscapeString(sc.Result.Name), verdictSpan(sc.Result))
	}
	b.WriteString("</ul>\n")
	for _, sc := range scs {
		writeScenarioHTML(&b, sc)
	}
	b.WriteString("</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func verdictSpan(r Result) string {
	v, cls := "PASS", "pass"
	switch {
	case !r.Pass && r.KnownBug:
		v, cls = "XFAIL", "fail"
	case !r.Pass:
		v, cls = "FAIL", "fail"
	case r.Detected || r.LeaseDetected:
		// The broken-build run: its violations are the expected outcome.
		v = "PASS (violation detected, as expected)"
	}
	return fmt.Sprintf(`<span class="%s">%s</span>`, cls, v)
}

// writeScenarioHTML writes one scenario's section: its heading and
// failures, the fault timeline, the admitted-cost and latency charts over
// the same time axis (the fault shaded), and the checkers' verdicts.
func writeScenarioHTML(b *strings.Builder, sc ReportScenario) {
	r := sc.Result
	writeScenarioHeading(b, r)
	inject, heal, end := faultSpan(sc.Events, sc.Ops)
	base := chart{w: 1000, h: 190, ml: 50, mb: 40, end: end, shade: [2]int64{inject, heal}}
	writeTimeline(b, base, sc.Events)
	admittedChart(base, r, sc.Ops).svg(b)
	latencyChart(base, sc.Ops).svg(b)
	writeVerdictsHTML(b, r)
}

// writeScenarioHeading writes the scenario's heading with its verdict (the
// target of the index's link), one line of its parameters, and its
// failures, if any.
func writeScenarioHeading(b *strings.Builder, r Result) {
	e := html.EscapeString
	fmt.Fprintf(b, `<h2 id="%s">%s %s</h2>`+"\n", e(r.Name), e(r.Name), verdictSpan(r))
	fmt.Fprintf(b, "<p>fault %s, %d nodes, targets %s, seed %d, %v</p>\n", e(string(r.Fault)), r.Nodes, e(strings.Join(r.Targets, ",")), r.Seed, r.Elapsed.Round(time.Second))
	if len(r.Failures) > 0 {
		b.WriteString("<ul>")
		for _, f := range r.Failures {
			fmt.Fprintf(b, `<li class="fail">%s</li>`, e(f))
		}
		b.WriteString("</ul>\n")
	}
}

// writeTimeline writes the timeline: an SVG of base's width and time axis
// with the fault span shaded and one mark per event but start and end,
// each labelled with its kind and time (its detail as a tooltip), and a
// tick every second.
func writeTimeline(b *strings.Builder, base chart, events []Event) {
	e := html.EscapeString
	tl := base
	// Marks close together (heal-start, heal, converged within a few
	// hundred ms) get a label row each, so their labels never overlap.
	tl.h, tl.mb = 84, 20
	inject, heal := tl.shade[0], tl.shade[1]
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" role="img"><text x="%d" y="14" class="t">timeline</text>`, tl.w, tl.h, tl.ml)
	if heal > inject {
		fmt.Fprintf(b, `<rect class="fault" x="%.1f" y="20" width="%.1f" height="44"/>`, tl.x(inject), tl.x(heal)-tl.x(inject))
	}
	fmt.Fprintf(b, `<line class="ax" x1="%d" y1="64" x2="%d" y2="64"/>`, tl.ml, tl.w-10)
	row := 0
	for _, ev := range events {
		if ev.Kind == "start" || ev.Kind == "end" {
			continue
		}
		x := tl.x(ev.At)
		fmt.Fprintf(b, `<line x1="%.1f" y1="20" x2="%.1f" y2="64" stroke="#c00"/><text x="%.1f" y="%d" class="ev"><title>%s</title>%s %.2fs</text>`,
			x, x, x+2, 30+11*(row%4), e(ev.Detail), e(ev.Kind), float64(ev.At)/1e9)
		row++
	}
	for t := int64(0); t <= tl.end; t += int64(time.Second) {
		fmt.Fprintf(b, `<text x="%.1f" y="78" class="xl">%ds</text>`, tl.x(t), t/int64(time.Second))
	}
	b.WriteString("</svg>\n")
}

// admittedChart returns the chart of the cost admitted per bin on each of
// the hot limit's keys (labelled with its owner), against a dashed line at
// the limit's rate per bin. The y axis reaches at least twice the rate and
// half the capacity, and the highest bin.
func admittedChart(base chart, r Result, ops []Op) chart {
	ad := base
	ad.title = fmt.Sprintf("admitted cost per 250 ms, hot keys (limit %s: capacity %d, %d/s)", r.Hot.Name, r.Hot.Capacity, r.Hot.RatePerSec)
	ad.yLabel = "cost"
	rate := float64(r.Hot.RatePerSec) * float64(BinNs) / 1e9
	ad.ymax = max(rate*2, float64(r.Hot.Capacity)/2)
	for i, id := range hotKeys(r) {
		y := AdmittedPerBin(ops, id, ad.end)
		for _, v := range y {
			ad.ymax = max(ad.ymax, v)
		}
		owner := ""
		for _, bc := range r.Buckets {
			if bc.ID == id {
				owner = " (" + bc.Owner + ")"
			}
		}
		ad.series = append(ad.series, series{name: id.Key + owner, color: palette[i%len(palette)], y: y})
	}
	rl := make([]float64, ad.end/BinNs+1)
	for i := range rl {
		rl[i] = rate
	}
	ad.series = append(ad.series, series{name: fmt.Sprintf("rate %s per bin", trimFloat(rate)), color: "#000", y: rl, dash: true})
	return ad
}

// latencyChart returns the chart of the answered takes' p50 and p99
// latency per bin, with gaps at bins without an answer. The y axis reaches
// at least 10 ms and the highest p99, but no more than 1 s.
func latencyChart(base chart, ops []Op) chart {
	la := base
	la.title, la.yLabel = "take latency per 250 ms (answered)", "ms"
	p50, p99, ok := LatencyPerBin(ops, la.end)
	la.ymax = 10
	for i, v := range p99 {
		if ok[i] {
			la.ymax = max(la.ymax, v)
		}
	}
	la.ymax = min(la.ymax, 1000)
	la.series = []series{{name: "p50", color: "#1f77b4", y: p50, ok: ok}, {name: "p99", color: "#d62728", y: p99, ok: ok}}
	return la
}

// hotKeys returns the buckets of the hot limit in r, sorted.
func hotKeys(r Result) []BucketID {
	var ids []BucketID
	for _, bc := range r.Buckets {
		if bc.ID.Limit == r.Hot.Name {
			ids = append(ids, bc.ID)
		}
	}
	slices.SortFunc(ids, func(a, b BucketID) int { return strings.Compare(a.Key, b.Key) })
	return ids
}

func writeVerdictsHTML(b *strings.Builder, r Result) {
	e := html.EscapeString
	b.WriteString("<table><tr><th>phase</th><th>ops</th><th>answered</th><th>errors</th><th>timeouts</th><th>p50</th><th>p99</th></tr>\n")
	for _, p := range []string{"before", "during", "after"} {
		a, ok := r.Avail[p]
		if !ok {
			continue
		}
		fmt.Fprintf(b, "<tr><td>%s</td><td>%d</td><td>%.1f%%</td><td>%d</td><td>%d</td><td>%v</td><td>%v</td></tr>\n",
			p, a.Ops, 100*a.Share(), a.Errors, a.Timeouts, a.P50.Round(time.Millisecond/10), a.P99.Round(time.Millisecond/10))
	}
	b.WriteString("</table>\n")
	b.WriteString("<table><tr><th>bucket</th><th>owner</th><th>relation</th><th>excess</th><th>bound</th><th>fallbacks</th><th>verdict</th></tr>\n")
	for _, bc := range r.Buckets {
		if bc.ID.Limit != r.Hot.Name && bc.Pass && bc.Whole.Excess == 0 {
			continue // quiet cold keys
		}
		fmt.Fprintf(b, "<tr><td>%s/%s</td><td>%s</td><td>%s</td><td>%.1f</td><td>%.1f</td><td>%d</td><td>%s</td></tr>\n",
			e(bc.ID.Limit), e(bc.ID.Key), e(bc.Owner), e(string(bc.Relation)), bc.Whole.Excess, bc.Bound, bc.Fallbacks, passCell(bc.Pass))
	}
	b.WriteString("</table>\n")
	if len(r.Leases) == 0 {
		return
	}
	b.WriteString("<table><tr><th>lease key</th><th>owner</th><th>relation</th>")
	for _, p := range r.Leases[0].Phases {
		fmt.Fprintf(b, "<th>held %s</th>", e(p.Phase))
	}
	b.WriteString("<th>grants</th><th>refused</th><th>renewed</th><th>lost</th><th>unknown</th><th>abandoned</th><th>unreclaimed (leaks)</th><th>fencing violations</th><th>verdict</th></tr>\n")
	for _, k := range r.Leases {
		fmt.Fprintf(b, "<tr><td>%s/%s</td><td>%s</td><td>%s</td>", e(k.ID.Limit), e(k.ID.Key), e(k.Owner), e(string(k.Relation)))
		for _, p := range k.Phases {
			fmt.Fprintf(b, "<td>%d/%d</td>", p.Max, p.Bound)
		}
		fmt.Fprintf(b, "<td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d (%d healthy)</td><td>%s</td></tr>\n",
			k.Grants, k.Refused, k.Renewed, k.Lost, k.Unknown, k.Abandoned, len(k.Leaks), len(k.Fencing), len(k.FencingHealthy), passCell(k.Pass))
	}
	b.WriteString("</table>\n")
	writeLinear(b, r)
}

// writeLinear writes the linearizability verdicts: a count of the
// instances that replayed, and a row with a link to porcupine's
// visualization for each that did not.
func writeLinear(b *strings.Builder, r Result) {
	e := html.EscapeString
	if len(r.Linear) == 0 {
		return
	}
	ok, decisions := 0, 0
	for _, lc := range r.Linear {
		decisions += lc.Ops
		if lc.Pass {
			ok++
		}
	}
	fmt.Fprintf(b, "<p>Linearizability (porcupine, per owner bucket instance): %d of %d instances replay exactly, %d decisions.</p>\n", ok, len(r.Linear), decisions)
	if ok == len(r.Linear) {
		return
	}
	b.WriteString("<table><tr><th>bucket</th><th>instance</th><th>decisions</th><th>timeouts</th><th>result</th><th>visualization</th></tr>\n")
	for _, lc := range r.Linear {
		if lc.Pass {
			continue
		}
		link := "-"
		if lc.Visualization != "" {
			href := e(filepath.ToSlash(filepath.Join(filepath.Base(r.Dir), lc.Visualization)))
			link = `<a href="` + href + `">` + e(lc.Visualization) + `</a>`
		}
		fmt.Fprintf(b, "<tr><td>%s/%s</td><td>%s</td><td>%d</td><td>%d</td><td><span class=\"fail\">%s</span></td><td>%s</td></tr>\n",
			e(lc.ID.Limit), e(lc.ID.Key), e(lc.Instance), lc.Ops, lc.Unknown, e(lc.Result), link)
	}
	b.WriteString("</table>\n")
}

func passCell(ok bool) string {
	if ok {
		return `<span class="pass">pass</span>`
	}
	return `<span class="fail">over bound</span>`
}
