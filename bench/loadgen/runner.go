package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// target is a system under load. Its callers are created before a cell
// starts, so connection set-up is not measured.
type target interface {
	// newCaller returns the client of caller i (0-based).
	newCaller(ctx context.Context, i int) (caller, error)
	// close releases what the target holds across cells.
	close() error
}

// caller sends one request at a time. It is used by one goroutine.
type caller interface {
	// take asks for one decision on key index k. ctx carries the
	// deadline after which an outstanding request is abandoned.
	take(ctx context.Context, k int) (allowed bool, err error)
	close() error
}

// cellConfig is one measurement: one target at one concurrency.
type cellConfig struct {
	// Concurrency is the number of callers, each with one request in
	// flight at a time (a closed loop); at least 1.
	Concurrency int
	// Duration bounds the measured phase. Zero means no time bound, and
	// then Requests must be set.
	Duration time.Duration
	// Requests bounds the measured phase by the number of requests sent,
	// over all callers; zero means no count bound.
	Requests int64
	// Warmup runs before the measured phase and is not recorded.
	Warmup time.Duration
	// Keys is the number of distinct keys, picked at random per request
	// by Dist; 1 is one hot key.
	Keys int
	// Dist is how key indexes are drawn; the zero value is uniform.
	Dist keyDist
	// Timeout is how long after the cell's end an outstanding request may
	// still take before it is abandoned as an error.
	Timeout time.Duration
	// ServerPIDs are local server processes whose CPU time over the
	// measured phase is reported, summed (Linux /proc only).
	ServerPIDs []int
	// MetricsURLs are the /metrics of the nodes whose forwarding counters
	// are read at the start and the end of the measured phase; empty reads
	// none.
	MetricsURLs []string
}

// validate reports a cell that cannot run or would not end.
func (c cellConfig) validate() error {
	switch {
	case c.Concurrency < 1:
		return errors.New("loadgen: concurrency must be at least 1")
	case c.Keys < 1:
		return errors.New("loadgen: keys must be at least 1")
	case c.Duration < 0 || c.Requests < 0 || c.Warmup < 0 || c.Timeout < 0:
		return errors.New("loadgen: negative duration, request count, warmup or timeout")
	case c.Duration == 0 && c.Requests == 0:
		return errors.New("loadgen: set a duration or a request count, or both")
	}
	return nil
}

// callerStats is what one caller measured.
type callerStats struct {
	hist     histogram
	allowed  uint64
	denied   uint64
	errors   uint64
	firstErr error
	last     time.Time // end of its last measured request
}

// cellResult is the outcome of one cell, as printed and as written with
// -json (one object per line).
type cellResult struct {
	Target      string   `json:"target"`
	Label       string   `json:"label,omitempty"`
	Addrs       []string `json:"addrs"`
	Limit       string   `json:"limit"`
	Concurrency int      `json:"concurrency"`
	Keys        int      `json:"keys"`
	Dist        string   `json:"dist,omitempty"` // key distribution: uniform or zipf
	Seconds     float64  `json:"seconds"`        // length of the measured phase
	Decisions   uint64   `json:"decisions"`      // allowed + denied
	Allowed     uint64   `json:"allowed"`
	Denied      uint64   `json:"denied"`
	Errors      uint64   `json:"errors"`
	Throughput  float64  `json:"throughput_rps"` // decisions per second
	MeanUs      float64  `json:"mean_us"`
	P50Us       float64  `json:"p50_us"`
	P99Us       float64  `json:"p99_us"`
	P999Us      float64  `json:"p999_us"`
	MaxUs       float64  `json:"max_us"`
	FirstError  string   `json:"first_error,omitempty"`
	// CPU time used over the measured phase by the server process named
	// with -server-pid and by the load generator itself; zero when unknown.
	ServerCPUSeconds  float64 `json:"server_cpu_s,omitempty"`
	LoadgenCPUSeconds float64 `json:"loadgen_cpu_s,omitempty"`
	// Forwarding over the measured phase, summed over the nodes named with
	// -metrics: requests forwarded to an owner, the batches they went in,
	// and forwards that failed (the node then decided from its local
	// ceiling). Scraped says they were read; MetricsError why not.
	Scraped        bool    `json:"scraped,omitempty"`
	Forwarded      float64 `json:"forwarded,omitempty"`
	ForwardBatches float64 `json:"forward_batches,omitempty"`
	ForwardErrors  float64 `json:"forward_errors,omitempty"`
	MetricsError   string  `json:"metrics_error,omitempty"`
	// hist holds the latencies behind the percentiles, so that slices of
	// one cell merge (rounds.go); nil before addCallers.
	hist *histogram
}

// cpuOf returns the CPU time of processes pids, summed; zero for none.
func cpuOf(pids []int) (time.Duration, error) {
	var total time.Duration
	for _, pid := range pids {
		d, err := procCPU(pid)
		if err != nil {
			return 0, err
		}
		total += d
	}
	return total, nil
}

// meanBatch returns the mean forwarded batch size, or zero when nothing
// was forwarded.
func (r cellResult) meanBatch() float64 {
	if r.ForwardBatches <= 0 {
		return 0
	}
	return r.Forwarded / r.ForwardBatches
}

// forwardsPerDecision returns the requests forwarded per decision (per
// round trip for leases, whose acquire and release may both be forwarded).
func (r cellResult) forwardsPerDecision() float64 {
	if r.Decisions == 0 {
		return 0
	}
	return r.Forwarded / float64(r.Decisions)
}

// serverCPUPerDecision returns the server's CPU time per decision in
// microseconds, or zero when unknown.
func (r cellResult) serverCPUPerDecision() float64 {
	if r.Decisions == 0 {
		return 0
	}
	return r.ServerCPUSeconds * 1e6 / float64(r.Decisions)
}

// loadgenCPUPerDecision returns the load generator's CPU time per decision
// in microseconds, or zero when unknown.
func (r cellResult) loadgenCPUPerDecision() float64 {
	if r.Decisions == 0 {
		return 0
	}
	return r.LoadgenCPUSeconds * 1e6 / float64(r.Decisions)
}

// scrape reads the forwarding counters of urls with a bounded wait; it
// reads nothing when urls is empty.
func scrape(ctx context.Context, urls []string) (forwardStats, error) {
	if len(urls) == 0 {
		return forwardStats{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// A fresh connection per scrape, closed after: no idle connection
	// outlives the cell.
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	return scrapeForward(ctx, &http.Client{Transport: tr}, urls)
}

// runCell runs one cell against t. Latency is measured from just before a
// request is sent to just after its answer is decoded, and only for
// requests that start in the measured phase; failed requests are counted,
// not timed.
func runCell(ctx context.Context, t target, cfg cellConfig) (cellResult, error) {
	if err := cfg.validate(); err != nil {
		return cellResult{}, err
	}
	callers, err := openCallers(ctx, t, cfg.Concurrency)
	defer func() {
		for _, c := range callers {
			_ = c.close()
		}
	}()
	if err != nil {
		return cellResult{}, err
	}

	plan := planCell(time.Now(), cfg)
	cctx, cancel := plan.context(ctx)
	defer cancel()
	stats := make([]callerStats, len(callers))
	var wg sync.WaitGroup
	for i, c := range callers {
		wg.Go(func() {
			stats[i].run(cctx, c, newKeyPicker(cfg.Dist, cfg.Keys, uint64(i+1)), plan)
		})
	}
	// Sample CPU times when the measured phase starts and after it ends.
	sleepUntil(cctx, plan.measure)
	before := readUsage(ctx, cfg)
	wg.Wait()
	after := readUsage(ctx, cfg)

	res := cellResult{Concurrency: cfg.Concurrency, Keys: cfg.Keys, Dist: cfg.Dist.String()}
	res.addUsage(cfg, before, after)
	res.addCallers(stats, plan.measure)
	return res, ctx.Err()
}

// openCallers creates the n callers of t, in order. On an error it returns
// the callers created so far, which the caller must close as it closes a
// full set.
func openCallers(ctx context.Context, t target, n int) ([]caller, error) {
	callers := make([]caller, 0, n)
	for i := range n {
		c, err := t.newCaller(ctx, i)
		if err != nil {
			return callers, fmt.Errorf("loadgen: caller %d: %w", i, err)
		}
		callers = append(callers, c)
	}
	return callers, nil
}

// cellPlan is when a cell's phases begin and end, and its request budget.
// It is shared by the cell's callers; only budget changes.
type cellPlan struct {
	measure  time.Time    // the measured phase starts (after the warm-up)
	end      time.Time    // the measured phase ends; zero: no time bound
	deadline time.Time    // outstanding requests are abandoned; zero: never
	counted  bool         // the measured phase is bounded by budget
	budget   atomic.Int64 // requests the measured phase may still start
}

// planCell plans a cell of cfg starting at start.
func planCell(start time.Time, cfg cellConfig) *cellPlan {
	p := &cellPlan{measure: start.Add(cfg.Warmup), counted: cfg.Requests > 0}
	if cfg.Duration > 0 {
		p.end = p.measure.Add(cfg.Duration)
		p.deadline = p.end.Add(cfg.Timeout)
	}
	p.budget.Store(cfg.Requests)
	return p
}

// context returns ctx bounded by the plan's deadline, if it has one.
func (p *cellPlan) context(ctx context.Context) (context.Context, context.CancelFunc) {
	if p.deadline.IsZero() {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, p.deadline)
}

// admit decides on a request about to start at t0: whether to send it,
// and whether it is measured. It refuses one at or after the end of the
// measured phase or, in a counted cell, one beyond the budget (which it
// spends).
func (p *cellPlan) admit(t0 time.Time) (send, measured bool) {
	if !p.end.IsZero() && !t0.Before(p.end) {
		return false, false
	}
	measured = !t0.Before(p.measure)
	if measured && p.counted && p.budget.Add(-1) < 0 {
		return false, false
	}
	return true, measured
}

// run is one caller's closed loop: it sends requests on keys drawn from
// pick, one at a time, until ctx ends or the plan admits no more, and
// records the measured ones in st.
func (st *callerStats) run(ctx context.Context, c caller, pick *keyPicker, p *cellPlan) {
	for ctx.Err() == nil {
		t0 := time.Now()
		send, measured := p.admit(t0)
		if !send {
			return
		}
		allowed, err := c.take(ctx, pick.next())
		t1 := time.Now()
		if measured {
			st.record(t0, t1, allowed, err)
		}
	}
}

// record counts one measured request that started at t0 and ended at t1:
// an error is counted (the first one kept), a decision is counted and
// timed.
func (st *callerStats) record(t0, t1 time.Time, allowed bool, err error) {
	st.last = t1
	switch {
	case err != nil:
		st.errors++
		if st.firstErr == nil {
			st.firstErr = err
		}
	case allowed:
		st.allowed++
		st.hist.record(t1.Sub(t0))
	default:
		st.denied++
		st.hist.record(t1.Sub(t0))
	}
}

// sleepUntil waits until t or until ctx ends, whichever comes first.
func sleepUntil(ctx context.Context, t time.Time) {
	d := time.Until(t)
	if d <= 0 {
		return
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
}

// usage is one reading of the counters a cell reports as differences over
// its measured phase, each with the error that spoiled it.
type usage struct {
	server    time.Duration // CPU time of cfg.ServerPIDs, summed
	serverErr error
	self      time.Duration // CPU time of this process
	selfErr   error
	fwd       forwardStats // forwarding counters of cfg.MetricsURLs
	fwdErr    error
}

// readUsage reads the server CPU, this process's CPU and the forwarding
// counters, in that order.
func readUsage(ctx context.Context, cfg cellConfig) usage {
	var u usage
	u.server, u.serverErr = cpuOf(cfg.ServerPIDs)
	u.self, u.selfErr = procCPU(0)
	u.fwd, u.fwdErr = scrape(ctx, cfg.MetricsURLs)
	return u
}

// addUsage sets r's CPU times and forwarding counts from readings before
// and after the measured phase. A figure either reading failed is left at
// zero; a failed scrape is reported in MetricsError instead.
func (r *cellResult) addUsage(cfg cellConfig, before, after usage) {
	if len(cfg.ServerPIDs) > 0 && before.serverErr == nil && after.serverErr == nil {
		r.ServerCPUSeconds = (after.server - before.server).Seconds()
	}
	if len(cfg.MetricsURLs) > 0 {
		if err := errors.Join(before.fwdErr, after.fwdErr); err != nil {
			r.MetricsError = err.Error()
		} else {
			d := after.fwd.sub(before.fwd)
			r.Scraped, r.Forwarded, r.ForwardBatches, r.ForwardErrors = true, d.Requests, d.Batches, d.Errors
		}
	}
	if before.selfErr == nil && after.selfErr == nil {
		r.LoadgenCPUSeconds = (after.self - before.self).Seconds()
	}
}

// addCallers sums the callers' counts and latencies into r. The measured
// phase is taken to run from measure to the end of the last measured
// request, which is what Seconds and Throughput are over.
func (r *cellResult) addCallers(stats []callerStats, measure time.Time) {
	var h histogram
	last := measure
	for i := range stats {
		st := &stats[i]
		h.merge(&st.hist)
		r.Allowed += st.allowed
		r.Denied += st.denied
		r.Errors += st.errors
		if st.firstErr != nil && r.FirstError == "" {
			r.FirstError = st.firstErr.Error()
		}
		if st.last.After(last) {
			last = st.last
		}
	}
	r.Decisions = r.Allowed + r.Denied
	r.Seconds = last.Sub(measure).Seconds()
	r.hist = &h
	r.summarize()
}

// summarize sets r's throughput from its decisions and seconds, and its
// latencies from its histogram.
func (r *cellResult) summarize() {
	r.Throughput = 0
	if r.Seconds > 0 {
		r.Throughput = float64(r.Decisions) / r.Seconds
	}
	h := r.hist
	if h == nil {
		h = &histogram{}
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	r.MeanUs = us(h.mean())
	r.P50Us = us(h.quantile(0.50))
	r.P99Us = us(h.quantile(0.99))
	r.P999Us = us(h.quantile(0.999))
	r.MaxUs = us(time.Duration(h.max))
}
