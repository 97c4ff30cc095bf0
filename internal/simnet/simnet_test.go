package simnet

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMatrix(t *testing.T) {
	n := New(1)
	defer n.Close()
	type probe struct {
		from, to string
		want     bool
	}
	check := func(step string, ps []probe) {
		t.Helper()
		for _, p := range ps {
			if got := n.Reachable(p.from, p.to); got != p.want {
				t.Errorf("%s: Reachable(%s, %s) = %v, want %v", step, p.from, p.to, got, p.want)
			}
		}
	}
	check("initial", []probe{{"a", "b", true}, {"a", "a", true}})
	n.Cut("a", "b")
	check("cut", []probe{{"a", "b", false}, {"b", "a", false}, {"a", "c", true}})
	n.Heal()
	n.CutOneWay("a", "b")
	check("one way", []probe{{"a", "b", false}, {"b", "a", true}})
	n.Heal()
	n.Isolate("c")
	check("isolate", []probe{{"a", "c", false}, {"c", "z", false}, {"c", "c", true}, {"a", "b", true}})
	n.Heal()
	n.Split([]string{"a", "b"}, []string{"c", "d", "e"})
	check("split", []probe{{"a", "b", true}, {"c", "e", true}, {"a", "c", false}, {"e", "b", false}})
	n.Heal()
	check("healed", []probe{{"a", "c", true}, {"c", "a", true}})
}

func recvPacket(t *testing.T, tr *Transport, within time.Duration) (*memberlist.Packet, bool) {
	t.Helper()
	select {
	case p := <-tr.PacketCh():
		return p, true
	case <-time.After(within):
		return nil, false
	}
}

func TestPacketsDropAcrossCut(t *testing.T) {
	n := New(1)
	defer n.Close()
	a, err := n.Transport("10.0.0.1", 7946)
	if err != nil {
		t.Fatal(err)
	}
	b, err := n.Transport("10.0.0.2", 7946)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.WriteTo([]byte("hi"), "10.0.0.2:7946"); err != nil {
		t.Fatal(err)
	}
	p, ok := recvPacket(t, b, time.Second)
	if !ok || string(p.Buf) != "hi" || p.From.String() != "10.0.0.1:7946" {
		t.Fatalf("got %v %v", p, ok)
	}
	n.Cut("10.0.0.1", "10.0.0.2")
	if _, err := a.WriteTo([]byte("lost"), "10.0.0.2:7946"); err != nil {
		t.Fatalf("WriteTo across a cut must not fail: %v", err)
	}
	if _, err := a.WriteTo([]byte("nobody"), "10.0.0.9:1"); err != nil {
		t.Fatalf("WriteTo to no receiver must not fail: %v", err)
	}
	if s := n.Stats(); s.PacketsDropped != 2 || s.PacketsSent != 3 {
		t.Fatalf("stats %+v", s)
	}
	n.Heal()
	a.WriteTo([]byte("again"), "10.0.0.2:7946")
	p, ok = recvPacket(t, b, time.Second)
	if !ok || string(p.Buf) != "again" {
		t.Fatalf("after heal got %v %v (the cut packet must not be delivered late)", p, ok)
	}
	b.Shutdown()
	a.WriteTo([]byte("x"), "10.0.0.2:7946")
	if s := n.Stats(); s.PacketsDropped != 3 {
		t.Fatalf("packet to a shut down transport: stats %+v", s)
	}
	if _, err := b.WriteTo([]byte("x"), "10.0.0.1:7946"); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write from shut down transport: %v", err)
	}
}

func TestLossIsSeeded(t *testing.T) {
	run := func() uint64 {
		n := New(42)
		defer n.Close()
		a, _ := n.Transport("10.0.0.1", 1)
		b, _ := n.Transport("10.0.0.2", 1)
		n.Loss(0.3)
		for range 200 {
			a.WriteTo([]byte("x"), "10.0.0.2:1")
			select {
			case <-b.PacketCh():
			default:
			}
		}
		return n.Stats().PacketsDropped
	}
	d1, d2 := run(), run()
	if d1 != d2 {
		t.Fatalf("same seed, different drops: %d vs %d", d1, d2)
	}
	if d1 < 30 || d1 > 90 {
		t.Fatalf("dropped %d of 200 at loss 0.3", d1)
	}
}

func TestDialRefusedAndTimeout(t *testing.T) {
	n := New(1)
	defer n.Close()
	ctx := context.Background()
	if _, err := n.Dial(ctx, "h1", "h2:80"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("no listener: %v", err)
	}
	l, err := n.Listen("h2", 80)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	n.Isolate("h2")
	ctx2, cancel := context.WithTimeout(ctx, 80*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = n.Dial(ctx2, "h1", "h2:80")
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("dial across a cut: %v, want a timeout", err)
	}
	if el := time.Since(start); el < 80*time.Millisecond {
		t.Fatalf("dial across a cut failed fast (%v); it must hang until the deadline", el)
	}
	if n.DialCount("h2:80") != 2 {
		t.Fatalf("DialCount = %d", n.DialCount("h2:80"))
	}
}

func TestDialCompletesWhenHealed(t *testing.T) {
	n := New(1)
	defer n.Close()
	l, _ := n.Listen("h2", 80)
	defer l.Close()
	n.Cut("h1", "h2")
	res := make(chan error, 1)
	go func() {
		c, err := n.Dial(context.Background(), "h1", "h2:80")
		if err == nil {
			c.Close()
		}
		res <- err
	}()
	select {
	case err := <-res:
		t.Fatalf("dial returned across a cut: %v", err)
	case <-time.After(30 * time.Millisecond):
	}
	n.Heal()
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// pair returns a dialed stream h1→h2 and its accepted end.
func pair(t *testing.T, n *Network) (net.Conn, net.Conn) {
	t.Helper()
	l, err := n.Listen("h2", 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	c, err := n.Dial(context.Background(), "h1", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c, s
}

func readTimeout(c net.Conn, d time.Duration) (string, error) {
	c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 64)
	k, err := c.Read(buf)
	return string(buf[:k]), err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestStreamHeldAcrossCut(t *testing.T) {
	n := New(1)
	defer n.Close()
	c, s := pair(t, n)
	if _, err := c.Write([]byte("a")); err != nil {
		t.Fatal(err)
	}
	if got, err := readTimeout(s, time.Second); got != "a" || err != nil {
		t.Fatalf("read %q %v", got, err)
	}
	n.Cut("h1", "h2")
	if _, err := c.Write([]byte("b")); err != nil {
		t.Fatalf("write across a cut must be buffered: %v", err)
	}
	if got, err := readTimeout(s, 50*time.Millisecond); !isTimeout(err) {
		t.Fatalf("read across a cut: %q %v, want a timeout", got, err)
	}
	c.Close()
	if _, err := readTimeout(s, 20*time.Millisecond); !isTimeout(err) {
		t.Fatalf("EOF crossed a cut: %v", err)
	}
	n.Heal()
	if got, err := readTimeout(s, time.Second); got != "b" || err != nil {
		t.Fatalf("after heal read %q %v", got, err)
	}
	if _, err := readTimeout(s, time.Second); !errors.Is(err, io.EOF) {
		t.Fatalf("after heal want EOF, got %v", err)
	}
	if _, err := s.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("write to closed peer: %v", err)
	}
}

func TestStreamOneWayCut(t *testing.T) {
	n := New(1)
	defer n.Close()
	c, s := pair(t, n)
	n.CutOneWay("h1", "h2")
	c.Write([]byte("held"))
	s.Write([]byte("flows"))
	if got, err := readTimeout(c, time.Second); got != "flows" || err != nil {
		t.Fatalf("h2→h1 read %q %v", got, err)
	}
	if _, err := readTimeout(s, 30*time.Millisecond); !isTimeout(err) {
		t.Fatalf("h1→h2 must be held: %v", err)
	}
}

func TestWriteBlocksWhenWindowFull(t *testing.T) {
	n := New(1)
	defer n.Close()
	c, _ := pair(t, n)
	n.Cut("h1", "h2")
	c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	k, err := c.Write(make([]byte, window+10))
	if k != window || !isTimeout(err) {
		t.Fatalf("wrote %d, %v; want %d and a timeout", k, err, window)
	}
}

func TestLocalCloseUnblocksRead(t *testing.T) {
	n := New(1)
	defer n.Close()
	c, _ := pair(t, n)
	res := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 1))
		res <- err
	}()
	c.Close()
	if err := <-res; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
}

func TestTransportShutdown(t *testing.T) {
	n := New(1)
	defer n.Close()
	a, _ := n.Transport("10.0.0.1", 0)
	b, _ := n.Transport("10.0.0.2", 0)
	c, err := a.DialTimeout(b.Addr().String(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	s := <-b.StreamCh()
	// A dial in progress across a cut is aborted by Shutdown.
	n.Isolate("10.0.0.3")
	res := make(chan error, 1)
	go func() {
		_, err := a.DialTimeout("10.0.0.3:1", time.Minute)
		res <- err
	}()
	a.Shutdown()
	if err := <-res; err == nil {
		t.Fatal("dial survived Shutdown")
	}
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("dialed stream after Shutdown: %v", err)
	}
	if _, err := readTimeout(s, time.Second); !errors.Is(err, io.EOF) {
		t.Fatalf("peer of a shut down transport: %v", err)
	}
	if _, err := b.DialTimeout(a.Addr().String(), time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial to a shut down transport: %v", err)
	}
	if _, err := n.Transport("10.0.0.1", a.Addr().Port); err != nil {
		t.Fatalf("address not released: %v", err)
	}
	if _, err := n.Transport("10.0.0.2", b.Addr().Port); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("double bind: %v", err)
	}
	if _, err := n.Transport("not-an-ip", 1); err == nil {
		t.Fatal("transport on a non-IP host")
	}
}

// TestGRPC runs a gRPC health check over simnet: it works, stalls across a
// cut until the RPC deadline, and works again after Heal.
func TestGRPC(t *testing.T) {
	n := New(1)
	defer n.Close()
	l, err := n.Listen("10.0.0.2", 8081)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(l) }()
	defer func() { srv.Stop(); <-done }()

	cc, err := grpc.NewClient("passthrough:///10.0.0.2:8081",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			return n.Dial(ctx, "10.0.0.1", a)
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := healthpb.NewHealthClient(cc)
	check := func(d time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	if err := check(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	n.Cut("10.0.0.1", "10.0.0.2")
	if err := check(100 * time.Millisecond); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("across a cut: %v, want DeadlineExceeded", err)
	}
	n.Heal()
	if err := check(5 * time.Second); err != nil {
		t.Fatalf("after heal: %v", err)
	}
}

// TestDelayHoldsStreamBytes: bytes a delayed host writes are readable only
// its delay later, in order with bytes written after the delay is lifted;
// the other direction, and EOF after held bytes, are unchanged.
func TestDelayHoldsStreamBytes(t *testing.T) {
	n := New(1)
	defer n.Close()
	c, s := pair(t, n)
	const d = 150 * time.Millisecond
	n.Delay("h1", d)
	start := time.Now()
	if _, err := c.Write([]byte("a")); err != nil {
		t.Fatal(err)
	}
	n.Delay("h1", 0)
	if _, err := c.Write([]byte("b")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write([]byte("z")); err != nil { // h2 is not delayed
		t.Fatal(err)
	}
	if got, err := readTimeout(c, time.Second); got != "z" || err != nil {
		t.Fatalf("undelayed direction: %q %v", got, err)
	}
	if elapsed := time.Since(start); elapsed >= d {
		t.Fatalf("undelayed bytes took %v", elapsed)
	}
	got := ""
	for len(got) < 2 {
		part, err := readTimeout(s, time.Second)
		if err != nil {
			t.Fatalf("read: %q %v", got, err)
		}
		got += part
	}
	if elapsed := time.Since(start); got != "ab" || elapsed < d {
		t.Fatalf("read %q after %v, want \"ab\" after at least %v", got, elapsed, d)
	}
	n.Delay("h1", d)
	c.Write([]byte("c"))
	c.Close()
	if got, err := readTimeout(s, time.Second); got != "c" || err != nil {
		t.Fatalf("held bytes before EOF: %q %v", got, err)
	}
	if _, err := readTimeout(s, time.Second); !errors.Is(err, io.EOF) {
		t.Fatalf("want EOF after the held bytes, got %v", err)
	}
}
