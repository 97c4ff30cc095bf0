package main

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// statsOf returns one caller's stats with the given latencies (all
// allowed) and its last request ending at last.
func statsOf(last time.Time, lat ...time.Duration) callerStats {
	var st callerStats
	for _, d := range lat {
		st.record(last.Add(-d), last, true, nil)
	}
	return st
}

// TestPlusIsOneCellOverBothSlices: two slices summed read like one cell
// over the callers of both, with the measured seconds added up.
func TestPlusIsOneCellOverBothSlices(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := []callerStats{statsOf(t0.Add(time.Second), 10*time.Microsecond, 20*time.Microsecond, 30*time.Microsecond)}
	b := []callerStats{statsOf(t0.Add(3*time.Second), 500*time.Microsecond, 900*time.Microsecond)}
	var ra, rb, whole cellResult
	ra.addCallers(a, t0)
	rb.addCallers(b, t0)
	whole.addCallers(slices.Concat(a, b), t0)
	ra.ServerCPUSeconds, rb.ServerCPUSeconds = 0.25, 0.5
	ra.LoadgenCPUSeconds, rb.LoadgenCPUSeconds = 0.125, 0.25
	ra.Scraped, rb.Scraped = true, true
	ra.Forwarded, rb.Forwarded = 3, 4

	got := ra.plus(rb)
	if got.Decisions != 5 || got.Allowed != 5 || got.Seconds != 4 || got.Throughput != 5.0/4 {
		t.Fatalf("decisions %d allowed %d seconds %v throughput %v, want 5, 5, 4, 1.25", got.Decisions, got.Allowed, got.Seconds, got.Throughput)
	}
	if got.P50Us != whole.P50Us || got.P99Us != whole.P99Us || got.MaxUs != whole.MaxUs || got.MeanUs != whole.MeanUs {
		t.Fatalf("latencies p50/p99/max/mean %v/%v/%v/%v, want those of one cell over both: %v/%v/%v/%v",
			got.P50Us, got.P99Us, got.MaxUs, got.MeanUs, whole.P50Us, whole.P99Us, whole.MaxUs, whole.MeanUs)
	}
	if got.ServerCPUSeconds != 0.75 || got.LoadgenCPUSeconds != 0.375 || !got.Scraped || got.Forwarded != 7 {
		t.Fatalf("cpu %v/%v scraped %v forwarded %v, want 0.75/0.375 true 7", got.ServerCPUSeconds, got.LoadgenCPUSeconds, got.Scraped, got.Forwarded)
	}
	if ra.Decisions != 3 || ra.P50Us >= got.P99Us {
		t.Fatalf("plus changed its receiver: %+v", ra)
	}
}

// TestPlusKeepsUnknownsAndFailures: a CPU time one slice does not know
// leaves the sum unknown, an unscraped slice leaves the row unscraped, and
// the first failed check and error stay.
func TestPlusKeepsUnknownsAndFailures(t *testing.T) {
	a := suiteRow{Check: "ok", Result: cellResult{Allowed: 1, ServerCPUSeconds: 1, Scraped: true}}
	b := suiteRow{Check: "2 errors (boom)", Result: cellResult{Allowed: 1, Errors: 2, FirstError: "boom", Scraped: false}}
	c := suiteRow{Check: "1 denied", Result: cellResult{Denied: 1, ServerCPUSeconds: 1, FirstError: "later"}}
	got := a.plus(b).plus(c)
	if got.Check != "2 errors (boom)" || got.Result.FirstError != "boom" || got.Result.Errors != 2 {
		t.Fatalf("check %q first error %q errors %d, want the first failure", got.Check, got.Result.FirstError, got.Result.Errors)
	}
	if got.Result.ServerCPUSeconds != 0 || got.Result.Scraped {
		t.Fatalf("server cpu %v scraped %v, want unknown (0) and false", got.Result.ServerCPUSeconds, got.Result.Scraped)
	}
	if got.Result.Decisions != 3 {
		t.Fatalf("decisions %d, want 3", got.Result.Decisions)
	}
}

// orderLog records which target opened, in order. Its targets take 1 ms
// a take, so that in a synctest bubble the clock moves while callers run.
type orderLog struct {
	mu    sync.Mutex
	names []string
}

func (l *orderLog) spec(name string) suiteSpec {
	return suiteSpec{
		info: targetInfo{Name: name},
		open: func(context.Context, workload) (target, error) {
			l.mu.Lock()
			l.names = append(l.names, name)
			l.mu.Unlock()
			return &fakeTarget{keys: map[int]int{}, delay: time.Millisecond}, nil
		},
	}
}

// TestRunGroupTakesTurns: with -rounds 4 the targets take turns, in order
// then in reverse, and each row sums its four slices, printed once.
func TestRunGroupTakesTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log orderLog
		specs := []suiteSpec{log.spec("a"), log.spec("b"), log.spec("c")}
		cfg := suiteConfig{Rounds: 4, Duration: 40 * time.Millisecond}
		var printed []string
		rows, err := runGroup(context.Background(), cfg, specs, workload{Name: "hot", Keys: 1}, 2, func(r suiteRow) {
			printed = append(printed, r.Target.Name)
		})
		if err != nil {
			t.Fatal(err)
		}
		want := "a b c c b a a b c c b a"
		if got := strings.Join(log.names, " "); got != want {
			t.Fatalf("slices ran %q, want %q", got, want)
		}
		if got := strings.Join(printed, " "); got != "a b c" {
			t.Fatalf("printed %q, want each row once when complete: a b c", got)
		}
		for i, r := range rows {
			if r.Target.Name != specs[i].info.Name || r.Check != "ok" || r.Result.Decisions == 0 {
				t.Fatalf("row %d: %s check %q decisions %d", i, r.Target.Name, r.Check, r.Result.Decisions)
			}
			// Each slice measures 10 ms of the bubble's clock, which
			// moves only while every goroutine waits: a row is exactly
			// the sum of four.
			if math.Abs(r.Result.Seconds-0.04) > 1e-9 {
				t.Fatalf("row %s measured %v s, want the four 10 ms slices summed", r.Target.Name, r.Result.Seconds)
			}
		}
	})
}

// TestRunGroupOneRound: -rounds 1 runs each target once, in order, for the
// whole -seconds.
func TestRunGroupOneRound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log orderLog
		specs := []suiteSpec{log.spec("a"), log.spec("b")}
		rows, err := runGroup(context.Background(), suiteConfig{Rounds: 1, Duration: 20 * time.Millisecond}, specs, workload{Name: "hot", Keys: 1}, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(log.names, " "); got != "a b" || len(rows) != 2 {
			t.Fatalf("ran %q (%d rows), want \"a b\" (2 rows)", got, len(rows))
		}
		if math.Abs(rows[0].Result.Seconds-0.02) > 1e-9 {
			t.Fatalf("measured %v s, want the whole 20 ms", rows[0].Result.Seconds)
		}
	})
}

// TestRunGroupStopsOnCancel: a cancelled run returns the rows complete by
// then and the cancellation.
func TestRunGroupStopsOnCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log orderLog
		ctx, cancel := context.WithCancel(context.Background())
		b := log.spec("b")
		open := b.open
		b.open = func(ctx context.Context, wl workload) (target, error) {
			cancel()
			return open(ctx, wl)
		}
		specs := []suiteSpec{log.spec("a"), b, log.spec("c")}
		rows, err := runGroup(ctx, suiteConfig{Rounds: 1, Duration: 10 * time.Millisecond}, specs, workload{Name: "hot", Keys: 1}, 1, nil)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want context.Canceled", err)
		}
		if len(rows) != 2 || rows[0].Target.Name != "a" || rows[1].Target.Name != "b" || strings.Join(log.names, " ") != "a b" {
			t.Fatalf("rows %d, ran %v; want a and b, not c", len(rows), log.names)
		}
		rows, err = runGroup(ctx, suiteConfig{Rounds: 2, Duration: 10 * time.Millisecond}, specs, workload{Name: "hot", Keys: 1}, 1, nil)
		if !errors.Is(err, context.Canceled) || len(rows) != 0 {
			t.Fatalf("two rounds after cancel: %d rows, err %v; want none complete and context.Canceled", len(rows), err)
		}
	})
}
