package main

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/weir-rl/weir/bucket"
)

const redisServerPath = "/usr/bin/redis-server"

// startRedis starts a throw-away redis-server on a free loopback port and
// returns its address. Without /usr/bin/redis-server the test is skipped,
// unless CI=true: CI must have it.
func startRedis(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(redisServerPath); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %s is missing: %v", redisServerPath, err)
		}
		t.Skipf("%s not installed; skipping the Redis tests", redisServerPath)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	_ = ln.Close()
	cmd := exec.Command(redisServerPath, "--port", port, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--loglevel", "warning")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	addr := net.JoinHostPort("127.0.0.1", port)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := dialRESP(context.Background(), addr)
		if err == nil {
			var v respValue
			err = c.do(time.Now().Add(time.Second), &v, "PING")
			_ = c.Close()
			if err == nil && string(v.Str) == "PONG" {
				return addr
			}
		}
		select {
		case e := <-exited:
			t.Fatalf("redis-server exited before answering on %s: %v", addr, e)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server not answering on %s after 10s: %v", addr, err)
		}
	}
}

// TestRedisScriptParity replays random arrivals, with the clock going back
// now and then, through the Lua script and through Weir's bucket.TakeAt,
// and requires the same decision, remaining balance and retry time at every
// step. The rate is 2 per hour and times are multiples of an eighth of an
// hour, so every balance is a multiple of 1/4 token, exact in a double, and
// no key expires in real time while the test runs.
func TestRedisScriptParity(t *testing.T) {
	addr := startRedis(t)
	c, err := dialRESP(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(30 * time.Second)
	if err := loadScript(c, deadline); err != nil {
		t.Fatal(err)
	}
	spec := bucketSpec{Capacity: 6, N: 2, Per: time.Hour}
	lim := bucket.Limit{Algorithm: bucket.TokenBucket, Capacity: 6, Rate: bucket.Rate{N: 2, Per: time.Hour}}
	args := spec.args(0)
	step := (time.Hour / 8).Microseconds()
	rng := rand.New(rand.NewPCG(7, 11))
	for seq := range 8 {
		key := "weir:test:parity:" + strconv.Itoa(seq)
		var st bucket.State
		// A wall-clock time in µs, with 16 significant digits.
		nowUs := int64(1_764_000_000_123_457)
		for i := range 150 {
			nowUs += int64(rng.IntN(11)-2) * step // -2..8 steps: sometimes backwards
			cost := int64(1 + rng.IntN(6))
			want, err := bucket.TakeAt(lim, &st, time.UnixMicro(nowUs), cost)
			if err != nil {
				t.Fatal(err)
			}
			var v respValue
			if err := c.do(deadline, &v, "EVALSHA", redisScriptSHA(), "1", key,
				args[0], args[1], args[2], strconv.FormatInt(cost, 10), strconv.FormatInt(nowUs, 10)); err != nil {
				t.Fatalf("seq %d step %d: %v", seq, i, err)
			}
			got, err := parseRedisTake(&v)
			if err != nil {
				t.Fatal(err)
			}
			wantRetry := (want.RetryAfter + time.Millisecond - 1).Truncate(time.Millisecond)
			if got.Allowed != want.Allowed || got.Remaining != want.Remaining || got.RetryAfter != wantRetry {
				t.Fatalf("seq %d step %d (now %dµs, cost %d): redis %+v, weir allowed %v remaining %d retry %v",
					seq, i, nowUs, cost, got, want.Allowed, want.Remaining, wantRetry)
			}
		}
	}
}

// TestRedisScriptServerTimeAndExpiry checks the benchmark's own path (the
// server's TIME, the bench limit) and that the key carries a TTL no longer
// than the time until the bucket is full again. The server decides on its
// real clock; at one token a minute, the refill while the test runs is a
// small, measured part of a token.
func TestRedisScriptServerTimeAndExpiry(t *testing.T) {
	addr := startRedis(t)
	ctx := context.Background()
	tgt, err := newRedisTarget(ctx, []string{addr}, "test", 2, bucketSpec{Capacity: 10, N: 1, Per: time.Minute}, 3)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := tgt.newCaller(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.close()
	c, err := dialRESP(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	begin := time.Now() // before the server's first decision on the key
	// 10 tokens, cost 3: three fit; the fourth would need two minutes of
	// refill.
	for i, want := range []bool{true, true, true, false} {
		ok, err := cl.take(ctx, 1)
		if err != nil || ok != want {
			t.Fatalf("take %d: %v, %v, want %v", i, ok, err, want)
		}
	}
	var v respValue
	if err := c.do(time.Now().Add(5*time.Second), &v, "PTTL", "weir:test:k1"); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(begin)
	// 1 token left after 9 taken, plus the refill since the first take:
	// 9 min to full, less that refill time, less the time since the last
	// take; both lie within elapsed (give or take 2 ms of rounding to ms).
	const full = 9 * time.Minute
	if low := (full - elapsed).Milliseconds() - 2; v.Kind != respInteger || v.Int < low || v.Int > full.Milliseconds() {
		t.Fatalf("PTTL = %+v, want %d to %d ms (%v after the first take)", v, low, full.Milliseconds(), elapsed)
	}
}

// TestRedisReloadsScript flushes the server's script cache and checks the
// caller loads the script again, as a client library would.
func TestRedisReloadsScript(t *testing.T) {
	addr := startRedis(t)
	ctx := context.Background()
	tgt, err := newRedisTarget(ctx, []string{addr}, "bench", 1, bucketSpec{Capacity: 1e12, N: 1e12, Per: time.Second}, 1)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := tgt.newCaller(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.close()
	c, err := dialRESP(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var v respValue
	if err := c.do(time.Now().Add(5*time.Second), &v, "SCRIPT", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	if ok, err := cl.take(ctx, 0); err != nil || !ok {
		t.Fatalf("take after SCRIPT FLUSH: %v, %v", ok, err)
	}
	// A real error reply is reported, not retried into success.
	err = c.do(time.Now().Add(5*time.Second), &v, "EVALSHA", "0000000000000000000000000000000000000000", "0")
	if re, ok := errors.AsType[redisError](err); !ok || re.prefix() != "NOSCRIPT" {
		t.Fatalf("EVALSHA of an unknown script: %v, want NOSCRIPT", err)
	}
}

// TestRedisRunCell drives redis-lua through the runner with a request
// bound and two keys, and requires every request to be decided and allowed.
func TestRedisRunCell(t *testing.T) {
	addr := startRedis(t)
	ctx := context.Background()
	b, err := redisBucket("../limits.yaml", "bench", 1)
	if err != nil {
		t.Fatal(err)
	}
	if b != (bucketSpec{Capacity: 1e12, N: 1e12, Per: time.Second}) {
		t.Fatalf("bench/limits.yaml bench = %+v", b)
	}
	tgt, err := newRedisTarget(ctx, []string{addr}, "bench", 2, b, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.close()
	res, err := runCell(ctx, tgt, cellConfig{Concurrency: 4, Requests: 400, Keys: 2, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Allowed != 400 || res.Denied != 0 || res.Errors != 0 {
		t.Fatalf("allowed/denied/errors = %d/%d/%d (%s), want 400/0/0", res.Allowed, res.Denied, res.Errors, res.FirstError)
	}
}
