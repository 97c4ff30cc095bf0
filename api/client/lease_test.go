package client

import (
	"context"
	"errors"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/api/weirv1"
)

// These tests run the client against fakeServer inside synctest bubbles:
// time.Sleep advances a fake clock, so the renewal loop's timing is exact.

func TestLeaseRenewsOnScheduleAndCloseReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newFakeServer(2)
		c := New(fakeConn{s})
		start := time.Now()
		l, err := c.Acquire(t.Context(), "db", "k", AcquireOptions{TTL: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(10*time.Second + 500*time.Millisecond) // more than three lifetimes
		synctest.Wait()
		renews, releases, held := s.counts()
		if renews != 10 || releases != 0 || held != 1 {
			t.Fatalf("after 10.5s: %d renewals, %d releases, %d held; want 10 (one per 1s), 0, 1", renews, releases, held)
		}
		s.mu.Lock()
		for i, at := range s.renews {
			if want := start.Add(time.Duration(i+1) * time.Second); !at.Equal(want) {
				t.Errorf("renewal %d at %v, want %v", i, at.Sub(start), want.Sub(start))
			}
		}
		s.mu.Unlock()
		if l.Err() != nil || l.Context().Err() != nil {
			t.Fatalf("a renewed lease ended: %v", l.Err())
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if !errors.Is(l.Err(), ErrClosed) || !errors.Is(context.Cause(l.Context()), ErrClosed) {
			t.Fatalf("after Close: Err = %v, cause = %v; want ErrClosed", l.Err(), context.Cause(l.Context()))
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if err := l.Close(); err != nil { // idempotent
			t.Fatal(err)
		}
		renews, releases, held = s.counts()
		if renews != 10 || releases != 1 || held != 0 {
			t.Fatalf("after Close twice: %d renewals, %d releases, %d held; want 10, 1, 0", renews, releases, held)
		}
	})
}

func TestLeaseRenewFractionAndDefaultTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newFakeServer(1)
		c := New(fakeConn{s})
		// TTL 0: the server's default (3s); a tenth of it between renewals.
		l, err := c.Acquire(t.Context(), "db", "k", AcquireOptions{RenewFraction: 0.1})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		time.Sleep(3*time.Second + 150*time.Millisecond)
		synctest.Wait()
		if renews, _, _ := s.counts(); renews != 10 {
			t.Fatalf("%d renewals in 3.15s at every 300ms, want 10", renews)
		}
	})
}

func TestLeaseExpiresWhenRenewalsKeepFailing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newFakeServer(1)
		c := New(fakeConn{s})
		start := time.Now()
		l, err := c.Acquire(t.Context(), "db", "k", AcquireOptions{TTL: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		s.setDown(true)
		endedAt := make(chan time.Duration, 1)
		context.AfterFunc(l.Context(), func() { endedAt <- time.Since(start) })
		time.Sleep(10 * time.Second)
		synctest.Wait()
		ended := <-endedAt
		// Failed renewals retry sooner and sooner, but the lease holds until
		// the last granted lifetime ran out, and ends exactly then.
		if ended != 3*time.Second {
			t.Fatalf("the lease ended %v after the grant, want exactly its 3s lifetime", ended)
		}
		if !errors.Is(l.Err(), ErrExpired) {
			t.Fatalf("Err = %v, want ErrExpired", l.Err())
		}
		renews, _, _ := s.counts()
		if renews < 4 || renews > 20 {
			t.Fatalf("%d renewal attempts while the owner was down, want a handful", renews)
		}
		// Close still tries to release (the server may hold it yet) and
		// reports that it could not.
		err = l.Close()
		if e, ok := errors.AsType[*api.Error](err); !ok || e.Code != api.CodeUnavailable {
			t.Fatalf("Close with the owner down = %v, want CodeUnavailable", err)
		}
		if !errors.Is(l.Err(), ErrExpired) {
			t.Fatalf("after Close, Err = %v; want it to keep ErrExpired", l.Err())
		}
	})
}

func TestLeaseSurvivesAShortOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newFakeServer(1)
		c := New(fakeConn{s})
		l, err := c.Acquire(t.Context(), "db", "k", AcquireOptions{TTL: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		s.setDown(true)
		time.Sleep(2*time.Second + 100*time.Millisecond) // failures at 1s and 2s
		s.setDown(false)                                 // the retry at 2.5s succeeds
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if l.Err() != nil {
			t.Fatalf("lease ended after a 2s outage within its 3s lifetime: %v", l.Err())
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestLeaseLostOnNotFound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newFakeServer(1)
		c := New(fakeConn{s})
		start := time.Now()
		l, err := c.Acquire(t.Context(), "db", "k", AcquireOptions{TTL: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		s.drop(l.ID()) // released behind the holder's back
		<-l.Context().Done()
		if d := time.Since(start); d != time.Second {
			t.Fatalf("lost lease noticed after %v, want at the first renewal (1s)", d)
		}
		if !errors.Is(l.Err(), ErrLost) || !errors.Is(context.Cause(l.Context()), ErrLost) {
			t.Fatalf("Err = %v, cause = %v; want ErrLost", l.Err(), context.Cause(l.Context()))
		}
		if err := l.Close(); err != nil {
			t.Fatalf("Close after loss = %v, want nil", err)
		}
		if _, releases, _ := s.counts(); releases != 0 {
			t.Fatalf("Close of a lost lease sent %d releases, want none", releases)
		}
		if !errors.Is(l.Err(), ErrLost) {
			t.Fatalf("after Close, Err = %v; want it to keep ErrLost", l.Err())
		}
	})
}

func TestAcquireRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newFakeServer(1)
		c := New(fakeConn{s})
		l, err := c.Acquire(t.Context(), "db", "k", AcquireOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		_, err = c.Acquire(t.Context(), "db", "k", AcquireOptions{})
		if !errors.Is(err, ErrRefused) {
			t.Fatalf("second acquire = %v, want ErrRefused", err)
		}
		ref, ok := errors.AsType[*RefusedError](err)
		if !ok || ref.RetryAfter != 1500*time.Millisecond {
			t.Fatalf("refusal = %#v, want a *RefusedError with RetryAfter 1.5s", err)
		}
		// A failed acquire started no goroutine; the bubble checks that.
	})
}

func TestAcquireOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    AcquireOptions
		ok   bool
	}{
		{"zero", AcquireOptions{}, true},
		{"full", AcquireOptions{Holder: "h", TTL: time.Second, Wait: time.Second, RenewFraction: 0.5}, true},
		{"negative ttl", AcquireOptions{TTL: -1}, false},
		{"negative wait", AcquireOptions{Wait: -1}, false},
		{"negative fraction", AcquireOptions{RenewFraction: -0.1}, false},
		{"fraction one", AcquireOptions{RenewFraction: 1}, false},
		{"fraction NaN", AcquireOptions{RenewFraction: math.NaN()}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate = %v, want ok=%v", err, tc.ok)
			}
			if err != nil {
				if _, aerr := New(fakeConn{newFakeServer(1)}).Acquire(t.Context(), "db", "k", tc.o); aerr == nil {
					t.Fatal("Acquire accepted options that Validate rejects")
				}
			}
		})
	}
}

func TestWithLeaseReleasesOnEveryPath(t *testing.T) {
	boom := errors.New("boom")
	t.Run("error", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := newFakeServer(1)
			c := New(fakeConn{s})
			err := c.WithLease(t.Context(), "db", "k", AcquireOptions{}, func(ctx context.Context, fencing uint64) error {
				if _, _, held := s.counts(); held != 1 || fencing != 1 {
					t.Errorf("inside fn: %d held, fencing %d; want 1, 1", held, fencing)
				}
				return boom
			})
			if !errors.Is(err, boom) || errors.Is(err, ErrLost) {
				t.Fatalf("WithLease = %v, want fn's error alone", err)
			}
			if _, releases, held := s.counts(); releases != 1 || held != 0 {
				t.Fatalf("%d releases, %d held; want 1, 0", releases, held)
			}
		})
	})
	t.Run("panic", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := newFakeServer(1)
			c := New(fakeConn{s})
			func() {
				defer func() {
					if r := recover(); r != "fn panicked" {
						t.Fatalf("recovered %v, want fn's panic to propagate", r)
					}
				}()
				_ = c.WithLease(t.Context(), "db", "k", AcquireOptions{}, func(context.Context, uint64) error {
					panic("fn panicked")
				})
			}()
			if _, releases, held := s.counts(); releases != 1 || held != 0 {
				t.Fatalf("after a panic: %d releases, %d held; want 1, 0", releases, held)
			}
		})
	})
	t.Run("caller cancels", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := newFakeServer(1)
			c := New(fakeConn{s})
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			err := c.WithLease(ctx, "db", "k", AcquireOptions{TTL: time.Second}, func(ctx context.Context, _ uint64) error {
				<-ctx.Done()
				return ctx.Err()
			})
			if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrLost) {
				t.Fatalf("WithLease = %v, want the caller's deadline", err)
			}
			if renews, releases, held := s.counts(); renews < 10 || releases != 1 || held != 0 {
				t.Fatalf("%d renewals, %d releases, %d held; want >= 10 while fn ran, 1, 0", renews, releases, held)
			}
		})
	})
	t.Run("lease lost", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := newFakeServer(1)
			c := New(fakeConn{s})
			err := c.WithLease(t.Context(), "db", "k", AcquireOptions{}, func(ctx context.Context, _ uint64) error {
				s.mu.Lock()
				for id := range s.leases {
					delete(s.leases, id)
				}
				s.mu.Unlock()
				<-ctx.Done()
				if !errors.Is(context.Cause(ctx), ErrLost) {
					t.Errorf("fn's context cause = %v, want ErrLost", context.Cause(ctx))
				}
				return nil // fn finished anyway
			})
			if !errors.Is(err, ErrLost) {
				t.Fatalf("WithLease = %v, want ErrLost: the work ran without its permit", err)
			}
			if _, releases, _ := s.counts(); releases != 0 {
				t.Fatalf("%d releases of a lost lease, want 0", releases)
			}
		})
	})
	t.Run("refused", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := newFakeServer(0)
			ran := false
			err := New(fakeConn{s}).WithLease(t.Context(), "db", "k", AcquireOptions{}, func(context.Context, uint64) error {
				ran = true
				return nil
			})
			if !errors.Is(err, ErrRefused) || ran {
				t.Fatalf("WithLease = %v (fn ran: %v), want ErrRefused without running fn", err, ran)
			}
		})
	})
}

func TestTakeConvertsAndMapsErrors(t *testing.T) {
	s := newFakeServer(1)
	c := New(fakeConn{s})
	var got *weirv1.TakeRequest
	s.take = func(req *weirv1.TakeRequest) (*weirv1.TakeResponse, error) {
		got = req
		return &weirv1.TakeResponse{Allowed: false, RetryAfterMs: 500, RulesVersion: 3, Results: []*weirv1.Result{
			{Limit: "export", Allowed: false, Remaining: 0, Capacity: 6, RetryAfterMs: 500, ResetAfterMs: 3000, Source: weirv1.Source_SOURCE_FALLBACK, WindowMs: 3000},
			{Limit: "search", Allowed: true, Remaining: 99, Capacity: 100, Source: weirv1.Source_SOURCE_OWNER},
		}}, nil
	}
	resp, err := c.Take(t.Context(), api.Check{Limit: "export", Key: "a", Cost: 2}, api.Check{Limit: "search", Key: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.GetChecks()) != 2 || got.GetChecks()[0].GetCost() != 2 || got.GetChecks()[1].GetKey() != "b" {
		t.Fatalf("sent %v", got)
	}
	want := api.Result{Limit: "export", Capacity: 6, RetryAfter: 500 * time.Millisecond, ResetAfter: 3 * time.Second, Source: api.SourceFallback, Window: 3 * time.Second}
	if resp.Allowed || resp.RetryAfter != 500*time.Millisecond || resp.RulesVersion != 3 || len(resp.Results) != 2 || resp.Results[0] != want ||
		resp.Results[1].Source != api.SourceOwner || resp.Results[1].Remaining != 99 {
		t.Fatalf("Take = %+v", resp)
	}

	for _, tc := range []struct {
		code codes.Code
		want api.Code // 0: not an *api.Error
	}{
		{codes.InvalidArgument, api.CodeInvalid},
		{codes.NotFound, api.CodeNotFound},
		{codes.Unavailable, api.CodeUnavailable},
		{codes.ResourceExhausted, api.CodeOverloaded},
		{codes.Internal, 0},
		{codes.PermissionDenied, 0},
	} {
		s.take = func(*weirv1.TakeRequest) (*weirv1.TakeResponse, error) {
			return nil, status.Error(tc.code, "detail for "+tc.code.String())
		}
		_, err := c.Take(t.Context(), api.Check{Limit: "export", Key: "a"})
		e, ok := errors.AsType[*api.Error](err)
		switch {
		case tc.want == 0 && (ok || status.Code(errors.Unwrap(err)) != tc.code):
			t.Errorf("%v: err = %v, want the status error wrapped", tc.code, err)
		case tc.want != 0 && (!ok || e.Code != tc.want || e.Detail != "detail for "+tc.code.String()):
			t.Errorf("%v: err = %#v, want *api.Error code %d with the detail", tc.code, err, tc.want)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := c.Take(ctx, api.Check{Limit: "export", Key: "a"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Take on a cancelled context = %v, want context.Canceled", err)
	}
}

func TestMsConversions(t *testing.T) {
	for _, tc := range []struct {
		d  time.Duration
		ms int64
	}{{0, 0}, {-time.Second, 0}, {time.Nanosecond, 1}, {time.Millisecond, 1}, {1500 * time.Microsecond, 2}, {300 * time.Millisecond, 300}} {
		if got := api.MillisUp(tc.d); got != tc.ms {
			t.Errorf("api.MillisUp(%v) = %d, want %d", tc.d, got, tc.ms)
		}
	}
	if api.MillisDuration(-5) != 0 || api.MillisDuration(7) != 7*time.Millisecond || api.MillisDuration(math.MaxInt64) != math.MaxInt64 {
		t.Error("api.MillisDuration does not clamp")
	}
}
