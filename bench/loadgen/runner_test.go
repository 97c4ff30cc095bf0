package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeTarget decides in memory: request n of a caller (counted from 1) is
// an error when errEvery divides n, else denied when denyEvery divides it.
type fakeTarget struct {
	errEvery, denyEvery int
	delay               time.Duration // each take sleeps this long (in a synctest bubble)
	mu                  sync.Mutex
	keys                map[int]int // requests per key index
	callers             int
	closed              int
}

func (f *fakeTarget) newCaller(_ context.Context, i int) (caller, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.callers++
	return &fakeCaller{f: f}, nil
}

func (f *fakeTarget) close() error { return nil }

type fakeCaller struct {
	f *fakeTarget
	n int
}

func (c *fakeCaller) take(_ context.Context, k int) (bool, error) {
	if c.f.delay > 0 {
		time.Sleep(c.f.delay)
	}
	c.n++
	c.f.mu.Lock()
	c.f.keys[k]++
	c.f.mu.Unlock()
	switch {
	case c.f.errEvery > 0 && c.n%c.f.errEvery == 0:
		return false, errors.New("fake failure")
	case c.f.denyEvery > 0 && c.n%c.f.denyEvery == 0:
		return false, nil
	}
	return true, nil
}

func (c *fakeCaller) close() error {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	c.f.closed++
	return nil
}

func TestRunCellRequestBound(t *testing.T) {
	f := &fakeTarget{denyEvery: 4, keys: map[int]int{}}
	res, err := runCell(context.Background(), f, cellConfig{Concurrency: 1, Requests: 1000, Keys: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Allowed != 750 || res.Denied != 250 || res.Errors != 0 || res.Decisions != 1000 {
		t.Fatalf("allowed/denied/errors/decisions = %d/%d/%d/%d, want 750/250/0/1000",
			res.Allowed, res.Denied, res.Errors, res.Decisions)
	}
	if f.callers != 1 || f.closed != 1 {
		t.Fatalf("callers made %d, closed %d, want 1 and 1", f.callers, f.closed)
	}
	if res.Seconds <= 0 || res.Throughput <= 0 || res.P50Us > res.P99Us || res.P99Us > res.P999Us || res.P999Us > res.MaxUs {
		t.Fatalf("timing out of order: %+v", res)
	}
}

func TestRunCellErrorsAndKeys(t *testing.T) {
	f := &fakeTarget{errEvery: 10, keys: map[int]int{}}
	res, err := runCell(context.Background(), f, cellConfig{Concurrency: 8, Requests: 8000, Keys: 5})
	if err != nil {
		t.Fatal(err)
	}
	if res.Decisions+res.Errors != 8000 {
		t.Fatalf("decisions %d + errors %d != 8000 requests", res.Decisions, res.Errors)
	}
	if res.Errors < 700 || res.Errors > 800 || res.FirstError != "fake failure" {
		t.Fatalf("errors %d (%q), want about a tenth of 8000", res.Errors, res.FirstError)
	}
	if f.callers != 8 || f.closed != 8 {
		t.Fatalf("callers made %d, closed %d, want 8 and 8", f.callers, f.closed)
	}
	// Every key is used, none outside the range, roughly evenly.
	if len(f.keys) != 5 {
		t.Fatalf("keys used: %v, want indexes 0..4", f.keys)
	}
	for k, n := range f.keys {
		if k < 0 || k >= 5 || n < 1200 || n > 2000 {
			t.Fatalf("key %d got %d of 8000 requests, want about 1600 (%v)", k, n, f.keys)
		}
	}
}

// TestRunCellDurationBound uses a fixed duration and checks the cell runs
// for its warm-up and duration and ends, and reports a measured phase that
// starts after the warm-up.
func TestRunCellDurationBound(t *testing.T) {
	f := &fakeTarget{keys: map[int]int{}}
	const warmup, duration = 10 * time.Millisecond, 50 * time.Millisecond
	begin := time.Now()
	res, err := runCell(context.Background(), f, cellConfig{
		Concurrency: 2, Duration: duration, Warmup: warmup, Keys: 1,
		ServerPIDs: []int{os.Getpid()}, // the "server" is this process: both CPU figures measure the same thing
	})
	took := time.Since(begin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := procCPU(0); err == nil {
		if d := res.ServerCPUSeconds - res.LoadgenCPUSeconds; d < -0.02 || d > 0.02 || res.LoadgenCPUSeconds < 0 {
			t.Errorf("server CPU %.3fs, loadgen CPU %.3fs: the same process, want equal within a tick or two",
				res.ServerCPUSeconds, res.LoadgenCPUSeconds)
		}
	}
	// A caller stops once it sees the duration is over, so the cell lasts
	// at least warm-up plus duration. The measured phase runs from the end
	// of the warm-up to the last answer, which may come a little before
	// the end of the duration (its caller was descheduled before it looked
	// at the clock again), so only its upper bound is exact.
	if took < warmup+duration {
		t.Fatalf("the cell returned after %v, before its %v warm-up and %v duration", took, warmup, duration)
	}
	if res.Decisions == 0 || res.Seconds <= 0 || res.Seconds > (took-warmup).Seconds() {
		t.Fatalf("decisions %d over %.3fs, want some over at most %v (the cell took %v)", res.Decisions, res.Seconds, took-warmup, took)
	}
	total := 0
	for _, n := range f.keys {
		total += n
	}
	if uint64(total) <= res.Decisions {
		t.Fatalf("%d requests sent, %d recorded: the warm-up was recorded", total, res.Decisions)
	}
}

func TestRunCellCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f := &fakeTarget{keys: map[int]int{}}
	if _, err := runCell(ctx, f, cellConfig{Concurrency: 2, Duration: time.Hour, Keys: 1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("runCell on a canceled context: %v, want context.Canceled", err)
	}
}

func TestCellConfigValidate(t *testing.T) {
	for _, c := range []cellConfig{
		{Concurrency: 0, Duration: time.Second, Keys: 1},
		{Concurrency: 1, Duration: time.Second, Keys: 0},
		{Concurrency: 1, Keys: 1},
		{Concurrency: 1, Duration: -time.Second, Keys: 1},
	} {
		if err := c.validate(); err == nil {
			t.Errorf("%+v: valid, want an error", c)
		}
	}
}

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-target", "weir-grpc", "-addrs", "a:1, b:2,", "-concurrency", "1,16,64", "-keys", "3"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.Addrs, "|") != "a:1|b:2" || len(cfg.Concurrency) != 3 || cfg.Concurrency[2] != 64 || cfg.Keys != 3 {
		t.Fatalf("parsed %+v", cfg)
	}
	cfg, err = parseFlags([]string{"-target", "weir-lease-grpc", "-rotate", "-server-pid", "12, 34", "-metrics", "a:1,http://b:2/"}, &bytes.Buffer{})
	if err != nil || !cfg.Rotate || len(cfg.ServerPIDs) != 2 || cfg.ServerPIDs[1] != 34 ||
		strings.Join(cfg.MetricsURLs, " ") != "http://a:1/metrics http://b:2/metrics" || cfg.Addrs[0] != "127.0.0.1:8081" ||
		cfg.Limit != "bench-lease" {
		t.Fatalf("lease flags: %+v, %v", cfg, err)
	}
	if cfg, err = parseFlags([]string{"-target", "weir-lease-grpc", "-limit", "bench"}, &bytes.Buffer{}); err != nil || cfg.Limit != "bench" {
		t.Fatalf("an explicit -limit for leases: %q, %v", cfg.Limit, err)
	}
	cfg, err = parseFlags([]string{"-target", "redis-lua"}, &bytes.Buffer{})
	if err != nil || cfg.Addrs[0] != "127.0.0.1:6379" {
		t.Fatalf("default redis address: %+v, %v", cfg.Addrs, err)
	}
	for _, args := range [][]string{
		{},
		{"-target", "memcached"},
		{"-target", "weir-http", "-concurrency", "1,x"},
		{"-target", "weir-http", "-concurrency", "0"},
		{"-target", "weir-http", "-duration", "0"},
		{"-target", "weir-http", "-keys", "0"},
		{"-target", "weir-http", "-addrs", ","},
		{"-target", "weir-http", "extra"},
		{"-target", "weir-grpc", "-conns", "0"},
		{"-target", "weir-http", "-rotate"},
		{"-target", "redis-lua", "-rotate"},
		{"-target", "weir-grpc", "-server-pid", "1,x"},
		{"-target", "weir-grpc", "-server-pid", "0"},
	} {
		if _, err := parseFlags(args, &bytes.Buffer{}); err == nil {
			t.Errorf("parseFlags(%q) accepted", args)
		}
	}
}

func TestRedisBucketFromLimitsFile(t *testing.T) {
	if _, err := redisBucket("", "bench", 1); err == nil {
		t.Error("no limits file: accepted")
	}
	if _, err := redisBucket("../limits.yaml", "nope", 1); err == nil {
		t.Error("unknown limit: accepted")
	}
	if _, err := redisBucket("../limits.yaml", "bench-small", 101); err == nil {
		t.Error("cost above capacity: accepted")
	}
	b, err := redisBucket("../limits.yaml", "bench-small", 1)
	if err != nil || b != (bucketSpec{Capacity: 100, N: 100, Per: time.Second}) {
		t.Fatalf("bench-small = %+v, %v", b, err)
	}
}

func TestReport(t *testing.T) {
	rs := []cellResult{
		{Target: "weir-grpc", Limit: "bench", Keys: 1, Concurrency: 16, Throughput: 30000, P50Us: 400, P99Us: 1000, Allowed: 5},
		{Target: "redis-lua", Limit: "bench", Keys: 1, Concurrency: 16, Throughput: 20000, P50Us: 800, P99Us: 2000},
		{Target: "weir-http", Limit: "bench", Keys: 1, Concurrency: 1, Throughput: 5000, P50Us: 150.5, P99Us: 90},
	}
	var b bytes.Buffer
	writeReport(&b, rs)
	out := b.String()
	for _, want := range []string{
		"| weir-grpc | 16 | 30000 | 0.0 | 400 | 1000 | 0.0 | 5 | 0 | 0 | 0.0 | 0.0 |",
		"| 16 | weir-grpc | 30000 | 20000 | 1.50× | 0.50× | 0.50× | n/a |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "| 1 | weir-http |") {
		t.Errorf("a ratio without a redis-lua cell at that concurrency:\n%s", out)
	}
}

func TestParseProcStat(t *testing.T) {
	line := "4242 (weir (x) y) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 75 0 0 20 0 9 0 100 0 0\n"
	d, err := parseProcStat([]byte(line))
	if err != nil || d != 3250*time.Millisecond {
		t.Fatalf("parseProcStat = %v, %v, want 3.25s (325 ticks)", d, err)
	}
	for _, bad := range []string{"", "1 (x) S 1 2", "1 (x) S 1 2 3 4 5 6 7 8 9 10 x 0"} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("parseProcStat(%q) accepted", bad)
		}
	}
	if _, err := procCPU(0); err != nil {
		t.Skipf("no /proc here: %v", err)
	}
}
