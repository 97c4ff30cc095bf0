package resp_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weir-rl/weir/node"
)

// rawConn is a plain TCP connection to a RESP endpoint that sends inline
// commands and reads whole replies, for the exact bytes of an answer.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

// do sends one inline command and returns its reply, as RESP bytes.
func (c *rawConn) do(cmd string) string {
	c.t.Helper()
	if _, err := fmt.Fprintf(c.nc, "%s\r\n", cmd); err != nil {
		c.t.Fatal(err)
	}
	return c.reply()
}

// reply reads one whole RESP2 reply (simple, error, integer, bulk, array).
func (c *rawConn) reply() string {
	c.t.Helper()
	line, err := c.br.ReadString('\n')
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	switch line[0] {
	case '$':
		var n int
		if _, err := fmt.Sscanf(line, "$%d\r\n", &n); err != nil {
			c.t.Fatalf("bulk header %q: %v", line, err)
		}
		if n < 0 {
			return line
		}
		b := make([]byte, n+2)
		if _, err := c.br.Read(b); err != nil {
			c.t.Fatal(err)
		}
		return line + string(b)
	case '*':
		var n int
		if _, err := fmt.Sscanf(line, "*%d\r\n", &n); err != nil {
			c.t.Fatalf("array header %q: %v", line, err)
		}
		for range max(n, 0) {
			line += c.reply()
		}
	}
	return line
}

// TestMultiExecRunsInOrder: MULTI queues, EXEC answers every queued
// command in order, each deciding as if sent alone: a denial in the
// middle does not undo the take before it, so the batch is not atomic.
func TestMultiExecRunsInOrder(t *testing.T) {
	rn := startNode(t, testLimits, nil)
	c := dialRaw(t, rn.addr)
	steps := []struct{ in, want string }{
		{"MULTI", "+OK\r\n"},
		{"WEIR.TAKE export k 5", "+QUEUED\r\n"},
		{"WEIR.TAKE export k 5", "+QUEUED\r\n"},
		{"CL.THROTTLE k 1 1 1", "+QUEUED\r\n"},
		{"WEIR.TAKE nope k", "+QUEUED\r\n"}, // an error found only when run
		{"PING", "+QUEUED\r\n"},
		{"EXEC", "*5\r\n*4\r\n:1\r\n:1\r\n:0\r\n:2500\r\n*4\r\n:0\r\n:1\r\n:2000\r\n:2500\r\n" +
			"*5\r\n:0\r\n:2\r\n:1\r\n:-1\r\n:1\r\n-ERR checks[0]: unknown limit \"nope\"\r\n+PONG\r\n"},
		// The first take of 5 stayed spent although the second was denied.
		{"WEIR.TAKE export k", "*4\r\n:1\r\n:0\r\n:0\r\n:3000\r\n"},
		{"MULTI", "+OK\r\n"},
		{"EXEC", "*0\r\n"},
	}
	for _, s := range steps {
		if got := c.do(s.in); got != s.want {
			t.Fatalf("%s: got %q, want %q", s.in, got, s.want)
		}
	}
}

// TestMultiRefusalsAbortExec: a command refused while queuing (unknown,
// wrong arity, AUTH or HELLO) makes EXEC answer EXECABORT and run
// nothing; the control commands answer as Redis does.
func TestMultiRefusalsAbortExec(t *testing.T) {
	rn := startNode(t, testLimits, func(c *node.Config) { c.RESP.MaxPipeline = 3; c.RESP.MaxRequestBytes = 64 })
	c := dialRaw(t, rn.addr)
	steps := []struct{ in, want string }{
		{"EXEC", "-ERR EXEC without MULTI\r\n"},
		{"DISCARD", "-ERR DISCARD without MULTI\r\n"},
		{"WATCH k", "-ERR WATCH is not supported: Weir has no keyspace to watch (WEIR.MTAKE takes several buckets all or nothing)\r\n"},
		{"UNWATCH", "+OK\r\n"},
		{"MULTI", "+OK\r\n"},
		{"MULTI", "-ERR MULTI calls can not be nested\r\n"},
		{"WATCH k", "-ERR WATCH inside MULTI is not allowed\r\n"},
		{"WEIR.TAKE export a", "+QUEUED\r\n"},
		{"EXEC", "*1\r\n*4\r\n:1\r\n:5\r\n:0\r\n:500\r\n"}, // neither refusal above aborts
	}
	for _, refused := range []struct{ in, want string }{
		{"FLUSHALL", "-ERR unknown command 'FLUSHALL'\r\n"},
		{"WEIR.TAKE export", "-ERR wrong number of arguments for 'weir.take' command\r\n"},
		{"AUTH x", "-ERR Command not allowed inside a transaction\r\n"},
		{"HELLO 3", "-ERR Command not allowed inside a transaction\r\n"},
	} {
		steps = append(steps, []struct{ in, want string }{
			{"MULTI", "+OK\r\n"},
			{"WEIR.TAKE export b", "+QUEUED\r\n"},
			refused,
			{"WEIR.TAKE export b", "+QUEUED\r\n"},
			{"EXEC", "-EXECABORT Transaction discarded because of previous errors.\r\n"},
		}...)
	}
	steps = append(steps, []struct{ in, want string }{
		// Nothing queued above ran: b's bucket is full.
		{"WEIR.TAKE export b", "*4\r\n:1\r\n:5\r\n:0\r\n:500\r\n"},
		// DISCARD drops the queue.
		{"MULTI", "+OK\r\n"},
		{"WEIR.TAKE export b", "+QUEUED\r\n"},
		{"DISCARD", "+OK\r\n"},
		{"WEIR.TAKE export b", "*4\r\n:1\r\n:4\r\n:0\r\n:1000\r\n"},
		// The queue's bounds: MaxPipeline (3) commands, MaxRequestBytes (64) bytes.
		{"MULTI", "+OK\r\n"},
		{"PING", "+QUEUED\r\n"},
		{"PING", "+QUEUED\r\n"},
		{"PING", "+QUEUED\r\n"},
		{"PING", "-ERR transaction holds 3 commands, the most it may queue\r\n"},
		{"EXEC", "-EXECABORT Transaction discarded because of previous errors.\r\n"},
		{"MULTI", "+OK\r\n"},
		{"ECHO " + strings.Repeat("x", 40), "+QUEUED\r\n"},
		{"ECHO " + strings.Repeat("y", 40), "-ERR transaction's queued arguments would exceed 64 bytes\r\n"},
		{"EXEC", "-EXECABORT Transaction discarded because of previous errors.\r\n"},
		// QUIT is not queued: it closes the connection.
		{"MULTI", "+OK\r\n"},
		{"QUIT", "+OK\r\n"},
	}...)
	for _, s := range steps {
		if got := c.do(s.in); got != s.want {
			t.Fatalf("%s: got %q, want %q", s.in, got, s.want)
		}
	}
}

// TestGoRedisTxPipeline: go-redis's TxPipelined (MULTI ... EXEC) gets
// one answer per command, over RESP2 and RESP3.
func TestGoRedisTxPipeline(t *testing.T) {
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) {
			rn := startNode(t, testLimits, nil)
			c := rn.client(t, func(o *redis.Options) { o.Protocol = proto })
			ctx := context.Background()
			cmds, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
				for range 7 {
					p.Do(ctx, "WEIR.TAKE", "export", "tx")
				}
				return nil
			})
			if err != nil {
				t.Fatalf("TxPipelined: %v", err)
			}
			var allowed []int64
			for _, cmd := range cmds {
				v, err := cmd.(*redis.Cmd).Int64Slice()
				if err != nil {
					t.Fatal(err)
				}
				allowed = append(allowed, v[0])
			}
			if !slices.Equal(allowed, []int64{1, 1, 1, 1, 1, 1, 0}) {
				t.Fatalf("allowed = %v, want six takes of six and a denial", allowed)
			}
		})
	}
}
