package simnet

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// ErrClosed is returned by operations on a closed Network, Listener or
// Transport. It wraps net.ErrClosed, so errors.Is(err, net.ErrClosed) holds.
var ErrClosed = fmt.Errorf("simnet: %w", net.ErrClosed)

// firstEphemeralPort is the first port handed out for Listen(host, 0) and
// for the local end of dialed streams.
const firstEphemeralPort = 40000

// Addr is a host:port address on a Network. It implements net.Addr with the
// network name "sim".
type Addr struct {
	Host string
	Port int
}

// Network returns "sim".
func (a Addr) Network() string { return "sim" }

// String returns host:port.
func (a Addr) String() string { return net.JoinHostPort(a.Host, strconv.Itoa(a.Port)) }

// link is a directed pair of hosts.
type link struct{ from, to string }

// Network is a simulated network. The zero value is not usable; call New.
// It is safe for concurrent use.
type Network struct {
	mu        sync.Mutex // guards every field below
	rng       *rand.Rand
	loss      float64
	cut       map[link]bool
	isolated  map[string]bool
	changed   chan struct{} // closed and replaced on every matrix change
	listeners map[string]*Listener
	packets   map[string]*Transport
	nextPort  map[string]int
	conns     map[*Conn]struct{}
	dials     map[string]uint64
	delay     map[string]time.Duration // by writing host: stream bytes held that long
	stats     Stats
	closed    bool
}

// Stats counts traffic on a Network since New.
type Stats struct {
	PacketsSent    uint64 // WriteTo calls
	PacketsDropped uint64 // dropped by a cut, Loss, no receiver or a full queue
	Dials          uint64 // stream dial attempts
}

// New returns an empty, fully connected Network whose packet loss uses a
// random source seeded with seed.
func New(seed uint64) *Network {
	return &Network{
		rng:       rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		cut:       make(map[link]bool),
		isolated:  make(map[string]bool),
		changed:   make(chan struct{}),
		listeners: make(map[string]*Listener),
		packets:   make(map[string]*Transport),
		nextPort:  make(map[string]int),
		conns:     make(map[*Conn]struct{}),
		dials:     make(map[string]uint64),
		delay:     make(map[string]time.Duration),
	}
}

// Delay holds every stream byte that host writes for d before its reader
// can read it, in order: a host that answers late, as one with a saturated
// CPU does. Packets are not delayed, so gossip still finds the host alive.
// A d of 0 or less removes the delay; bytes already held keep their time.
// Heal does not change it.
func (n *Network) Delay(host string, d time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if d <= 0 {
		delete(n.delay, host)
		return
	}
	n.delay[host] = d
}

// delayOf returns the stream delay of bytes written by host.
func (n *Network) delayOf(host string) time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.delay[host]
}

// notifyLocked wakes every waiter that depends on the matrix. n.mu must be held.
func (n *Network) notifyLocked() {
	close(n.changed)
	n.changed = make(chan struct{})
}

// Cut closes the links between a and b in both directions.
func (n *Network) Cut(a, b string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut[link{a, b}] = true
	n.cut[link{b, a}] = true
	n.notifyLocked()
}

// CutOneWay closes the link from→to only: packets and stream bytes from
// "from" to "to" are dropped or held, the reverse direction still flows.
// A dial needs both directions (SYN and SYN-ACK), so it hangs either way.
func (n *Network) CutOneWay(from, to string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut[link{from, to}] = true
	n.notifyLocked()
}

// Isolate closes every link between host and any other host, including
// hosts that appear later, until Heal.
func (n *Network) Isolate(host string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.isolated[host] = true
	n.notifyLocked()
}

// Split closes every link between a host of groupA and a host of groupB, in
// both directions. Links inside each group are left as they are.
func (n *Network) Split(groupA, groupB []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, a := range groupA {
		for _, b := range groupB {
			n.cut[link{a, b}] = true
			n.cut[link{b, a}] = true
		}
	}
	n.notifyLocked()
}

// Heal opens every link (undoes Cut, CutOneWay, Isolate and Split). It does
// not change the Loss rate. Streams that were held across a cut resume.
func (n *Network) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.cut)
	clear(n.isolated)
	n.notifyLocked()
}

// Loss sets the probability in [0, 1] that a packet on an open link is
// dropped. Streams are not affected.
func (n *Network) Loss(p float64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.loss = min(max(p, 0), 1)
}

// Reachable reports whether the link from→to is open.
func (n *Network) Reachable(from, to string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.reachableLocked(from, to)
}

func (n *Network) reachableLocked(from, to string) bool {
	if from == to {
		return true
	}
	return !n.isolated[from] && !n.isolated[to] && !n.cut[link{from, to}]
}

// linkState returns whether from→to is open and a channel closed at the
// next matrix change.
func (n *Network) linkState(from, to string) (bool, <-chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.reachableLocked(from, to), n.changed
}

// Stats returns the traffic counters.
func (n *Network) Stats() Stats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stats
}

// DialCount returns how many stream dials (from Dial and from Transports)
// have targeted addr ("host:port") so far, successful or not.
func (n *Network) DialCount(addr string) uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.dials[addr]
}

// ephemeralLocked returns a port on host that no listener, transport or
// stream end uses. n.mu must be held.
func (n *Network) ephemeralLocked(host string) int {
	p := n.nextPort[host]
	if p == 0 {
		p = firstEphemeralPort
	}
	for {
		a := Addr{host, p}.String()
		p++
		if n.listeners[a] == nil && n.packets[a] == nil {
			n.nextPort[host] = p
			return p - 1
		}
	}
}

// bindLocked reserves host:port for a listener (and a packet endpoint when
// packets is non-nil). n.mu must be held.
func (n *Network) bindLocked(host string, port int, l *Listener, packets *Transport) (Addr, error) {
	if n.closed {
		return Addr{}, ErrClosed
	}
	if host == "" || port < 0 || port > 65535 {
		return Addr{}, fmt.Errorf("simnet: bad address %q port %d", host, port)
	}
	if port == 0 {
		port = n.ephemeralLocked(host)
	}
	a := Addr{host, port}
	key := a.String()
	if n.listeners[key] != nil || n.packets[key] != nil {
		return Addr{}, fmt.Errorf("simnet: listen %s: %w", key, syscall.EADDRINUSE)
	}
	l.addr = a
	n.listeners[key] = l
	if packets != nil {
		n.packets[key] = packets
	}
	return a, nil
}

// Listen returns a stream listener on host:port (port 0 picks a free one).
// Dials reach it through Dial or a Transport's DialTimeout.
func (n *Network) Listen(host string, port int) (net.Listener, error) {
	l := newListener(n, nil)
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, err := n.bindLocked(host, port, l, nil); err != nil {
		return nil, err
	}
	return l, nil
}

// Dial opens a stream from fromHost to toAddr ("host:port"). It follows the
// stream semantics in the package comment: refused at once when nobody
// listens on an open link, hangs until ctx ends across a closed one. Use it
// with grpc.WithContextDialer:
//
//	grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
//		return n.Dial(ctx, "10.0.0.1", a)
//	})
func (n *Network) Dial(ctx context.Context, fromHost, toAddr string) (net.Conn, error) {
	return n.dial(ctx, fromHost, toAddr, nil)
}

// dial implements Dial; owner is the Transport dialing, or nil.
func (n *Network) dial(ctx context.Context, fromHost, toAddr string, owner *Transport) (net.Conn, error) {
	host, ps, err := net.SplitHostPort(toAddr)
	if err != nil {
		return nil, fmt.Errorf("simnet: dial %s: %w", toAddr, err)
	}
	port, err := strconv.Atoi(ps)
	if err != nil {
		return nil, fmt.Errorf("simnet: dial %s: bad port: %w", toAddr, err)
	}
	to := Addr{host, port}
	key := to.String()
	opErr := func(e error) error {
		return &net.OpError{Op: "dial", Net: "sim", Addr: to, Err: e}
	}

	n.mu.Lock()
	n.stats.Dials++
	n.dials[key]++
	n.mu.Unlock()

	for {
		n.mu.Lock()
		if n.closed || (owner != nil && owner.closed) {
			n.mu.Unlock()
			return nil, opErr(ErrClosed)
		}
		changed := n.changed
		if n.reachableLocked(fromHost, host) && n.reachableLocked(host, fromHost) {
			l := n.listeners[key]
			if l == nil {
				n.mu.Unlock()
				return nil, opErr(syscall.ECONNREFUSED)
			}
			from := Addr{fromHost, n.ephemeralLocked(fromHost)}
			client, server := newConnPair(n, from, to)
			n.registerLocked(client, owner)
			n.registerLocked(server, l.owner)
			n.mu.Unlock()
			select {
			case l.accept <- server:
				return client, nil
			case <-l.done:
				client.Close()
				server.Close()
				return nil, opErr(syscall.ECONNREFUSED)
			case <-ctx.Done():
				client.Close()
				server.Close()
				return nil, opErr(ctxErr(ctx))
			}
		}
		n.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, opErr(ctxErr(ctx))
		case <-changed:
		}
	}
}

// ctxErr maps a context's end to the error a real dial returns: a timeout
// for a deadline, the cause otherwise.
func ctxErr(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return os.ErrDeadlineExceeded
	}
	return context.Cause(ctx)
}

// registerLocked records c as live (and as owned by t, if non-nil). n.mu
// must be held.
func (n *Network) registerLocked(c *Conn, t *Transport) {
	n.conns[c] = struct{}{}
	c.owner = t
	if t != nil {
		t.conns[c] = struct{}{}
	}
}

// forget removes c from the live set; called by Conn.Close.
func (n *Network) forget(c *Conn) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.conns, c)
	if c.owner != nil {
		delete(c.owner.conns, c)
	}
}

// Close shuts the network down: every listener, transport and stream is
// closed and later dials fail with ErrClosed.
func (n *Network) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	n.notifyLocked()
	var ls []*Listener
	for _, l := range n.listeners {
		ls = append(ls, l)
	}
	var ts []*Transport
	for _, t := range n.packets {
		ts = append(ts, t)
	}
	var cs []*Conn
	for c := range n.conns {
		cs = append(cs, c)
	}
	n.mu.Unlock()
	for _, t := range ts {
		_ = t.Shutdown()
	}
	for _, l := range ls {
		l.Close()
	}
	for _, c := range cs {
		c.Close()
	}
	return nil
}

// Listener is a stream listener on a Network. It implements net.Listener.
type Listener struct {
	n      *Network
	addr   Addr
	owner  *Transport // the Transport this listener belongs to, or nil
	accept chan net.Conn
	done   chan struct{}
	once   sync.Once
}

// acceptBacklog is how many established streams wait for Accept before a
// dialer blocks (like a listen backlog).
const acceptBacklog = 64

func newListener(n *Network, owner *Transport) *Listener {
	return &Listener{n: n, owner: owner, accept: make(chan net.Conn, acceptBacklog), done: make(chan struct{})}
}

// Accept waits for the next stream. After Close it returns an error wrapping
// net.ErrClosed.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.accept:
		return c, nil
	case <-l.done:
		return nil, &net.OpError{Op: "accept", Net: "sim", Addr: l.addr, Err: ErrClosed}
	}
}

// Close stops the listener and refuses later dials. Streams still waiting in
// the backlog are closed; accepted ones are not.
func (l *Listener) Close() error {
	l.once.Do(func() {
		l.n.mu.Lock()
		if l.n.listeners[l.addr.String()] == l {
			delete(l.n.listeners, l.addr.String())
		}
		l.n.mu.Unlock()
		close(l.done)
		for {
			select {
			case c := <-l.accept:
				c.Close()
			default:
				return
			}
		}
	})
	return nil
}

// Addr returns the listener's address (an Addr).
func (l *Listener) Addr() net.Addr { return l.addr }
