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
	callers := make([]caller, 0, cfg.Concurrency)
	defer func() {
		for _, c := range callers {
			_ = c.close()
		}
	}()
	for i := range cfg.Concurrency {
		c, err := t.newCaller(ctx, i)
		if err != nil {
			return cellResult{}, fmt.Errorf("loadgen: caller %d: %w", i, err)
		}
		callers = append(callers, c)
	}

	start := time.Now()
	measure := start.Add(cfg.Warmup)
	var end, deadline time.Time // zero: no time bound
	if cfg.Duration > 0 {
		end = measure.Add(cfg.Duration)
		deadline = end.Add(cfg.Timeout)
	}
	var (
		cctx   context.Context
		cancel context.CancelFunc
	)
	if deadline.IsZero() {
		cctx, cancel = context.WithCancel(ctx)
	} else {
		cctx, cancel = context.WithDeadline(ctx, deadline)
	}
	defer cancel()
	var budget atomic.Int64
	budget.Store(cfg.Requests)

	stats := make([]callerStats, len(callers))
	var wg sync.WaitGroup
	for i, c := range callers {
		wg.Go(func() {
			st := &stats[i]
			pick := newKeyPicker(cfg.Dist, cfg.Keys, uint64(i+1))
			for cctx.Err() == nil {
				t0 := time.Now()
				if !end.IsZero() && !t0.Before(end) {
					return
				}
				measured := !t0.Before(measure)
				if measured && cfg.Requests > 0 && budget.Add(-1) < 0 {
					return
				}
				allowed, err := c.take(cctx, pick.next())
				t1 := time.Now()
				if !measured {
					continue
				}
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
		})
	}
	// Sample CPU times when the measured phase starts and after it ends.
	if d := time.Until(measure); d > 0 {
		timer := time.NewTimer(d)
		select {
		case <-timer.C:
		case <-cctx.Done():
		}
		timer.Stop()
	}
	srv0, srvErr := cpuOf(cfg.ServerPIDs)
	self0, selfErr := procCPU(0)
	fwd0, fwdErr := scrape(ctx, cfg.MetricsURLs)
	wg.Wait()
	srv1, srvErr1 := cpuOf(cfg.ServerPIDs)
	self1, selfErr1 := procCPU(0)
	fwd1, fwdErr1 := scrape(ctx, cfg.MetricsURLs)

	res := cellResult{Concurrency: cfg.Concurrency, Keys: cfg.Keys, Dist: cfg.Dist.String()}
	if len(cfg.ServerPIDs) > 0 && srvErr == nil && srvErr1 == nil {
		res.ServerCPUSeconds = (srv1 - srv0).Seconds()
	}
	if len(cfg.MetricsURLs) > 0 {
		if err := errors.Join(fwdErr, fwdErr1); err != nil {
			res.MetricsError = err.Error()
		} else {
			d := fwd1.sub(fwd0)
			res.Scraped, res.Forwarded, res.ForwardBatches, res.ForwardErrors = true, d.Requests, d.Batches, d.Errors
		}
	}
	if selfErr == nil && selfErr1 == nil {
		res.LoadgenCPUSeconds = (self1 - self0).Seconds()
	}
	var h histogram
	last := measure
	for i := range stats {
		st := &stats[i]
		h.merge(&st.hist)
		res.Allowed += st.allowed
		res.Denied += st.denied
		res.Errors += st.errors
		if st.firstErr != nil && res.FirstError == "" {
			res.FirstError = st.firstErr.Error()
		}
		if st.last.After(last) {
			last = st.last
		}
	}
	res.Decisions = res.Allowed + res.Denied
	res.Seconds = last.Sub(measure).Seconds()
	if res.Seconds > 0 {
		res.Throughput = float64(res.Decisions) / res.Seconds
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	res.MeanUs = us(h.mean())
	res.P50Us = us(h.quantile(0.50))
	res.P99Us = us(h.quantile(0.99))
	res.P999Us = us(h.quantile(0.999))
	res.MaxUs = us(time.Duration(h.max))
	if err := ctx.Err(); err != nil {
		return res, err
	}
	return res, nil
}
