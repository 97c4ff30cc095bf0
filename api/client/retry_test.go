package client

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/api/weirv1"
)

// fakeClock advances only when slept on, and records every sleep.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Now()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.sleeps = append(c.sleeps, d)
	return nil
}

func (c *fakeClock) slept() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

func TestBackoffBounds(t *testing.T) {
	base, maxD := 10*time.Millisecond, time.Second
	for attempt := range 70 {
		capD := min(maxD, base<<min(attempt, 20))
		for _, u := range []float64{0, 0.25, 0.5, 0.999999} {
			d := backoff(attempt, base, maxD, u)
			if d < 0 || d > capD {
				t.Fatalf("backoff(%d, u=%v) = %v, outside [0, %v]", attempt, u, d, capD)
			}
			if want := time.Duration(u * float64(capD)); d != want {
				t.Fatalf("backoff(%d, u=%v) = %v, want %v (full jitter)", attempt, u, d, want)
			}
		}
	}
	if d := backoff(3, base, maxD, 0.999999); d < 79*time.Millisecond {
		t.Fatalf("the cap does not double: retry 3 at most %v", d)
	}
}

func TestRetryBudgetSteps(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	b := newRetryBudget(RetryPolicy{Budget: 0.1, BudgetWindow: time.Second, MinRetries: -1})
	steps := []struct {
		at       time.Time
		requests int  // requests counted at `at` first
		retry    bool // then ask for a retry
		want     bool
	}{
		{at: ms(0), requests: 9, retry: true, want: false},    // 0.9 retries allowed: none
		{at: ms(10), requests: 1, retry: true, want: true},    // 10 requests: one
		{at: ms(20), retry: true, want: false},                // spent
		{at: ms(500), requests: 10, retry: true, want: true},  // 20 requests: two
		{at: ms(600), retry: true, want: false},               // spent
		{at: ms(1005), retry: true, want: false},              // slot 0 slid out: 10 requests, 1 retry left
		{at: ms(1400), retry: true, want: false},              // still 10 requests, 1 retry
		{at: ms(1400), requests: 10, retry: true, want: true}, // 20 requests: two
		{at: ms(1600), retry: true, want: false},              // slot 5 slid out: 10 requests, 1 retry
		{at: ms(400), retry: true, want: false},               // time going backwards: counts stay bounded
		{at: ms(5000), retry: true, want: false},              // an idle window allows nothing
	}
	for i, s := range steps {
		for range s.requests {
			b.requestAt(s.at)
		}
		if s.retry {
			if got := b.retryAt(s.at); got != s.want {
				req, ret := b.totals(s.at)
				t.Fatalf("step %d at %v: retry allowed %v, want %v (window: %d requests, %d retries)", i, s.at.Sub(t0), got, s.want, req, ret)
			}
		}
	}
	floor := newRetryBudget(RetryPolicy{Budget: 0.1, BudgetWindow: time.Second, MinRetries: 2})
	var got []bool
	for range 3 {
		got = append(got, floor.retryAt(t0))
	}
	if !got[0] || !got[1] || got[2] {
		t.Fatalf("MinRetries 2 with no requests allowed %v; want exactly two retries", got)
	}
}

// scripted answers every take with the next of answers (the last repeats)
// and records what it was sent.
type scripted struct {
	mu      sync.Mutex
	answers []func() (*weirv1.TakeResponse, error)
	got     []*weirv1.TakeRequest
}

func (s *scripted) take(req *weirv1.TakeRequest) (*weirv1.TakeResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, req)
	a := s.answers[min(len(s.got)-1, len(s.answers)-1)]
	return a()
}

func (s *scripted) calls() []*weirv1.TakeRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*weirv1.TakeRequest(nil), s.got...)
}

func unavailable() (*weirv1.TakeResponse, error) {
	return nil, status.Error(codes.Unavailable, "connection refused")
}

func allowed() (*weirv1.TakeResponse, error) {
	return &weirv1.TakeResponse{Allowed: true, Results: []*weirv1.Result{{Allowed: true}}}, nil
}

func deniedFor(ms int64) func() (*weirv1.TakeResponse, error) {
	return func() (*weirv1.TakeResponse, error) {
		return &weirv1.TakeResponse{RetryAfterMs: ms, Results: []*weirv1.Result{{RetryAfterMs: ms}}}, nil
	}
}

func newScripted(t *testing.T, opts Options, answers ...func() (*weirv1.TakeResponse, error)) (*Client, *scripted, *fakeClock) {
	t.Helper()
	s := &scripted{answers: answers}
	fs := newFakeServer(1)
	fs.take = s.take
	clock := newFakeClock()
	opts.Clock = clock
	opts.Rand = func() float64 { return 0.5 }
	c, err := NewWith(fakeConn{fs}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c, s, clock
}

var check = api.Check{Limit: "l", Key: "k", Cost: 1}

func TestTakeRetriesTransportFailuresUnderBudget(t *testing.T) {
	c, s, clock := newScripted(t, Options{Retry: RetryPolicy{MaxAttempts: 3, BaseBackoff: 10 * time.Millisecond, Budget: 0.1, MinRetries: -1}}, unavailable)
	for range 100 {
		if _, err := c.Take(t.Context(), check); !errors.Is(err, &api.Error{Code: api.CodeUnavailable}) && err == nil {
			t.Fatal("a failing take succeeded")
		}
	}
	// 10 % of 100 requests: the 10th, 20th, ... request gets one retry;
	// its second retry is past the budget.
	if n := len(s.calls()); n != 110 {
		t.Fatalf("%d attempts reached the server, want 100 + 10 retries", n)
	}
	if st := c.Stats(); st.Takes != 100 || st.Retries != 10 || st.BudgetRefused != 100 {
		t.Fatalf("stats %+v; want 100 takes, 10 retries, 100 refused by the budget (90 first tries, 10 second)", st)
	}
	sleeps := clock.slept()
	if len(sleeps) != 10 {
		t.Fatalf("%d backoff sleeps, want 10", len(sleeps))
	}
	for _, d := range sleeps {
		if d != 5*time.Millisecond { // u = 0.5 of the first retry's 10 ms cap
			t.Fatalf("backoff %v, want 5ms", d)
		}
	}
}

func TestTakeRetryKeepsRequestIDAndSucceeds(t *testing.T) {
	c, s, clock := newScripted(t, Options{}, unavailable, unavailable, allowed)
	resp, err := c.Take(t.Context(), check)
	if err != nil || !resp.Allowed {
		t.Fatalf("take = %+v, %v; want allowed on the third attempt (MinRetries covers a quiet client)", resp, err)
	}
	calls := s.calls()
	if len(calls) != 3 {
		t.Fatalf("%d attempts, want 3", len(calls))
	}
	id := calls[0].GetRequestId()
	if len(id) != 16 {
		t.Fatalf("request id %x, want 16 bytes", id)
	}
	for i, r := range calls[1:] {
		if !bytes.Equal(r.GetRequestId(), id) {
			t.Fatalf("retry %d carries request id %x, want %x", i+1, r.GetRequestId(), id)
		}
	}
	if got := clock.slept(); len(got) != 2 || got[0] != 5*time.Millisecond || got[1] != 10*time.Millisecond {
		t.Fatalf("backoffs %v, want [5ms 10ms] (u = 0.5 of 10ms, 20ms)", got)
	}
	// The next take gets a new id.
	if _, err := c.Take(t.Context(), check); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(s.calls()[3].GetRequestId(), id) {
		t.Fatal("two takes share a request id")
	}
}

func TestTakeNeverRetriesDenialsOrBadInput(t *testing.T) {
	c, s, clock := newScripted(t, Options{}, deniedFor(100))
	resp, err := c.Take(t.Context(), check)
	if err != nil || resp.Allowed {
		t.Fatalf("take = %+v, %v; want a denial", resp, err)
	}
	c2, s2, clock2 := newScripted(t, Options{}, func() (*weirv1.TakeResponse, error) {
		return nil, status.Error(codes.InvalidArgument, "unknown limit")
	})
	_, err = c2.Take(t.Context(), check)
	var apiErr *api.Error
	if !errors.As(err, &apiErr) || apiErr.Code != api.CodeInvalid {
		t.Fatalf("take error %v, want CodeInvalid", err)
	}
	if len(s.calls()) != 1 || len(s2.calls()) != 1 || len(clock.slept())+len(clock2.slept()) != 0 {
		t.Fatalf("attempts %d and %d, sleeps %v %v; want one attempt each, no sleep", len(s.calls()), len(s2.calls()), clock.slept(), clock2.slept())
	}
}

func TestTakeOverSeveralOwnersIsNotRetried(t *testing.T) {
	c, s, _ := newScripted(t, Options{}, unavailable)
	_, err := c.Take(t.Context(), check, api.Check{Limit: "other", Key: "k2", Cost: 1})
	if err == nil || len(s.calls()) != 1 {
		t.Fatalf("err %v after %d attempts; want one attempt: without a shared owner a retry could spend twice", err, len(s.calls()))
	}
	// One hash tag: one owner whatever the limits, so it is retried.
	c2, s2, _ := newScripted(t, Options{}, unavailable, allowed)
	if _, err := c2.Take(t.Context(), api.Check{Limit: "a", Key: "{t}x"}, api.Check{Limit: "b", Key: "{t}y"}); err != nil || len(s2.calls()) != 2 {
		t.Fatalf("hash-tagged take: %v after %d attempts; want success on the retry", err, len(s2.calls()))
	}
}

func TestWaitSleepsRetryAfterPlusJitter(t *testing.T) {
	c, s, clock := newScripted(t, Options{WaitJitter: 0.2}, deniedFor(200), deniedFor(100), allowed)
	resp, err := c.Wait(t.Context(), check)
	if err != nil || !resp.Allowed {
		t.Fatalf("Wait = %+v, %v; want allowed", resp, err)
	}
	got := clock.slept()
	want := []time.Duration{220 * time.Millisecond, 110 * time.Millisecond} // + 0.5 × 0.2 × retry-after
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] || len(s.calls()) != 3 {
		t.Fatalf("slept %v over %d takes; want %v over 3", got, len(s.calls()), want)
	}
}

func TestWaitStopsAtTheDeadline(t *testing.T) {
	c, s, clock := newScripted(t, Options{}, deniedFor(1000))
	ctx, cancel := context.WithDeadline(t.Context(), clock.Now().Add(500*time.Millisecond))
	defer cancel()
	resp, err := c.Wait(ctx, check)
	if !errors.Is(err, context.DeadlineExceeded) || resp.Allowed || resp.RetryAfter != time.Second {
		t.Fatalf("Wait = %+v, %v; want the denial and DeadlineExceeded", resp, err)
	}
	if len(clock.slept()) != 0 || len(s.calls()) != 1 {
		t.Fatalf("slept %v after %d takes; a wait past the deadline must not sleep", clock.slept(), len(s.calls()))
	}
	// A cancelled context ends the wait at the sleep.
	ctx2, cancel2 := context.WithCancel(t.Context())
	c2, _, clock2 := newScripted(t, Options{}, func() (*weirv1.TakeResponse, error) {
		cancel2()
		return deniedFor(10)()
	})
	if _, err := c2.Wait(ctx2, check); !errors.Is(err, context.Canceled) || len(clock2.slept()) != 0 {
		t.Fatalf("Wait after cancel = %v, slept %v", err, clock2.slept())
	}
}

func TestOptionsValidate(t *testing.T) {
	if err := (Options{}).Validate(); err != nil {
		t.Fatal(err)
	}
	if err := DefaultOptions().Validate(); err != nil {
		t.Fatal(err)
	}
	for name, o := range map[string]Options{
		"attempts": {Retry: RetryPolicy{MaxAttempts: -1}},
		"backoff":  {Retry: RetryPolicy{BaseBackoff: time.Second, MaxBackoff: time.Millisecond}},
		"budget":   {Retry: RetryPolicy{Budget: 1.5}},
		"window":   {Retry: RetryPolicy{BudgetWindow: time.Millisecond}},
		"min":      {Retry: RetryPolicy{MinRetries: -2}},
		"jitter":   {WaitJitter: -0.5},
		"inflight": {StreamInFlight: -1},
		"refresh":  {RefreshInterval: time.Millisecond},
	} {
		if o.Validate() == nil {
			t.Errorf("%s: %+v validated", name, o)
		}
	}
	if _, err := NewWith(fakeConn{newFakeServer(1)}, Options{WaitJitter: -0.5}); err == nil {
		t.Error("NewWith accepted bad options")
	}
}

func TestWaitFor(t *testing.T) {
	for _, tc := range []struct {
		retryAfter time.Duration
		jitter, u  float64
		want       time.Duration
	}{
		{100 * time.Millisecond, 0.2, 0, 100 * time.Millisecond},
		{100 * time.Millisecond, 0.2, 0.999, 119_980_000},
		{100 * time.Millisecond, -1, 0.999, 100 * time.Millisecond}, // no jitter
		{0, 0.2, 0.5, time.Millisecond},                             // never a busy loop
	} {
		if got := waitFor(tc.retryAfter, tc.jitter, tc.u); got != tc.want {
			t.Errorf("waitFor(%v, %v, %v) = %v, want %v", tc.retryAfter, tc.jitter, tc.u, got, tc.want)
		}
	}
}
