package resp_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestGoRedisTake: WEIR.TAKE's reply is [allowed, remaining,
// retry_after_ms, reset_after_ms], exact on the fake clock, over RESP2
// and RESP3.
func TestGoRedisTake(t *testing.T) {
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) {
			rn := startNode(t, testLimits, nil)
			c := rn.client(t, func(o *redis.Options) { o.Protocol = proto })
			if got := ints(t, c, "WEIR.TAKE", "export", "tenant:acme"); !slices.Equal(got, []int64{1, 5, 0, 500}) {
				t.Fatalf("first take = %v, want [1 5 0 500]", got)
			}
			if got := ints(t, c, "weir.take", "export", "tenant:acme", "5"); !slices.Equal(got, []int64{1, 0, 0, 3000}) {
				t.Fatalf("take of 5 = %v, want [1 0 0 3000]", got)
			}
			// Empty: a denial says when one token is back (500 ms at 2/s).
			if got := ints(t, c, "WEIR.TAKE", "export", "tenant:acme"); !slices.Equal(got, []int64{0, 0, 500, 3000}) {
				t.Fatalf("denied take = %v, want [0 0 500 3000]", got)
			}
			rn.clock.Advance(500 * time.Millisecond)
			if got := ints(t, c, "WEIR.TAKE", "export", "tenant:acme"); !slices.Equal(got, []int64{1, 0, 0, 3000}) {
				t.Fatalf("take after 500ms = %v, want [1 0 0 3000]", got)
			}
		})
	}
}

// TestGoRedisMTake: WEIR.MTAKE spends every check or none.
func TestGoRedisMTake(t *testing.T) {
	rn := startNode(t, testLimits, nil)
	c := rn.client(t, nil)
	ctx := context.Background()
	v, err := c.Do(ctx, "WEIR.MTAKE", "export", "t1", "2", "search", "t1", "3").Slice()
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint([]any{int64(1), int64(0), []any{int64(1), int64(4), int64(0), int64(1000)}, []any{int64(1), int64(0), int64(0), int64(3000)}})
	if fmt.Sprint(v) != want {
		t.Fatalf("MTAKE = %v, want %v", v, want)
	}
	// search is empty: the export check must not be spent either.
	v, err = c.Do(ctx, "WEIR.MTAKE", "export", "t1", "4", "search", "t1", "1").Slice()
	if err != nil {
		t.Fatal(err)
	}
	if v[0] != int64(0) || v[1] != int64(1000) {
		t.Fatalf("denied MTAKE = %v, want allowed 0 and retry 1000 ms", v)
	}
	if got := ints(t, c, "WEIR.TAKE", "export", "t1", "4"); !slices.Equal(got, []int64{1, 0, 0, 3000}) {
		t.Fatalf("export after a denied MTAKE = %v: the denied request spent", got)
	}
}

// TestGoRedisLeases: WEIR.ACQUIRE, RENEW and RELEASE.
func TestGoRedisLeases(t *testing.T) {
	rn := startNode(t, testLimits, nil)
	c := rn.client(t, nil)
	ctx := context.Background()
	acquire := func(args ...any) []any {
		t.Helper()
		v, err := c.Do(ctx, append([]any{"WEIR.ACQUIRE", "export-db", "tenant:acme"}, args...)...).Slice()
		if err != nil {
			t.Fatalf("ACQUIRE: %v", err)
		}
		if len(v) != 5 {
			t.Fatalf("ACQUIRE = %v, want 5 elements", v)
		}
		return v
	}
	a := acquire("TTL", "1000", "HOLDER", "worker-1")
	if a[0] != int64(1) || a[1] == "" || a[3] != int64(1000) {
		t.Fatalf("first ACQUIRE = %v, want granted with an id and ttl 1000", a)
	}
	b := acquire()
	if b[0] != int64(1) || b[3] != int64(30000) || b[2].(int64) <= a[2].(int64) {
		t.Fatalf("second ACQUIRE = %v, want granted, ttl 30000, fencing above %v", b, a[2])
	}
	if r := acquire(); r[0] != int64(0) || r[1] != "" || r[4].(int64) < 1 {
		t.Fatalf("third ACQUIRE = %v, want refused with a retry hint", r)
	}
	id := a[1].(string)
	if ttl, err := c.Do(ctx, "WEIR.RENEW", id, "2000").Int64(); err != nil || ttl != 2000 {
		t.Fatalf("RENEW = %v, %v; want 2000", ttl, err)
	}
	if s, err := c.Do(ctx, "WEIR.RELEASE", id).Text(); err != nil || s != "OK" {
		t.Fatalf("RELEASE = %q, %v", s, err)
	}
	if s, err := c.Do(ctx, "WEIR.RELEASE", id).Text(); err != nil || s != "OK" {
		t.Fatalf("second RELEASE = %q, %v; releasing twice is not an error", s, err)
	}
	if err := c.Do(ctx, "WEIR.RENEW", id).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOTFOUND ") {
		t.Fatalf("RENEW of a released lease: %v, want NOTFOUND", err)
	}
	if r := acquire(); r[0] != int64(1) {
		t.Fatalf("ACQUIRE after RELEASE = %v, want granted", r)
	}
}

// TestGoRedisConnection: the connection commands go-redis and other
// clients send.
func TestGoRedisConnection(t *testing.T) {
	rn := startNode(t, testLimits, nil)
	ctx := context.Background()
	for _, proto := range []int{2, 3} {
		c := rn.client(t, func(o *redis.Options) { o.Protocol = proto; o.ClientName = "svc-a"; o.DB = 0 })
		if s, err := c.Ping(ctx).Result(); err != nil || s != "PONG" {
			t.Fatalf("RESP%d PING = %q, %v", proto, s, err)
		}
		if s, err := c.Echo(ctx, "hi there").Result(); err != nil || s != "hi there" {
			t.Fatalf("ECHO = %q, %v", s, err)
		}
		if s, err := c.ClientGetName(ctx).Result(); err != nil || s != "svc-a" {
			t.Fatalf("RESP%d CLIENT GETNAME = %q, %v (SETNAME on connect)", proto, s, err)
		}
		if id, err := c.ClientID(ctx).Result(); err != nil || id < 1 {
			t.Fatalf("CLIENT ID = %d, %v", id, err)
		}
		hello, err := c.Do(ctx, "HELLO", proto).Result()
		if err != nil {
			t.Fatalf("HELLO %d: %v", proto, err)
		}
		if m, ok := hello.(map[any]any); proto == 3 && (!ok || m["server"] != "weir" || m["proto"] != int64(3)) {
			t.Fatalf("HELLO 3 = %#v, want a map with server weir, proto 3", hello)
		}
		if a, ok := hello.([]any); proto == 2 && (!ok || len(a) != 14 || a[0] != "server" || a[1] != "weir") {
			t.Fatalf("HELLO 2 = %#v, want a flat array of 7 pairs", hello)
		}
		if err := c.Do(ctx, "SELECT", "1").Err(); err == nil || err.Error() != "ERR DB index is out of range" {
			t.Fatalf("SELECT 1: %v", err)
		}
		if err := c.Do(ctx, "SELECT", "0").Err(); err != nil {
			t.Fatalf("SELECT 0: %v", err)
		}
	}
	c := rn.client(t, nil)
	cmds, err := c.Command(ctx).Result()
	if err != nil {
		t.Fatalf("COMMAND: %v", err)
	}
	for _, name := range []string{"weir.take", "weir.mtake", "weir.ctake", "cl.throttle", "weir.acquire", "weir.renew", "weir.release", "ping", "hello", "command", "client", "select", "quit", "auth", "echo"} {
		if _, ok := cmds[name]; !ok {
			t.Errorf("COMMAND lacks %s", name)
		}
	}
	if info := cmds["cl.throttle"]; info == nil || info.Arity != -5 || info.FirstKeyPos != 1 {
		t.Errorf("COMMAND cl.throttle = %+v, want arity -5, first key 1", info)
	}
	if n, err := c.Do(ctx, "COMMAND", "COUNT").Int(); err != nil || n != len(cmds) {
		t.Fatalf("COMMAND COUNT = %d, %v; want %d", n, err, len(cmds))
	}
	docs, err := c.Do(ctx, "COMMAND", "DOCS", "weir.take").Result()
	if m, ok := docs.(map[any]any); err != nil || !ok || len(m) != 1 || m["weir.take"].(map[any]any)["summary"] == "" {
		t.Fatalf("COMMAND DOCS weir.take = %#v, %v", docs, err)
	}
	// QUIT answers OK and closes the connection.
	conn := c.Conn()
	defer conn.Close()
	if err := conn.Do(ctx, "QUIT").Err(); err != nil {
		t.Fatalf("QUIT: %v", err)
	}
	if err := conn.Ping(ctx).Err(); err == nil {
		t.Fatal("PING after QUIT on the same connection succeeded")
	}
}

// TestGoRedisPipeline: pipelined commands are answered in order.
func TestGoRedisPipeline(t *testing.T) {
	rn := startNode(t, strings.Replace(testLimits, "capacity: 6", "capacity: 1000", 1), nil)
	c := rn.client(t, nil)
	ctx := context.Background()
	const n = 1500 // more than one MaxPipeline batch
	cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for range n {
			p.Do(ctx, "WEIR.TAKE", "export", "k")
		}
		p.Ping(ctx)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatalf("pipeline: %v", err)
	}
	for i := range n {
		v, err := cmds[i].(*redis.Cmd).Int64Slice()
		if err != nil {
			t.Fatalf("command %d: %v", i, err)
		}
		want := []int64{1, int64(999 - i), 0, int64(500 * (i + 1))}
		if i >= 1000 {
			want = []int64{0, 0, 500, 500_000}
		}
		if !slices.Equal(v, want) {
			t.Fatalf("command %d = %v, want %v", i, v, want)
		}
	}
	if s, err := cmds[n].(*redis.StatusCmd).Result(); err != nil || s != "PONG" {
		t.Fatalf("trailing PING = %q, %v", s, err)
	}
}
