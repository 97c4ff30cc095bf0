package resp_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHostileInput: input past the bounds is answered with a protocol
// error and the connection closed, and the node keeps answering others.
func TestHostileInput(t *testing.T) {
	rn := startNode(t, testLimits, nil)
	good := rn.client(t, nil)
	ctx := context.Background()
	tests := []struct {
		name, in, want string
	}{
		{"bulk length near MaxInt64", "*1\r\n$9223372036854775807\r\n", "-ERR Protocol error: argument of 9223372036854775807 bytes, over the 4096-byte maximum\r\n"},
		{"multibulk count of 2^62", "*4611686018427387904\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"too many arguments", "*513\r\n", "-ERR Protocol error: command has 513 arguments, over the 512 maximum\r\n"},
		{"argument too long", "*2\r\n$4\r\nECHO\r\n$4097\r\n", "-ERR Protocol error: argument of 4097 bytes, over the 4096-byte maximum\r\n"},
		{"inline line too long", strings.Repeat("x", 20000), "-ERR Protocol error: too big inline request\r\n"},
		{"not a bulk", "*1\r\n+PING\r\n", "-ERR Protocol error: expected '$', got '+'\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nc, err := net.Dial("tcp", rn.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.WriteString(nc, tt.in); err != nil {
				t.Fatal(err)
			}
			// The server answers and closes; closing with input unread
			// may reach the client as a reset after the answer.
			got, err := io.ReadAll(nc)
			if err != nil && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("read: %v (got %q)", err, got)
			}
			if string(got) != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
			if err := good.Ping(ctx).Err(); err != nil {
				t.Fatalf("another client after the hostile one: %v", err)
			}
		})
	}
}

// TestUnreadAnswers: a client that pipelines many commands and never reads
// holds only its own connection; others are answered, and the node shuts
// down cleanly (the leak check at the end of the package sees no
// goroutine left).
func TestUnreadAnswers(t *testing.T) {
	rn := startNode(t, testLimits, nil)
	nc, err := net.Dial("tcp", rn.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	go func() { // stops when the server or the deferred Close ends the connection
		w := bufio.NewWriter(nc)
		for range 200_000 {
			if _, err := w.WriteString("*1\r\n$4\r\nPING\r\n"); err != nil {
				return
			}
		}
		_ = w.Flush()
	}()
	good := rn.client(t, nil)
	for range 20 {
		if got := ints(t, good, "WEIR.TAKE", "search", "other"); len(got) != 4 {
			t.Fatalf("take beside a non-reading client: %v", got)
		}
		rn.clock.Advance(time.Second)
	}
}
