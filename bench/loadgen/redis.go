package main

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// redisScript is the classic Redis token bucket, written to decide like
// Weir's token_bucket (docs/architecture.md §3) so the comparison is like for like: a
// missing bucket starts full; the balance refills lazily from the time since
// the last decision, capped at capacity, with a clock that went back
// minting nothing; an allowed take subtracts the cost; balance and
// timestamp are stored on allow and on deny; the key expires when the
// bucket would be full again (Weir's eviction rule). Numbers are Lua
// doubles, as in every such script, so very large buckets lose exactness
// that Weir's integer arithmetic keeps. Numbers handed to Redis are
// formatted by the script itself (%.17g round-trips a double; %d keeps a
// TTL out of the scientific notation PEXPIRE rejects) rather than left to
// a conversion that has changed between Redis versions (redis/redis#1118,
// #13115).
//
//	KEYS[1]  the bucket
//	ARGV[1]  capacity, in tokens
//	ARGV[2]  rate: tokens added per ARGV[3] microseconds
//	ARGV[3]  rate period, in microseconds
//	ARGV[4]  cost, in tokens
//	ARGV[5]  optional: now, in microseconds (tests); by default the
//	         server's TIME, so one clock decides, as on a Weir owner
//
// It returns {allowed (1 or 0), remaining (floor), retry_after_ms (rounded
// up; 0 when allowed)}.
const redisScript = `
local capacity = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local per = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])
local now
if ARGV[5] then
  now = tonumber(ARGV[5])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local s = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(s[1])
local last = tonumber(s[2])
if tokens == nil or last == nil then
  tokens = capacity
  last = now
end
if now < last then now = last end
tokens = math.min(capacity, tokens + (now - last) * n / per)
local allowed, retry = 0, 0
if tokens >= cost then
  tokens = tokens - cost
  allowed = 1
else
  retry = math.ceil((cost - tokens) * per / n / 1000)
end
local reset_ms = math.ceil((capacity - tokens) * per / n / 1000)
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'ts', string.format('%.17g', now))
redis.call('PEXPIRE', KEYS[1], string.format('%d', math.max(1, reset_ms)))
return {allowed, math.floor(tokens), retry}
`

// redisScriptSHA returns the SHA1 that SCRIPT LOAD answers for the script.
func redisScriptSHA() string {
	sum := sha1.Sum([]byte(redisScript))
	return hex.EncodeToString(sum[:])
}

// bucketSpec is the token bucket a redis-lua caller asks the script for:
// capacity tokens, refilled at N tokens per Per.
type bucketSpec struct {
	Capacity int64
	N        int64
	Per      time.Duration
}

// args returns the script's ARGV[1..4] for a cost.
func (b bucketSpec) args(cost int64) [4]string {
	return [4]string{
		strconv.FormatInt(b.Capacity, 10),
		strconv.FormatInt(b.N, 10),
		strconv.FormatInt(b.Per.Microseconds(), 10),
		strconv.FormatInt(cost, 10),
	}
}

// validate reports a bucket the script cannot express.
func (b bucketSpec) validate() error {
	if b.Capacity < 1 || b.N < 1 || b.Per < time.Microsecond {
		return fmt.Errorf("loadgen: redis-lua bucket: want capacity >= 1, rate >= 1 per period of at least 1µs, got %d, %d/%v", b.Capacity, b.N, b.Per)
	}
	return nil
}

// redisTake is one decision of the script.
type redisTake struct {
	Allowed    bool
	Remaining  int64
	RetryAfter time.Duration
}

// parseRedisTake reads the script's reply.
func parseRedisTake(v *respValue) (redisTake, error) {
	if v.Kind != respArray || len(v.Arr) != 3 {
		return redisTake{}, fmt.Errorf("%w: script reply is not an array of 3", errProtocol)
	}
	for _, e := range v.Arr {
		if e.Kind != respInteger {
			return redisTake{}, fmt.Errorf("%w: script reply holds a non-integer", errProtocol)
		}
	}
	return redisTake{
		Allowed:    v.Arr[0].Int == 1,
		Remaining:  v.Arr[1].Int,
		RetryAfter: time.Duration(v.Arr[2].Int) * time.Millisecond,
	}, nil
}

// loadScript loads the script on the server behind c and checks the SHA1
// the server answers.
func loadScript(c *respConn, deadline time.Time) error {
	var v respValue
	if err := c.do(deadline, &v, "SCRIPT", "LOAD", redisScript); err != nil {
		return err
	}
	if got, want := string(v.Str), redisScriptSHA(); v.Kind != respBulk || got != want {
		return fmt.Errorf("loadgen: redis: SCRIPT LOAD answered %q, want %q", got, want)
	}
	return nil
}

// redisTarget drives a Redis server with the token bucket script, one
// connection per caller.
type redisTarget struct {
	addrs []string
	keys  []string // Redis key of each key index
	args  [4]string
}

// newRedisTarget checks every address answers and loads the script there.
func newRedisTarget(ctx context.Context, addrs []string, limit string, nkeys int, b bucketSpec, cost int64) (*redisTarget, error) {
	if err := b.validate(); err != nil {
		return nil, err
	}
	t := &redisTarget{addrs: addrs, keys: make([]string, nkeys), args: b.args(cost)}
	for i := range t.keys {
		t.keys[i] = "weir:" + limit + ":" + benchKey(i)
	}
	for _, a := range addrs {
		c, err := dialRESP(ctx, a)
		if err != nil {
			return nil, err
		}
		err = loadScript(c, time.Now().Add(5*time.Second))
		_ = c.Close()
		if err != nil {
			return nil, fmt.Errorf("loadgen: redis %s: %w", a, err)
		}
	}
	return t, nil
}

func (t *redisTarget) newCaller(ctx context.Context, i int) (caller, error) {
	c, err := dialRESP(ctx, t.addrs[i%len(t.addrs)])
	if err != nil {
		return nil, err
	}
	rc := &redisCaller{t: t, c: c}
	rc.cmd = []string{"EVALSHA", redisScriptSHA(), "1", "", t.args[0], t.args[1], t.args[2], t.args[3]}
	return rc, nil
}

func (t *redisTarget) close() error { return nil }

// redisCaller is one caller's connection and reused buffers.
type redisCaller struct {
	t   *redisTarget
	c   *respConn
	cmd []string
	v   respValue
}

func (c *redisCaller) take(ctx context.Context, k int) (bool, error) {
	deadline, _ := ctx.Deadline()
	c.cmd[3] = c.t.keys[k]
	err := c.c.do(deadline, &c.v, c.cmd...)
	if re, ok := errors.AsType[redisError](err); ok && re.prefix() == "NOSCRIPT" {
		// The server lost its script cache (a restart, SCRIPT FLUSH):
		// load it again, as a client library would, and retry once.
		if err = loadScript(c.c, deadline); err == nil {
			err = c.c.do(deadline, &c.v, c.cmd...)
		}
	}
	if err != nil {
		return false, err
	}
	r, err := parseRedisTake(&c.v)
	return r.Allowed, err
}

func (c *redisCaller) close() error { return c.c.Close() }
