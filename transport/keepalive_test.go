package transport

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The server's keepalive: a peer that is gone does not hold a stop.

// goneConn is a pool's connection whose far side can be made to vanish as
// a host that lost power does: once gone, nothing it writes reaches the
// server, nothing the server sends reaches the pool, and closing it sends
// no FIN. The socket itself stays open until the test ends.
type goneConn struct {
	net.Conn
	gone    *atomic.Bool
	dropped chan struct{} // closed when the server closed the socket after the vanishing
	closed  chan struct{}
	once    sync.Once
}

func (c *goneConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if !c.gone.Load() {
		return n, err
	}
	// What arrives after the vanishing is read off the socket and never
	// seen, until the server closes it.
	for err == nil {
		_, err = c.Conn.Read(p)
	}
	close(c.dropped)
	<-c.closed
	return 0, net.ErrClosed
}

func (c *goneConn) Write(p []byte) (int, error) {
	if c.gone.Load() {
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// SetDeadline and SetReadDeadline are ignored once gone: the pool's
// deadline on closing must not end the drain of the socket.
func (c *goneConn) SetDeadline(t time.Time) error {
	if c.gone.Load() {
		return nil
	}
	return c.Conn.SetDeadline(t)
}

func (c *goneConn) SetReadDeadline(t time.Time) error {
	if c.gone.Load() {
		return nil
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *goneConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

// TestServerDropsAGonePeer: a peer that vanished after a call leaves its
// connection open and answers nothing any more. The server's keepalive
// drops that connection within serverPingEvery + serverPingTimeout, and a
// graceful stop then has no peer to wait for; gRPC's default keepalive
// would keep it two hours, and GracefulStop would wait 5 s for it to
// answer the stop's ping.
func TestServerDropsAGonePeer(t *testing.T) {
	srv, addr := startServerWith(t, &recorder{}, nil)
	var gone atomic.Bool
	var mu sync.Mutex
	var conns []*goneConn
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Conn.Close()
		}
	})
	cfg := LocalConfig()
	cfg.Dialer = func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		g := &goneConn{Conn: c, gone: &gone, dropped: make(chan struct{}), closed: make(chan struct{})}
		mu.Lock()
		conns = append(conns, g)
		mu.Unlock()
		return g, nil
	}
	p := newTestPool(t, cfg)
	if _, err := p.Do(context.Background(), addr, take(0)); err != nil {
		t.Fatal(err)
	}
	gone.Store(true)
	// The connection the call went over; the pool's later ones, which
	// never get past their handshake, are the server's handshake
	// timeout's to drop.
	mu.Lock()
	first := conns[0]
	mu.Unlock()
	const guard = 20 * time.Second // five times serverPingEvery + serverPingTimeout
	select {
	case <-first.dropped:
	case <-time.After(guard):
		t.Fatalf("the server still holds the connection of a peer gone %v ago", guard)
	}
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(guard):
		t.Fatalf("GracefulStop still waiting %v after the gone peer's connection was dropped", guard)
	}
}
