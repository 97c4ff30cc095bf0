package jepsen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The soak's bulk load: unrecorded takes on uniform keys, sent through a
// load balancer, counted by answer kind.

// The answer kinds of a bulk take. An error kind starts with ErrorAnswer.
const (
	AnswerAllowed = "allowed" // HTTP 200, allowed
	AnswerDenied  = "denied"  // HTTP 200 (or 429), not allowed
	// ErrorAnswer starts every error kind: "error <status> <error field>"
	// for any other HTTP answer (e.g. "error 503 limiter_overloaded"),
	// "error transport <class>" when no answer came even after the
	// balancer's one retry, or the request timed out.
	ErrorAnswer = "error"
	// RerouteAnswer starts "rerouted <class>": a request whose node refused
	// or dropped its connection, which the balancer took out of rotation
	// and sent the request to another node, as a real load balancer does.
	// Not an answer; the retry's answer is counted too.
	RerouteAnswer = "rerouted"
	// SlowAnswer starts "slow ≥<band>": an answer (of any kind) that took
	// at least that long, counted in every band it reaches. Not an answer:
	// it says how long the callers waited, above all around the steps.
	SlowAnswer = "slow"
)

// slowBands are the latency bands SlowAnswer counts, ascending, and
// slowKinds their kinds.
var (
	slowBands = []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, time.Second}
	slowKinds = func() []string {
		out := make([]string, len(slowBands))
		for i, b := range slowBands {
			out[i] = fmt.Sprintf("%s ≥%v", SlowAnswer, b)
		}
		return out
	}()
)

// SlowKinds returns the SlowAnswer kinds an answer that took d counts in:
// those of every band it reaches. The slice must not be modified.
func SlowKinds(d time.Duration) []string {
	n := 0
	for n < len(slowBands) && d >= slowBands[n] {
		n++
	}
	return slowKinds[:n]
}

// ClassifyTake returns the answer kind of a /v1/take answer.
func ClassifyTake(status int, body []byte) string {
	switch status {
	case http.StatusOK:
		var r struct {
			Allowed *bool `json:"allowed"`
		}
		if json.Unmarshal(body, &r) != nil || r.Allowed == nil {
			return ErrorAnswer + " 200 bad-reply"
		}
		if *r.Allowed {
			return AnswerAllowed
		}
		return AnswerDenied
	case http.StatusTooManyRequests:
		return AnswerDenied
	}
	var e struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	if e.Error == "" {
		e.Error = "-"
	}
	return fmt.Sprintf("%s %d %s", ErrorAnswer, status, e.Error)
}

// TransportClass names why a request got no HTTP answer: refused (nothing
// listens: the node is down), reset (the node died mid-request or closed
// the connection), timeout (no answer within the deadline) or other.
func TransportClass(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.EPIPE):
		return "reset"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "other"
}

// Reroutable reports whether a request that failed with class goes to
// another node: refused and reset say the node is gone; a timeout may
// have been decided and is an error answer.
func Reroutable(class string) bool { return class == "refused" || class == "reset" }

// Answers counts answers by kind and keeps the first MaxErrors error
// answers with their instant and node. It is safe for concurrent use.
type Answers struct {
	// Clock stamps the error answers (the history's Recorder.Now); nil
	// stamps 0.
	Clock func() int64

	mu     sync.Mutex
	n      map[string]int64
	errors []ErrorEvent
}

// MaxErrors is how many error answers Answers keeps in detail.
const MaxErrors = 10_000

// ErrorEvent is one error answer: when it came back, its kind, and the
// node that gave it (the last one asked).
type ErrorEvent struct {
	At   int64  `json:"at_ns"`
	Kind string `json:"kind"`
	Node string `json:"node"`
}

// AddError counts one error answer of kind from node and keeps it.
func (a *Answers) AddError(kind, node string) {
	var at int64
	if a.Clock != nil {
		at = a.Clock()
	}
	a.mu.Lock()
	if len(a.errors) < MaxErrors {
		a.errors = append(a.errors, ErrorEvent{At: at, Kind: kind, Node: node})
	}
	a.mu.Unlock()
	a.Add(kind)
}

// Errors returns a copy of the error answers kept.
func (a *Answers) Errors() []ErrorEvent {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.errors)
}

// Add counts one answer of kind.
func (a *Answers) Add(kind string) {
	a.mu.Lock()
	if a.n == nil {
		a.n = make(map[string]int64)
	}
	a.n[kind]++
	a.mu.Unlock()
}

// Counts returns a copy of the counts.
func (a *Answers) Counts() map[string]int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]int64, len(a.n))
	for k, v := range a.n {
		out[k] = v
	}
	return out
}

// AnswerTotals sums counts into answers (allowed, denied and errors: every
// request's final answer) and errors (the kinds starting with
// ErrorAnswer).
func AnswerTotals(counts map[string]int64) (answers, errs int64) {
	for k, v := range counts {
		switch {
		case k == AnswerAllowed, k == AnswerDenied:
			answers += v
		case strings.HasPrefix(k, ErrorAnswer):
			answers += v
			errs += v
		}
	}
	return answers, errs
}

// Balancer spreads requests over the nodes in rotation, round robin, like
// a load balancer in front of the cluster: a node leaves the rotation when
// the operator drains it (Out) or when a request to it finds nothing
// listening (a passive health check), and comes back when the operator
// says it is ready (In). It is safe for concurrent use.
type Balancer struct {
	mu   sync.Mutex
	urls []string // node i at i-1
	in   []bool
	next int
}

// NewBalancer returns a Balancer over urls (node i at urls[i-1]) with no
// node in rotation.
func NewBalancer(urls []string) *Balancer {
	return &Balancer{urls: urls, in: make([]bool, len(urls))}
}

// In puts node i in rotation; Out takes it out.
func (b *Balancer) In(i int)  { b.set(i, true) }
func (b *Balancer) Out(i int) { b.set(i, false) } //nolint:revive // documented with In

func (b *Balancer) set(i int, in bool) {
	b.mu.Lock()
	b.in[i-1] = in
	b.mu.Unlock()
}

// Pick returns the next node in rotation other than avoid (0 avoids
// none), or false when there is none.
func (b *Balancer) Pick(avoid int) (int, string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for range len(b.urls) {
		b.next = (b.next + 1) % len(b.urls)
		if b.in[b.next] && b.next+1 != avoid {
			return b.next + 1, b.urls[b.next], true
		}
	}
	return 0, "", false
}

// Rotation returns the nodes in rotation.
func (b *Balancer) Rotation() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []int
	for i, in := range b.in {
		if in {
			out = append(out, i+1)
		}
	}
	return out
}

// BulkLoad is the soak's unrecorded load: Callers callers, each taking
// cost 1 from a key of Limit drawn uniformly from Keys keys, through
// Balancer, at Rate requests per second in all (0: as fast as they can,
// the calibration).
type BulkLoad struct {
	Limit    string
	Keys     int
	Callers  int
	Rate     float64
	Deadline time.Duration
	Seed     uint64
	Balancer *Balancer
	Answers  *Answers
	sent     atomic.Int64
}

// Sent is how many requests the load has finished (final answers).
func (l *BulkLoad) Sent() int64 { return l.sent.Load() }

// Run sends the load until ctx ends.
func (l *BulkLoad) Run(ctx context.Context) {
	tr := &http.Transport{MaxIdleConnsPerHost: l.Callers, IdleConnTimeout: 30 * time.Second}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	for c := range l.Callers {
		rnd := rand.New(rand.NewPCG(l.Seed, uint64(1000+c)))
		wg.Go(func() { l.caller(ctx, hc, rnd) })
	}
	wg.Wait()
}

func (l *BulkLoad) caller(ctx context.Context, hc *http.Client, rnd *rand.Rand) {
	var every time.Duration
	if l.Rate > 0 {
		every = time.Duration(float64(time.Second) * float64(l.Callers) / l.Rate)
	}
	next := time.Now()
	if every > 0 {
		next = next.Add(time.Duration(rnd.Int64N(int64(every))))
	}
	for ctx.Err() == nil {
		if every > 0 {
			if err := sleepCtx(ctx, time.Until(next)); err != nil {
				return
			}
			// Paced from the schedule, not from the last answer: a slow
			// answer is made up for, up to one interval behind.
			next = next.Add(every)
			if behind := time.Now().Add(-every); next.Before(behind) {
				next = behind
			}
		}
		body := []byte(`{"checks":[{"limit":"` + l.Limit + `","key":"u-` + strconv.Itoa(rnd.IntN(l.Keys)) + `","cost":1}]}`)
		start := time.Now()
		kind, node, ok := l.take(ctx, hc, body)
		if !ok {
			return // the run ended mid-request
		}
		for _, k := range SlowKinds(time.Since(start)) {
			l.Answers.Add(k)
		}
		if strings.HasPrefix(kind, ErrorAnswer) {
			l.Answers.AddError(kind, node)
		} else {
			l.Answers.Add(kind)
		}
		l.sent.Add(1)
	}
}

// take sends one take through the balancer, with one retry on another
// node when the first refused or dropped the connection, and returns the
// answer kind and the node that gave it; false when ctx ended first.
func (l *BulkLoad) take(ctx context.Context, hc *http.Client, body []byte) (string, string, bool) {
	avoid := 0
	for attempt := 0; ; attempt++ {
		i, url, ok := l.Balancer.Pick(avoid)
		if !ok {
			return ErrorAnswer + " transport no-node-in-rotation", "", true
		}
		status, data, err := post(ctx, hc, url+"/v1/take", body, l.Deadline)
		if ctx.Err() != nil {
			return "", "", false
		}
		if err == nil {
			return ClassifyTake(status, data), Name(i), true
		}
		class := TransportClass(err)
		if !Reroutable(class) || attempt > 0 {
			return ErrorAnswer + " transport " + class, Name(i), true
		}
		l.Balancer.Out(i)
		l.Answers.Add(RerouteAnswer + " " + class)
		avoid = i
	}
}

func post(ctx context.Context, hc *http.Client, url string, body []byte, d time.Duration) (int, []byte, error) {
	rctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, data, err
}

// answerRows returns counts' kinds in a stable order: allowed, denied,
// then the errors and the reroutes by name.
func answerRows(counts map[string]int64) []string {
	ks := sortedKeys(counts)
	slices.SortStableFunc(ks, func(a, b string) int { return answerRank(a) - answerRank(b) })
	return ks
}

func answerRank(k string) int {
	switch {
	case k == AnswerAllowed:
		return 0
	case k == AnswerDenied:
		return 1
	case strings.HasPrefix(k, ErrorAnswer):
		return 2
	case strings.HasPrefix(k, RerouteAnswer):
		return 3
	}
	return 4
}
