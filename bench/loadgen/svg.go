package main

import (
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// The plot's geometry, in SVG user units.
const (
	svgPanelW  = 380
	svgPanelH  = 250
	svgLeft    = 64 // room for y labels
	svgRight   = 16
	svgTop     = 34 // room for the panel title
	svgBottom  = 40 // room for x labels
	svgLegendH = 22 // per legend row
	svgLegendW = 190
)

// svgPalette colours the targets in first-seen order (Okabe–Ito and
// Tableau hues, distinguishable in print).
var svgPalette = [...]string{
	"#000000", "#e69f00", "#56b4e9", "#009e73", "#d55e00", "#0072b2",
	"#cc79a7", "#999999", "#8c564b", "#bcbd22", "#17becf", "#7f3c8d",
}

// plotSeries is one target's line in one panel: a value per callers
// index, NaN where the cell is missing or failed.
type plotSeries struct {
	target targetInfo
	colour int // palette index: the target's position in the legend
	ys     []float64
}

// writeSVG plots throughput (top row) and p99 latency (bottom row, log
// scale) against callers, one column per workload and one line per
// target. Cells that failed their check are left out. The SVG is written
// by hand: no external tool is needed to draw it.
func writeSVG(w io.Writer, rows []suiteRow) error {
	wls := workloadsOf(rows)
	callers := callersOf(rows)
	targets := targetsOf(rows)
	if len(wls) == 0 || len(callers) == 0 {
		return fmt.Errorf("loadgen: plot: no rows")
	}
	perRow := max(1, (len(wls)*svgPanelW)/svgLegendW)
	legendRows := (len(targets) + perRow - 1) / perRow
	width := len(wls) * svgPanelW
	height := 2*svgPanelH + legendRows*svgLegendH + 10
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n",
		width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)
	for col, wl := range wls {
		for row, metric := range []string{"throughput", "p99"} {
			series := seriesOf(rows, wl.Name, metric, callers, targets)
			writePanel(&b, col*svgPanelW, row*svgPanelH, wl, metric, callers, series)
		}
	}
	for i, t := range targets {
		x := (i % perRow) * svgLegendW
		y := 2*svgPanelH + (i/perRow)*svgLegendH + 14
		fmt.Fprintf(&b, `<g data-legend="%s"><line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/><text x="%d" y="%d">%s</text></g>`+"\n",
			html.EscapeString(t.Name), x+10, y, x+40, y, colourOf(i), dashOf(t), x+46, y+4, html.EscapeString(t.Name))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writePanel draws one metric of one workload.
func writePanel(b *strings.Builder, x0, y0 int, wl workload, metric string, callers []int, series []plotSeries) {
	plotW := float64(svgPanelW - svgLeft - svgRight)
	plotH := float64(svgPanelH - svgTop - svgBottom)
	left, top := float64(x0+svgLeft), float64(y0+svgTop)
	title, unit := "decisions/s", ""
	if metric == "p99" {
		title, unit = "p99 latency", " µs"
	}
	fmt.Fprintf(b, `<g data-panel="%s/%s">`+"\n", html.EscapeString(wl.Name), metric)
	fmt.Fprintf(b, `<text x="%.1f" y="%d" font-size="12" font-weight="bold">%s — %s</text>`+"\n",
		left, y0+18, html.EscapeString(title), html.EscapeString(wl.String()))
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#888888"/>`+"\n", left, top, plotW, plotH)

	scale := newAxis(metric == "p99", series)
	for _, v := range scale.ticks() {
		y := top + plotH*(1-scale.frac(v))
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#dddddd"/>`, left, y, left+plotW, y)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%s%s</text>`+"\n", left-4, y+4, axisLabel(v), unit)
	}
	xs := make([]float64, len(callers))
	for i, c := range callers {
		xs[i] = left + plotW/2
		if len(callers) > 1 {
			xs[i] = left + plotW*float64(i)/float64(len(callers)-1)
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`+"\n", xs[i], top+plotH+14, c)
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">callers</text>`+"\n", left+plotW/2, top+plotH+30)
	for _, s := range series {
		var pts []string
		var marks strings.Builder
		for i, v := range s.ys {
			if math.IsNaN(v) {
				continue
			}
			y := top + plotH*(1-scale.frac(v))
			pts = append(pts, strconv.FormatFloat(xs[i], 'f', 1, 64)+","+strconv.FormatFloat(y, 'f', 1, 64))
			fmt.Fprintf(&marks, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>`, xs[i], y, colourOf(s.colour))
		}
		if len(pts) == 0 {
			continue
		}
		fmt.Fprintf(b, `<polyline data-target="%s" points="%s" fill="none" stroke="%s" stroke-width="2"%s/>%s`+"\n",
			html.EscapeString(s.target.Name), strings.Join(pts, " "), colourOf(s.colour), dashOf(s.target), marks.String())
	}
	b.WriteString("</g>\n")
}

// axis maps values to [0, 1] of a panel's height: linear from 0 for
// throughput, log10 over whole decades for latency.
type axis struct {
	log    bool
	lo, hi float64 // linear: 0..hi; log: decades lo..hi (exponents)
}

func newAxis(logScale bool, series []plotSeries) axis {
	lo, hi := math.Inf(1), 0.0
	for _, s := range series {
		for _, v := range s.ys {
			if math.IsNaN(v) || v <= 0 {
				continue
			}
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if hi == 0 {
		lo, hi = 1, 10
	}
	if logScale {
		return axis{log: true, lo: math.Floor(math.Log10(lo)), hi: math.Max(math.Ceil(math.Log10(hi)), math.Floor(math.Log10(lo))+1)}
	}
	return axis{hi: niceCeil(hi)}
}

// frac is v's height in the panel, 0 at the bottom and 1 at the top.
func (a axis) frac(v float64) float64 {
	if a.log {
		return (math.Log10(v) - a.lo) / (a.hi - a.lo)
	}
	return v / a.hi
}

// ticks are the labelled values: every decade (log), or five steps.
func (a axis) ticks() []float64 {
	var out []float64
	if a.log {
		for e := a.lo; e <= a.hi; e++ {
			out = append(out, math.Pow(10, e))
		}
		return out
	}
	for i := range 6 {
		out = append(out, a.hi*float64(i)/5)
	}
	return out
}

// niceCeil rounds v up to 1, 2, 2.5 or 5 times a power of ten, so five
// ticks land on round numbers.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// axisLabel writes 25000 as 25k and 1000000 as 1M.
func axisLabel(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// colourOf is the palette colour of the i-th target.
func colourOf(i int) string { return svgPalette[i%len(svgPalette)] }

// dashOf draws cluster targets dashed and ceilings dotted.
func dashOf(t targetInfo) string {
	switch t.Group {
	case "weir 3 nodes":
		return ` stroke-dasharray="6,3"`
	case "ceiling":
		return ` stroke-dasharray="2,3"`
	}
	return ""
}

// seriesOf returns one series per target for a workload and metric.
func seriesOf(rows []suiteRow, wl, metric string, callers []int, targets []targetInfo) []plotSeries {
	out := make([]plotSeries, len(targets))
	for i, t := range targets {
		out[i] = plotSeries{target: t, colour: i, ys: make([]float64, len(callers))}
		for j := range out[i].ys {
			out[i].ys[j] = math.NaN()
		}
	}
	for _, r := range rows {
		if r.Workload.Name != wl || r.Check != "ok" {
			continue
		}
		ti := slices.IndexFunc(targets, func(t targetInfo) bool { return t.Name == r.Target.Name })
		ci := slices.Index(callers, r.Result.Concurrency)
		if ti < 0 || ci < 0 {
			continue
		}
		v := r.Result.Throughput
		if metric == "p99" {
			v = r.Result.P99Us
		}
		out[ti].ys[ci] = v
	}
	return out
}

// callersOf returns the distinct numbers of callers, ascending.
func callersOf(rows []suiteRow) []int {
	var out []int
	for _, r := range rows {
		if !slices.Contains(out, r.Result.Concurrency) {
			out = append(out, r.Result.Concurrency)
		}
	}
	slices.Sort(out)
	return out
}

// targetsOf returns the targets of rows in first-seen order.
func targetsOf(rows []suiteRow) []targetInfo {
	var out []targetInfo
	for _, r := range rows {
		if !slices.ContainsFunc(out, func(t targetInfo) bool { return t.Name == r.Target.Name }) {
			out = append(out, r.Target)
		}
	}
	return out
}
