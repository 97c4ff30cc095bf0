package jepsen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Workload is the traffic of a run: paced workers on every node, a share of
// requests on the hot keys (one per node, so every node owns one) and the
// rest spread over many cold keys, with weighted costs.
type Workload struct {
	HotLimit, ColdLimit string
	HotKeys, ColdKeys   []string
	WorkersPerNode      int
	RatePerWorker       float64       // requests per second per worker
	HotShare            float64       // share of requests on hot keys
	Deadline            time.Duration // per request; past it the op is a timeout
	Seed                uint64
	// RoundRobin makes every worker a caller that asks the nodes in turn
	// (its first request goes to a node of its own, each next one to the
	// next node) instead of always the same node: WorkersPerNode × N
	// callers spread evenly, as behind a load balancer with no routing.
	RoundRobin bool
	// UnitCost makes every hot request cost 1 instead of the weighted
	// 1/2/3.
	UnitCost bool
}

// hotCost and coldCost are the weighted costs: 1 (70%), 2 (20%), 3 (10%)
// for hot keys; 1 (80%) or 2 for cold keys.
func hotCost(r *rand.Rand) int64 {
	switch x := r.Float64(); {
	case x < 0.7:
		return 1
	case x < 0.9:
		return 2
	default:
		return 3
	}
}

func coldCost(r *rand.Rand) int64 {
	if r.Float64() < 0.8 {
		return 1
	}
	return 2
}

// Recorder collects ops from concurrent clients. The zero value is not
// usable; use NewRecorder.
type Recorder struct {
	base time.Time
	id   atomic.Int64

	mu  sync.Mutex // guards ops and events
	ops []Op
	ev  []Event
}

// NewRecorder returns a Recorder whose time base is now.
func NewRecorder() *Recorder { return &Recorder{base: time.Now()} }

// Now is the time since the base in nanoseconds (monotonic).
func (r *Recorder) Now() int64 { return int64(time.Since(r.base)) }

// Event records a harness event now and returns its time.
func (r *Recorder) Event(kind, detail string) int64 {
	at := r.Now()
	r.mu.Lock()
	r.ev = append(r.ev, Event{At: at, Kind: kind, Detail: detail})
	r.mu.Unlock()
	return at
}

func (r *Recorder) add(o Op) {
	r.mu.Lock()
	r.ops = append(r.ops, o)
	r.mu.Unlock()
}

// Ops returns a copy of the recorded ops.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Op(nil), r.ops...)
}

// Events returns a copy of the recorded events.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.ev...)
}

// RunClients runs wl against the nodes (name -> base URL) until ctx ends
// and records every request in rec. It returns when all workers stopped.
func RunClients(ctx context.Context, nodes map[string]string, wl Workload, rec *Recorder) {
	idle := wl.WorkersPerNode + 1
	if wl.RoundRobin {
		idle = wl.WorkersPerNode*len(nodes) + 1 // every caller may be at one node at once
	}
	tr := &http.Transport{MaxIdleConnsPerHost: idle, IdleConnTimeout: 10 * time.Second}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	names := sortedKeys(nodes)
	urls := make([]string, len(names))
	for i, name := range names {
		urls[i] = nodes[name] + "/v1/take"
	}
	client := 0
	for ni := range names {
		for range wl.WorkersPerNode {
			client++
			w := worker{
				id: client, names: names[ni : ni+1], urls: urls[ni : ni+1], wl: wl, hc: hc, rec: rec,
				rnd: rand.New(rand.NewPCG(wl.Seed, uint64(client))),
			}
			if wl.RoundRobin {
				w.names, w.urls, w.next = names, urls, client
			}
			wg.Go(func() { w.run(ctx) })
		}
	}
	wg.Wait()
}

// worker is one paced caller. It asks names[next % len(names)] at
// urls[same], advancing next after every request: one node, or every node
// in turn (Workload.RoundRobin).
type worker struct {
	id    int
	names []string
	urls  []string
	next  int
	wl    Workload
	hc    *http.Client
	rec   *Recorder
	rnd   *rand.Rand
}

func (w *worker) run(ctx context.Context) {
	every := time.Duration(float64(time.Second) / w.wl.RatePerWorker)
	// Spread the workers' phases so they do not fire in lockstep.
	t := time.NewTimer(time.Duration(w.rnd.Int64N(int64(every))))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		w.once(ctx)
		t.Reset(max(every-time.Since(start), 0))
	}
}

// exchange sends one request for o (a JSON body when body is not nil)
// with deadline d, stamping o's ID, Call and Return on r's clock. answered
// is false when no HTTP answer came, and o's Result and Err then say why:
// Failed for a refused connection (nothing was sent), Timeout otherwise.
// cut reports that ctx, the run, ended mid-request: the op is not part of
// the history.
func (r *Recorder) exchange(ctx context.Context, hc *http.Client, o *Op, d time.Duration, method, url string, body any) (status int, data []byte, answered, cut bool) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	rctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	o.ID = r.id.Add(1)
	o.Call = r.Now()
	req, _ := http.NewRequestWithContext(rctx, method, url, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err == nil {
		data, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	o.Return = r.Now()
	switch {
	case err != nil && ctx.Err() != nil:
		return 0, nil, false, true
	case err != nil && errors.Is(err, syscall.ECONNREFUSED):
		o.Result, o.Err = Failed, "connection refused"
	case err != nil:
		o.Result, o.Err = Timeout, err.Error()
	}
	if resp != nil {
		o.Status = resp.StatusCode
	}
	return o.Status, data, err == nil, false
}

// otherStatus records an answer the op's kind does not expect: a 4xx or
// 503 is a definite error that spent nothing, anything else (a 500, say)
// is indeterminate.
func (o *Op) otherStatus(status int, data []byte) {
	if status < 500 || status == http.StatusServiceUnavailable {
		o.Result, o.Err = Failed, fmt.Sprintf("status %d: %.100s", status, data)
		return
	}
	o.Result, o.Err = Timeout, fmt.Sprintf("status %d: %.100s", status, data)
}

type takeReply struct {
	Allowed bool `json:"allowed"`
	Results []struct {
		Source       string `json:"source"`
		Remaining    int64  `json:"remaining"`
		ResetAfterMs int64  `json:"reset_after_ms"`
		Evidence     *struct {
			Decider     string `json:"decider"`
			DecidedAtNs int64  `json:"decided_at_ns"`
			Instance    string `json:"instance"`
		} `json:"evidence"`
	} `json:"results"`
}

// once sends one take and records it.
func (w *worker) once(ctx context.Context) {
	at := w.next % len(w.names)
	w.next++
	o := Op{Client: w.id, Node: w.names[at]}
	if w.rnd.Float64() < w.wl.HotShare {
		o.Limit, o.Key, o.Cost = w.wl.HotLimit, w.wl.HotKeys[w.rnd.IntN(len(w.wl.HotKeys))], hotCost(w.rnd)
		if w.wl.UnitCost {
			o.Cost = 1
		}
	} else {
		o.Limit, o.Key, o.Cost = w.wl.ColdLimit, w.wl.ColdKeys[w.rnd.IntN(len(w.wl.ColdKeys))], coldCost(w.rnd)
	}
	body := map[string]any{"checks": []map[string]any{{"limit": o.Limit, "key": o.Key, "cost": o.Cost}}, "evidence": true}
	status, data, answered, cut := w.rec.exchange(ctx, w.hc, &o, w.wl.Deadline, http.MethodPost, w.urls[at], body)
	if cut {
		return // the run ended mid-request: not part of the history
	}
	switch {
	case !answered:
	case status == http.StatusOK:
		var rep takeReply
		if jerr := json.Unmarshal(data, &rep); jerr != nil {
			o.Result, o.Err = Timeout, "bad reply: "+jerr.Error()
			break
		}
		o.Result = Denied
		if rep.Allowed {
			o.Result = Allowed
		}
		if len(rep.Results) > 0 {
			r := rep.Results[0]
			o.Source, o.Remaining, o.ResetAfterMs = r.Source, r.Remaining, r.ResetAfterMs
			if ev := r.Evidence; ev != nil {
				o.Decider, o.DecidedAt, o.Instance = ev.Decider, ev.DecidedAtNs, ev.Instance
			}
		}
	default:
		o.otherStatus(status, data)
	}
	w.rec.add(o)
}
