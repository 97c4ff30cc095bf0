package resp

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

// serveTest starts s on a loopback listener and returns its address; the
// server is shut down in t.Cleanup.
func serveTest(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v", err)
		}
	})
	return ln.Addr().String()
}

// passwordConfig is a Config whose only password is "s3cret".
func passwordConfig() Config {
	cfg := DefaultConfig()
	cfg.Authenticate = func(_ context.Context, _, pass string) (any, error) {
		if pass == "s3cret" {
			return "caller", nil
		}
		return nil, errors.New("invalid username-password pair or user is disabled.")
	}
	return cfg
}

// waitClosed reads nc until the server closes it and returns how long that
// took and what was read; it fails the test when nc is still open after
// limit.
func waitClosed(t *testing.T, nc net.Conn, limit time.Duration) (time.Duration, string) {
	t.Helper()
	start := time.Now()
	_ = nc.SetReadDeadline(start.Add(limit))
	got, err := io.ReadAll(nc)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open after %v (read %q)", limit, got)
	}
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read: %v", err)
	}
	return time.Since(start), string(got)
}

// TestAuthTimeout: with Authenticate set, a connection that has not
// authenticated within AuthTimeout is closed, silent or chatty (PING is
// answered before AUTH but does not extend the deadline); one that
// authenticated in time stays open.
func TestAuthTimeout(t *testing.T) {
	cfg := passwordConfig()
	cfg.AuthTimeout = 300 * time.Millisecond
	addr := serveTest(t, New(fakeDecider{}, cfg, nil))

	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	chatty, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer chatty.Close()
	authed, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer authed.Close()
	_ = authed.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(authed)
	if got := roundTrip(t, authed, br, "AUTH s3cret\r\n", 1); got != "+OK\r\n" {
		t.Fatalf("AUTH: %q", got)
	}
	// The chatty one pings until it is cut off.
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for range tick.C {
			if _, err := io.WriteString(chatty, "PING\r\n"); err != nil {
				return
			}
		}
	}()
	if took, _ := waitClosed(t, silent, 5*time.Second); took > 3*time.Second {
		t.Fatalf("silent connection closed after %v, want about 300ms", took)
	}
	if _, got := waitClosed(t, chatty, 5*time.Second); !strings.HasPrefix(got, "+PONG\r\n") {
		t.Fatalf("chatty connection got %q before the close, want PONGs", got)
	}
	// The authenticated connection outlived both.
	if got := roundTrip(t, authed, br, "PING\r\n", 1); got != "+PONG\r\n" {
		t.Fatalf("authenticated connection after the auth timeout: %q", got)
	}
}

// TestCommandTimeout: a command whose bytes trickle in is cut off
// CommandTimeout after its first byte, however steadily it drips; a
// connection idle between commands is closed after IdleTimeout.
func TestCommandTimeout(t *testing.T) {
	cfg := DefaultConfig()
	cfg.CommandTimeout = 300 * time.Millisecond
	cfg.IdleTimeout = 400 * time.Millisecond
	addr := serveTest(t, New(fakeDecider{}, cfg, nil))

	drip, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer drip.Close()
	if _, err := io.WriteString(drip, "*2\r\n$4\r\nECHO\r\n$4000\r\n"); err != nil {
		t.Fatal(err)
	}
	go func() { // a byte every 20 ms: never idle, never done
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for range tick.C {
			if _, err := drip.Write([]byte("x")); err != nil {
				return
			}
		}
	}()
	if took, got := waitClosed(t, drip, 5*time.Second); took > 3*time.Second || got != "" {
		t.Fatalf("dripping command: closed after %v with %q, want about 300ms and no answer", took, got)
	}

	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	br := bufio.NewReader(idle)
	_ = idle.SetDeadline(time.Now().Add(5 * time.Second))
	if got := roundTrip(t, idle, br, "PING\r\n", 1); got != "+PONG\r\n" {
		t.Fatalf("PING: %q", got)
	}
	if took, _ := waitClosed(t, idle, 5*time.Second); took > 3*time.Second {
		t.Fatalf("idle connection closed after %v, want about 400ms", took)
	}
}

// TestDefaultTimeouts: the defaults close silent and unauthenticated
// connections (Redis's idle default, never, is not Weir's).
func TestDefaultTimeouts(t *testing.T) {
	c := DefaultConfig()
	if c.IdleTimeout <= 0 || c.AuthTimeout <= 0 || c.CommandTimeout <= 0 {
		t.Fatalf("defaults: idle %v, auth %v, command %v; want all positive", c.IdleTimeout, c.AuthTimeout, c.CommandTimeout)
	}
	if got := (Config{}).withDefaults(); got.IdleTimeout != c.IdleTimeout || got.AuthTimeout != c.AuthTimeout || got.CommandTimeout != c.CommandTimeout {
		t.Fatalf("zero Config: idle %v, auth %v, command %v; want the defaults", got.IdleTimeout, got.AuthTimeout, got.CommandTimeout)
	}
}

// TestPreAuthBounds: before AUTH a command may hold at most PreAuthMaxBytes
// (and PreAuthMaxArgs arguments): a larger one is a protocol error and a
// close as soon as its header says so, not a megabyte held; after AUTH the
// configured bounds apply.
func TestPreAuthBounds(t *testing.T) {
	addr := serveTest(t, New(fakeDecider{}, passwordConfig(), nil))
	big := "*201\r\n$4\r\nECHO\r\n"
	for range 200 {
		big += "$4000\r\n" + strings.Repeat("x", 4000) + "\r\n"
	}
	tests := []struct{ name, in, want string }{
		{"arguments", "*9\r\n", "-ERR Protocol error: command has 9 arguments, over the 8 maximum before AUTH\r\n"},
		{
			"bytes", "*5\r\n" + strings.Repeat("$4096\r\n"+strings.Repeat("x", 4096)+"\r\n", 4) + "$4096\r\n",
			"-ERR Protocol error: command over 16384 bytes before AUTH\r\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			if _, err := io.WriteString(nc, tt.in); err != nil {
				t.Fatal(err)
			}
			if _, got := waitClosed(t, nc, 5*time.Second); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
	// An 800 KB command after AUTH is read whole (and answered by the
	// arity check, since ECHO takes one argument).
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(nc)
	if got := roundTrip(t, nc, br, "AUTH s3cret\r\n", 1); got != "+OK\r\n" {
		t.Fatalf("AUTH: %q", got)
	}
	if got := roundTrip(t, nc, br, big, 1); got != "-ERR wrong number of arguments for 'echo' command\r\n" {
		t.Fatalf("big command after AUTH: %q", got)
	}
}
