package simnet

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// packetQueue is how many packets a Transport holds for memberlist before
// dropping new ones, like a socket receive buffer.
const packetQueue = 256

// Transport is a memberlist.NodeAwareTransport bound to one host:port of a
// Network: packets and streams share the address, as memberlist's UDP and
// TCP listeners do. Routing uses the address only (the node name in a
// memberlist.Address is ignored), like a real network. It is safe for
// concurrent use.
type Transport struct {
	n        *Network
	addr     Addr
	ip       net.IP
	packetCh chan *memberlist.Packet
	ln       *Listener
	ctx      context.Context // cancelled by Shutdown: aborts dials in progress
	cancel   context.CancelFunc
	conns    map[*Conn]struct{} // guarded by n.mu: streams this transport dialed or accepted
	closed   bool               // guarded by n.mu
	once     sync.Once
}

var _ memberlist.NodeAwareTransport = (*Transport)(nil)

// Transport returns a memberlist transport on host:port; host must be an IP
// address (memberlist advertises an IP) and port 0 picks a free port.
func (n *Network) Transport(host string, port int) (*Transport, error) {
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return nil, fmt.Errorf("simnet: transport host %q is not an IP address", host)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &Transport{
		n:        n,
		ip:       net.IP(ip.AsSlice()),
		packetCh: make(chan *memberlist.Packet, packetQueue),
		ctx:      ctx,
		cancel:   cancel,
		conns:    make(map[*Conn]struct{}),
	}
	t.ln = newListener(n, t)
	n.mu.Lock()
	a, err := n.bindLocked(host, port, t.ln, t)
	n.mu.Unlock()
	if err != nil {
		cancel()
		return nil, err
	}
	t.addr = a
	return t, nil
}

// Addr returns the transport's address.
func (t *Transport) Addr() Addr { return t.addr }

// FinalAdvertiseAddr returns the bound address; memberlist's configured
// advertise values are ignored.
func (t *Transport) FinalAdvertiseAddr(string, int) (net.IP, int, error) {
	return t.ip, t.addr.Port, nil
}

// WriteTo sends a packet to addr ("host:port").
func (t *Transport) WriteTo(b []byte, addr string) (time.Time, error) {
	return t.WriteToAddress(b, memberlist.Address{Addr: addr})
}

// WriteToAddress sends a packet with UDP semantics: it never fails because
// of the network; undeliverable packets are dropped silently.
func (t *Transport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	now := time.Now()
	host, _, err := net.SplitHostPort(a.Addr)
	if err != nil {
		return now, fmt.Errorf("simnet: write to %s: %w", a.Addr, err)
	}
	n := t.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if t.closed {
		return now, ErrClosed
	}
	n.stats.PacketsSent++
	dest := n.packets[a.Addr]
	if dest == nil || dest.closed || !n.reachableLocked(t.addr.Host, host) ||
		(n.loss > 0 && n.rng.Float64() < n.loss) {
		n.stats.PacketsDropped++
		return now, nil
	}
	p := &memberlist.Packet{Buf: slices.Clone(b), From: t.addr, Timestamp: now}
	select {
	case dest.packetCh <- p:
	default:
		n.stats.PacketsDropped++
	}
	return now, nil
}

// PacketCh returns the channel of received packets. It is never closed.
func (t *Transport) PacketCh() <-chan *memberlist.Packet { return t.packetCh }

// DialTimeout opens a stream to addr, waiting at most timeout.
func (t *Transport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

// DialAddressTimeout opens a stream to a.Addr with the package's stream
// semantics, waiting at most timeout; Shutdown aborts it.
func (t *Transport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(t.ctx, timeout)
	defer cancel()
	return t.n.dial(ctx, t.addr.Host, a.Addr, t)
}

// StreamCh returns the channel of accepted streams. It is never closed.
func (t *Transport) StreamCh() <-chan net.Conn { return t.ln.accept }

// Shutdown stops the transport: later packets to it are dropped, dials to
// it are refused, its dials in progress fail, and every stream it dialed or
// accepted is closed. It is safe to call more than once.
func (t *Transport) Shutdown() error {
	t.once.Do(func() {
		t.cancel()
		n := t.n
		n.mu.Lock()
		t.closed = true
		if n.packets[t.addr.String()] == t {
			delete(n.packets, t.addr.String())
		}
		n.mu.Unlock()
		// Close the listener without draining: memberlist may still read
		// StreamCh; what is left there is closed below with the owned conns.
		t.ln.once.Do(func() {
			n.mu.Lock()
			if n.listeners[t.addr.String()] == t.ln {
				delete(n.listeners, t.addr.String())
			}
			n.mu.Unlock()
			close(t.ln.done)
		})
		n.mu.Lock()
		cs := make([]*Conn, 0, len(t.conns))
		for c := range t.conns {
			cs = append(cs, c)
		}
		n.mu.Unlock()
		for _, c := range cs {
			c.Close()
		}
	})
	return nil
}
