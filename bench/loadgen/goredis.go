package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// newGoRedis returns a go-redis client for addr whose pool holds one
// connection per caller, as a service sizes its pool to its concurrency.
func newGoRedis(addr string, maxCallers int) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:         addr,
		PoolSize:     max(maxCallers, 1),
		MinIdleConns: 0,
		DialTimeout:  5 * time.Second,
		ReadTimeout:  5 * time.Second,
		WriteTimeout: 5 * time.Second,
	})
}

// goRedisLuaTarget is "Redis plus a Lua token bucket" through go-redis,
// the client people use: EVALSHA of redisScript, the same script and
// bucket as the hand-written redis-lua target.
type goRedisLuaTarget struct {
	client *redis.Client
	sha    string
	keys   []string
	args   []any
}

// newGoRedisLuaTarget loads the script and checks the SHA1 the server
// answers.
func newGoRedisLuaTarget(ctx context.Context, addr, limit string, nkeys, maxCallers int, b bucketSpec, cost int64) (*goRedisLuaTarget, error) {
	if err := b.validate(); err != nil {
		return nil, err
	}
	t := &goRedisLuaTarget{client: newGoRedis(addr, maxCallers), keys: make([]string, nkeys)}
	for i := range t.keys {
		t.keys[i] = "weir:" + limit + ":" + benchKey(i)
	}
	for _, a := range b.args(cost) {
		t.args = append(t.args, a)
	}
	sha, err := t.client.ScriptLoad(ctx, redisScript).Result()
	if err == nil && sha != redisScriptSHA() {
		err = fmt.Errorf("SCRIPT LOAD answered %q, want %q", sha, redisScriptSHA())
	}
	if err != nil {
		_ = t.client.Close()
		return nil, fmt.Errorf("loadgen: go-redis %s: %w", addr, err)
	}
	t.sha = sha
	return t, nil
}

func (t *goRedisLuaTarget) newCaller(context.Context, int) (caller, error) {
	return &goRedisLuaCaller{t: t, keys: make([]string, 1)}, nil
}

func (t *goRedisLuaTarget) close() error { return t.client.Close() }

type goRedisLuaCaller struct {
	t    *goRedisLuaTarget
	keys []string
}

func (c *goRedisLuaCaller) take(ctx context.Context, k int) (bool, error) {
	c.keys[0] = c.t.keys[k]
	v, err := c.t.client.EvalSha(ctx, c.t.sha, c.keys, c.t.args...).Result()
	if err != nil {
		return false, err
	}
	arr, ok := v.([]any)
	if !ok || len(arr) != 3 {
		return false, fmt.Errorf("%w: script reply %T is not an array of 3", errProtocol, v)
	}
	allowed, ok := arr[0].(int64)
	if !ok {
		return false, fmt.Errorf("%w: script reply holds a %T", errProtocol, arr[0])
	}
	return allowed == 1, nil
}

func (c *goRedisLuaCaller) close() error { return nil }

// respTarget asks Weir nodes' Redis-protocol endpoints through go-redis:
// WEIR.TAKE limit key cost, over one client (a pool sized to the callers)
// per node. The reply is read as the endpoint is specified to answer,
// allowed first: an array whose first element is 1 or 0 (or a bare
// integer).
type respTarget struct {
	clients []*redis.Client
	limit   string
	cost    string
	keys    []string
	rotate  bool
}

// newRESPTarget pings every endpoint so a missing one fails before the
// cell. Caller i starts at addrs[i mod len(addrs)]; with rotate it moves
// to the next node on every request, as a round-robin balancer in front
// of the nodes does (no client routing).
func newRESPTarget(ctx context.Context, addrs []string, limit string, nkeys, maxCallers int, cost int64, rotate bool) (*respTarget, error) {
	t := &respTarget{limit: limit, cost: strconv.FormatInt(cost, 10), keys: make([]string, nkeys), rotate: rotate}
	for i := range t.keys {
		t.keys[i] = benchKey(i)
	}
	for _, addr := range addrs {
		c := newGoRedis(addr, maxCallers)
		t.clients = append(t.clients, c)
		if err := c.Ping(ctx).Err(); err != nil {
			_ = t.close()
			return nil, fmt.Errorf("loadgen: resp %s: %w", addr, err)
		}
	}
	return t, nil
}

func (t *respTarget) newCaller(_ context.Context, i int) (caller, error) {
	return &respCaller{t: t, n: i % len(t.clients), args: []any{"WEIR.TAKE", t.limit, "", t.cost}}, nil
}

func (t *respTarget) close() error { return closeAll(t.clients) }

type respCaller struct {
	t    *respTarget
	n    int // index of the node of the next request
	args []any
}

func (c *respCaller) take(ctx context.Context, k int) (bool, error) {
	cl := c.t.clients[c.n]
	if c.t.rotate {
		c.n = (c.n + 1) % len(c.t.clients)
	}
	c.args[2] = c.t.keys[k]
	v, err := cl.Do(ctx, c.args...).Result()
	if err != nil {
		return false, err
	}
	return respAllowed(v)
}

func (c *respCaller) close() error { return nil }

// respAllowed reads the allowed flag of a WEIR.TAKE reply.
func respAllowed(v any) (bool, error) {
	switch x := v.(type) {
	case []any:
		if len(x) == 0 {
			return false, fmt.Errorf("%w: empty WEIR.TAKE reply", errProtocol)
		}
		return respAllowed(x[0])
	case map[any]any: // RESP3 map: {"allowed": 1, ...}
		if a, ok := x["allowed"]; ok {
			return respAllowed(a)
		}
	case int64:
		return x == 1, nil
	case bool:
		return x, nil
	}
	return false, fmt.Errorf("%w: WEIR.TAKE reply %T has no allowed flag", errProtocol, v)
}
