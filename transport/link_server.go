package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/weir-rl/weir/transport/peerpb"
)

// The receiving end of the replica link (link.go), and the listener that
// tells its connections from gRPC's on the peer port.

// links are the connections a Server has accepted and not handed to
// gRPC: those whose first byte is still to come, and replica links.
// Stop and GracefulStop close them; gRPC closes its own.
type links struct {
	tls *tls.Config // nil: plaintext
	svc *service

	mu      sync.Mutex // guards conns and stopped
	conns   map[net.Conn]struct{}
	stopped bool
	wg      sync.WaitGroup // one count per connection in conns
}

// track adds c, or closes it and returns false once stopped.
func (ls *links) track(c net.Conn) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.stopped {
		_ = c.Close()
		return false
	}
	if ls.conns == nil {
		ls.conns = map[net.Conn]struct{}{}
	}
	ls.conns[c] = struct{}{}
	ls.wg.Add(1)
	return true
}

// untrack removes c without closing it.
func (ls *links) untrack(c net.Conn) {
	ls.mu.Lock()
	delete(ls.conns, c)
	ls.mu.Unlock()
	ls.wg.Done()
}

// stop closes every tracked connection and waits for their goroutines.
func (ls *links) stop() {
	ls.mu.Lock()
	ls.stopped = true
	for c := range ls.conns {
		_ = c.Close()
	}
	ls.mu.Unlock()
	ls.wg.Wait()
}

// muxListener is the listener gRPC serves: the connections of lis whose
// first byte is not the replica link's.
type muxListener struct {
	net.Listener
	ls      *links
	grpc    chan net.Conn
	done    chan struct{}
	once    sync.Once
	errOnce sync.Once
	err     error // lis's Accept error, once done closed without Close
}

// newMux starts accepting on lis.
func newMux(lis net.Listener, ls *links) *muxListener {
	m := &muxListener{Listener: lis, ls: ls, grpc: make(chan net.Conn), done: make(chan struct{})}
	go m.accept()
	return m
}

// accept takes lis's connections and sorts each by its first byte, on a
// goroutine of its own so that a connection that sends nothing holds up
// no other. An error other than the listener's close (too many open
// files, say) is waited out, as gRPC and net/http do: 5 ms, doubling to
// a second.
func (m *muxListener) accept() {
	var wait time.Duration
	for {
		c, err := m.Listener.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				wait = min(max(2*wait, 5*time.Millisecond), time.Second)
				select {
				case <-time.After(wait):
					continue
				case <-m.done:
				}
			}
			m.errOnce.Do(func() { m.err = err })
			m.shut()
			return
		}
		wait = 0
		if m.ls.track(c) {
			go m.sort(c)
		}
	}
}

// sort reads c's first byte within handshakeTimeout and serves c as a
// replica link or hands it to gRPC.
func (m *muxListener) sort(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(handshakeTimeout))
	first, c2, err := peekFirst(c)
	if err != nil {
		_ = c.Close()
		m.ls.untrack(c)
		return
	}
	if first == linkPreface[0] {
		defer m.ls.untrack(c)
		defer c.Close()
		m.ls.serve(c2)
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	m.ls.untrack(c) // gRPC's from here: its stop closes it
	select {
	case m.grpc <- c2:
	case <-m.done:
		_ = c.Close()
	}
}

// peekFirst returns c's first byte and a connection that reads from the
// start, that byte included. A socket is peeked (MSG_PEEK) and returned
// as it is, so that gRPC still finds the *net.TCPConn it sets its
// TCP_USER_TIMEOUT on; another kind of connection (a simulated
// network's) is read and wrapped.
func peekFirst(c net.Conn) (byte, net.Conn, error) {
	var b [1]byte
	if sc, ok := c.(syscall.Conn); ok {
		rc, err := sc.SyscallConn()
		if err != nil {
			return 0, nil, err
		}
		var n int
		var perr error
		err = rc.Read(func(fd uintptr) bool {
			n, _, perr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK)
			return !errors.Is(perr, syscall.EAGAIN)
		})
		switch {
		case err != nil:
			return 0, nil, err
		case perr != nil:
			return 0, nil, perr
		case n == 0:
			return 0, nil, io.EOF
		}
		return b[0], c, nil
	}
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return 0, nil, err
	}
	return b[0], &firstByteConn{Conn: c, first: b[0], has: true}, nil
}

// Accept implements net.Listener for gRPC.
func (m *muxListener) Accept() (net.Conn, error) {
	select {
	case c := <-m.grpc:
		return c, nil
	case <-m.done:
		if m.err != nil {
			return nil, m.err
		}
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener.
func (m *muxListener) Close() error {
	m.errOnce.Do(func() {})
	err := m.Listener.Close()
	m.shut()
	return err
}

func (m *muxListener) shut() { m.once.Do(func() { close(m.done) }) }

// firstByteConn gives back the byte the listener read to sort it.
type firstByteConn struct {
	net.Conn
	first byte
	has   bool
}

// Read implements net.Conn.
func (c *firstByteConn) Read(p []byte) (int, error) {
	if c.has && len(p) > 0 {
		p[0], c.has = c.first, false
		return 1, nil
	}
	return c.Conn.Read(p)
}

// serve reads the preface and, with credentials, the TLS
// handshake, within handshakeTimeout; then stores batches and answers
// each until the connection ends. A frame that is not a replica batch
// this node can read is refused with the reason, as gRPC's Handoff would
// refuse it; a frame over the limit, or a broken one, ends the connection.
func (ls *links) serve(c net.Conn) {
	pre := make([]byte, len(linkPreface))
	if _, err := io.ReadFull(c, pre); err != nil || string(pre) != linkPreface {
		return
	}
	conn := c
	if ls.tls != nil {
		tc := tls.Server(c, ls.tls)
		_ = c.SetDeadline(time.Now().Add(handshakeTimeout))
		if err := tc.Handshake(); err != nil {
			return
		}
		conn = tc
	}
	_ = c.SetDeadline(time.Time{})
	r := bufio.NewReaderSize(conn, 64<<10)
	var buf, answer []byte
	for {
		body, err := readFrame(r, buf, maxLinkFrame)
		if err != nil {
			return
		}
		if cap(body) <= maxPackedBuf {
			buf = body
		}
		answer = appendAnswer(answer[:0], ls.store(body))
		if _, err := conn.Write(answer); err != nil {
			return
		}
	}
}

// store decodes one batch and hands it to the handler, as Handoff does.
func (ls *links) store(body []byte) error {
	var in peerpb.HandoffRequest
	if err := proto.Unmarshal(body, &in); err != nil {
		return err
	}
	if !in.GetReplica() {
		return errors.New("transport: the replica link carries replica batches only")
	}
	err := checkVersion(in.GetProtocol())
	if err == nil {
		err = ls.svc.replicate(context.Background(), &in)
	}
	if err != nil {
		if s, ok := status.FromError(err); ok {
			return errors.New(s.Message())
		}
		return err
	}
	return nil
}
