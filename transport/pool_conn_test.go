package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-rl/weir/bucket"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Connections between pools and servers: the shared secret, a peer down,
// a dropped or closed pool, a stalled handshake.

// TestWrongSecretCannotHandshake: a pool holding another secret's
// credentials, or none, cannot complete the TLS handshake with a server,
// so neither a forward nor a handoff reaches its handler; and a server with
// the wrong secret is refused by a pool the same way.
func TestWrongSecretCannotHandshake(t *testing.T) {
	rec := &recorder{}
	addr := startServer(t, rec, testCreds(t, "right"))
	for name, creds := range map[string]*Credentials{"wrong": testCreds(t, "wrong"), "none": nil} {
		cfg := LocalConfig()
		cfg.Credentials = creds
		p := newTestPool(t, cfg)
		if _, err := p.Do(context.Background(), addr, take(0)); status.Code(err) != codes.Unavailable {
			t.Errorf("%s secret: Do err = %v, want Unavailable (handshake refused)", name, err)
		}
		err := p.Handoff(context.Background(), addr, State{Buckets: []bucket.Entry{{}}})
		if status.Code(err) != codes.Unavailable {
			t.Errorf("%s secret: Handoff err = %v, want Unavailable", name, err)
		}
	}
	if n := rec.calls.Load(); n != 0 {
		t.Fatalf("handler called %d times without the secret", n)
	}
	// A server with the wrong secret: the client refuses it.
	impostor := &recorder{}
	bad := startServer(t, impostor, testCreds(t, "wrong"))
	cfg := LocalConfig()
	cfg.Credentials = testCreds(t, "right")
	if _, err := newTestPool(t, cfg).Do(context.Background(), bad, take(0)); status.Code(err) != codes.Unavailable {
		t.Errorf("impostor server: Do err = %v, want Unavailable", err)
	}
	if n := impostor.calls.Load(); n != 0 {
		t.Fatalf("impostor server was sent %d calls", n)
	}
	// The right secret gets through the same server.
	if _, err := newTestPool(t, cfg).Do(context.Background(), addr, take(0)); err != nil {
		t.Fatalf("right secret: %v", err)
	}
}

// closedPort returns a loopback address nothing listens on: a port just
// picked and closed again.
func closedPort(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

func TestPeerDownFailsFast(t *testing.T) {
	addr := closedPort(t)
	cfg := LocalConfig()
	cfg.Deadline = 10 * time.Second
	p := newTestPool(t, cfg)
	begin := time.Now()
	_, err := p.Do(context.Background(), addr, take(0))
	elapsed := time.Since(begin)
	// Unavailable, not DeadlineExceeded: the refused connection failed the
	// call at once instead of leaving it to wait out the deadline.
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v, want Unavailable", err)
	}
	if elapsed > cfg.Deadline/2 {
		t.Fatalf("took %v to notice a closed port", elapsed)
	}
	t.Logf("closed port noticed after %v", elapsed)
}

func TestDropFailsInFlightAndReconnects(t *testing.T) {
	rec := &recorder{block: make(chan struct{}), entered: make(chan struct{}, 1)}
	addr := startServer(t, rec, nil)
	t.Cleanup(func() { close(rec.block) })
	cfg := LocalConfig()
	cfg.Deadline = 10 * time.Second
	p := newTestPool(t, cfg)

	errc := make(chan error, 1)
	begin := time.Now()
	go func() {
		_, err := p.Do(context.Background(), addr, take(0))
		errc <- err
	}()
	<-rec.entered // the request is at the owner, which holds it
	p.Drop(addr)
	if err := <-errc; err == nil {
		t.Fatal("in-flight Do survived Drop")
	}
	if elapsed := time.Since(begin); elapsed > cfg.Deadline/2 {
		t.Fatalf("in-flight Do waited %v after Drop", elapsed)
	}
	p.Drop(addr) // unknown now: no-op

	// A fresh connection works (with a second server that does not block).
	addr2 := startServer(t, &recorder{}, nil)
	rep, err := p.Do(context.Background(), addr2, take(4))
	if err != nil {
		t.Fatal(err)
	}
	checkEcho(t, 4, rep)
}

func TestDropReconnectsThroughDialer(t *testing.T) {
	addr := startServer(t, &recorder{}, nil)
	var dials atomic.Int64
	cfg := LocalConfig()
	// The pool hands the peer name to the dialer unresolved, as a
	// simulated network needs.
	cfg.Dialer = func(ctx context.Context, name string) (net.Conn, error) {
		if name != "peer-a" {
			return nil, fmt.Errorf("unknown peer %q", name)
		}
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	p := newTestPool(t, cfg)
	for i := range 3 {
		rep, err := p.Do(context.Background(), "peer-a", take(i))
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		checkEcho(t, i, rep)
		p.Drop("peer-a")
	}
	if n := dials.Load(); n != 3 {
		t.Fatalf("%d dials for 3 rounds with Drop between", n)
	}
}

func TestCloseFailsQueuedAndLaterCalls(t *testing.T) {
	rec := &recorder{block: make(chan struct{}), entered: make(chan struct{}, 1)}
	addr := startServer(t, rec, nil)
	t.Cleanup(func() { close(rec.block) })
	cfg := LocalConfig()
	cfg.Window = 100 * time.Millisecond
	cfg.Deadline = 10 * time.Second
	p := NewPool(cfg)

	// The first forward goes out at once and is held by the owner.
	first := make(chan error, 1)
	go func() {
		_, err := p.Do(context.Background(), addr, take(0))
		first <- err
	}()
	<-rec.entered
	// Queue a second call the way Do does, without a goroutine, so that it
	// is certainly waiting in the open batch behind the first when Close comes.
	pr, err := p.peer(addr)
	if err != nil {
		t.Fatal(err)
	}
	c := &call{req: take(1), ctx: context.Background(), deadline: time.Now().Add(cfg.Deadline), done: make(chan outcome, 1)}
	if err := pr.enqueue(c, time.Now()); err != nil {
		t.Fatal(err)
	}
	pr.mu.Lock()
	queued := pr.batch.Len()
	pr.mu.Unlock()
	if queued != 1 {
		t.Fatalf("second call not queued: Len %d", queued)
	}
	begin := time.Now()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if o := <-c.done; !errors.Is(o.err, ErrClosed) {
		t.Fatalf("queued call: err = %v, want ErrClosed", o.err)
	}
	if err := <-first; err == nil {
		t.Fatal("in-flight call survived Close")
	}
	if elapsed := time.Since(begin); elapsed > cfg.Deadline/2 {
		t.Fatalf("Close took %v with a call held at the owner", elapsed)
	}
	if err := pr.enqueue(c, time.Now()); !errors.Is(err, ErrClosed) {
		t.Fatalf("enqueue on a closed peer: err = %v, want ErrClosed", err)
	}
	if _, err := p.Do(context.Background(), addr, take(2)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Do after Close: err = %v, want ErrClosed", err)
	}
	if err := p.Handoff(context.Background(), addr, State{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Handoff after Close: err = %v, want ErrClosed", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if n := rec.calls.Load(); n != 1 {
		t.Fatalf("owner served %d batches, want only the first", n)
	}
}

// TestStopDoesNotWaitForAStalledHandshake: a connection that never sends
// its HTTP/2 preface (a peer cut off right after its TCP connect) must not
// hold Stop for gRPC's default 120 s connection timeout; it holds it for
// handshakeTimeout at most.
func TestStopDoesNotWaitForAStalledHandshake(t *testing.T) {
	srv, addr := startServerWith(t, nil, nil) // Cleanup checks what Serve returned
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The server is in its handshake once it accepted the connection;
	// a byte short of the preface keeps it there.
	if _, err := conn.Write([]byte("P")); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	go func() { srv.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(handshakeTimeout + 20*time.Second): // far below gRPC's 120 s
		t.Fatalf("Stop still waiting for a stalled handshake after %v", handshakeTimeout+20*time.Second)
	}
}
