package resp

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// roundTrip sends raw commands on nc and reads n reply lines.
func roundTrip(t *testing.T, nc net.Conn, br *bufio.Reader, in string, n int) string {
	t.Helper()
	if _, err := io.WriteString(nc, in); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for range n {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("read after %q: %v (got %q)", in, err, out.String())
		}
		out.WriteString(line)
	}
	return out.String()
}

// TestAuthenticateHook: with Config.Authenticate set, commands wait for
// AUTH or HELLO ... AUTH, a refused password says WRONGPASS, and the
// principal is kept for the connection.
func TestAuthenticateHook(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Authenticate = func(_ context.Context, user, pass string) (any, error) {
		if user == "default" && pass == "s3cret" || user == "svc" && pass == "pw" {
			return user, nil
		}
		return nil, errors.New("invalid username-password pair or user is disabled.")
	}
	s := New(fakeDecider{}, cfg, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v", err)
		}
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(nc)
	steps := []struct{ in, want string }{
		{"PING\r\n", "+PONG\r\n"},
		{"WEIR.TAKE export k\r\n", "-NOAUTH Authentication required.\r\n"},
		{"AUTH wrong\r\n", "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
		{"WEIR.TAKE export k\r\n", "-NOAUTH Authentication required.\r\n"},
		{"AUTH s3cret\r\n", "+OK\r\n"},
		{"WEIR.TAKE export k\r\n", "*4\r\n:1\r\n:9\r\n:0\r\n:1000\r\n"},
	}
	for _, st := range steps {
		if got := roundTrip(t, nc, br, st.in, strings.Count(st.want, "\n")); got != st.want {
			t.Fatalf("%q: got %q, want %q", st.in, got, st.want)
		}
	}
	// HELLO 3 AUTH on a fresh connection authenticates and switches to RESP3.
	nc2, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc2.Close()
	_ = nc2.SetDeadline(time.Now().Add(10 * time.Second))
	br2 := bufio.NewReader(nc2)
	if got := roundTrip(t, nc2, br2, "HELLO 3 AUTH svc nope\r\n", 1); !strings.HasPrefix(got, "-WRONGPASS") {
		t.Fatalf("HELLO with a bad password: %q", got)
	}
	if got := roundTrip(t, nc2, br2, "HELLO 3 AUTH svc pw\r\n", 1); got != "%7\r\n" {
		t.Fatalf("HELLO 3 AUTH svc pw: %q, want a map of 7", got)
	}
}
