package simnet

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// window is how many unread bytes one stream direction buffers before
// Write blocks, like a TCP send buffer plus receive window.
const window = 1 << 20

// half is one direction of a stream: bytes written on the "from" host, read
// on the "to" host. Its mutex is never held while waiting and is taken
// before the Network's, never after.
type half struct {
	from, to string

	mu           sync.Mutex    // guards the fields below
	buf          []byte        // written, not yet read
	held         []heldBytes   // written under a Delay, not yet readable, in order after buf
	heldLen      int           // bytes in held
	eof          bool          // the writer closed; reads return io.EOF once buf and held are drained
	readerClosed bool          // the reader closed; writes fail (once the link carries the reset)
	wake         chan struct{} // closed and replaced on every change above
}

// heldBytes are bytes written under a Delay, readable from at on.
type heldBytes struct {
	at   time.Time
	data []byte
}

// releaseLocked moves the held bytes that are due at now into buf and
// returns when the next ones are due (zero when none are held). h.mu must
// be held.
func (h *half) releaseLocked(now time.Time) time.Time {
	for len(h.held) > 0 && !now.Before(h.held[0].at) {
		h.buf = append(h.buf, h.held[0].data...)
		h.heldLen -= len(h.held[0].data)
		h.held = h.held[1:]
	}
	if len(h.held) == 0 {
		h.held = nil
		return time.Time{}
	}
	return h.held[0].at
}

// holdLocked appends p to the held bytes, readable d from now and never
// before bytes written earlier. h.mu must be held.
func (h *half) holdLocked(p []byte, now time.Time, d time.Duration) {
	at := now.Add(d)
	if k := len(h.held); k > 0 && at.Before(h.held[k-1].at) {
		at = h.held[k-1].at
	}
	h.held = append(h.held, heldBytes{at: at, data: append([]byte(nil), p...)})
	h.heldLen += len(p)
}

func newHalf(from, to string) *half {
	return &half{from: from, to: to, wake: make(chan struct{})}
}

// signalLocked wakes the waiters on h. h.mu must be held.
func (h *half) signalLocked() {
	close(h.wake)
	h.wake = make(chan struct{})
}

// Conn is one end of a simulated stream. It implements net.Conn; see the
// package comment for its behaviour across cuts. It is safe for concurrent
// use.
type Conn struct {
	n             *Network
	local, remote Addr
	rd, wr        *half
	readDL        deadline
	writeDL       deadline
	done          chan struct{} // closed by Close
	once          sync.Once
	owner         *Transport // guarded by n.mu; the Transport that owns this end, or nil
}

// newConnPair returns the two ends of a stream between a and b.
func newConnPair(n *Network, a, b Addr) (*Conn, *Conn) {
	ab, ba := newHalf(a.Host, b.Host), newHalf(b.Host, a.Host)
	ca := &Conn{n: n, local: a, remote: b, rd: ba, wr: ab, readDL: makeDeadline(), writeDL: makeDeadline(), done: make(chan struct{})}
	cb := &Conn{n: n, local: b, remote: a, rd: ab, wr: ba, readDL: makeDeadline(), writeDL: makeDeadline(), done: make(chan struct{})}
	return ca, cb
}

func (c *Conn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "sim", Source: c.local, Addr: c.remote, Err: err}
}

// Read reads bytes that reached this end. It blocks while the link from the
// peer is cut, until the read deadline.
func (c *Conn) Read(p []byte) (int, error) {
	h := c.rd
	for {
		select {
		case <-c.done:
			return 0, c.opErr("read", ErrClosed)
		case <-c.readDL.wait():
			return 0, c.opErr("read", os.ErrDeadlineExceeded)
		default:
		}
		h.mu.Lock()
		open, changed := c.n.linkState(h.from, h.to)
		next := h.releaseLocked(time.Now())
		if open && len(h.buf) > 0 {
			k := copy(p, h.buf)
			h.buf = h.buf[k:]
			if len(h.buf) == 0 {
				h.buf = nil
			}
			h.signalLocked() // a writer may wait for room
			h.mu.Unlock()
			return k, nil
		}
		if open && h.eof && next.IsZero() {
			h.mu.Unlock()
			return 0, io.EOF
		}
		if len(p) == 0 {
			h.mu.Unlock()
			return 0, nil
		}
		wake := h.wake
		h.mu.Unlock()
		var due <-chan time.Time
		var t *time.Timer
		if !next.IsZero() {
			t = time.NewTimer(time.Until(next))
			due = t.C
		}
		select {
		case <-wake:
		case <-changed:
		case <-c.done:
		case <-c.readDL.wait():
		case <-due:
		}
		if t != nil {
			t.Stop()
		}
	}
}

// Write buffers p for the peer. It blocks only when a window of bytes is
// unread (for example across a cut), until the write deadline. It fails
// once the peer has closed and the link back carries the reset.
func (c *Conn) Write(p []byte) (int, error) {
	h := c.wr
	written := 0
	for {
		select {
		case <-c.done:
			return written, c.opErr("write", ErrClosed)
		case <-c.writeDL.wait():
			return written, c.opErr("write", os.ErrDeadlineExceeded)
		default:
		}
		h.mu.Lock()
		back, changed := c.n.linkState(h.to, h.from)
		if h.readerClosed && back {
			h.mu.Unlock()
			return written, c.opErr("write", syscall.EPIPE)
		}
		if room := window - len(h.buf) - h.heldLen; room > 0 {
			k := min(room, len(p)-written)
			if d := c.n.delayOf(h.from); d > 0 || len(h.held) > 0 {
				h.holdLocked(p[written:written+k], time.Now(), d)
			} else {
				h.buf = append(h.buf, p[written:written+k]...)
			}
			written += k
			h.signalLocked()
		}
		if written == len(p) {
			h.mu.Unlock()
			return written, nil
		}
		wake := h.wake
		h.mu.Unlock()
		select {
		case <-wake:
		case <-changed:
		case <-c.done:
		case <-c.writeDL.wait():
		}
	}
}

// Close closes this end: local reads and writes fail at once; the peer reads
// the remaining bytes and then io.EOF once the link to it is open.
func (c *Conn) Close() error {
	c.once.Do(func() {
		close(c.done)
		c.wr.mu.Lock()
		c.wr.eof = true
		c.wr.signalLocked()
		c.wr.mu.Unlock()
		c.rd.mu.Lock()
		c.rd.readerClosed = true
		c.rd.buf = nil
		c.rd.held, c.rd.heldLen = nil, 0
		c.rd.signalLocked()
		c.rd.mu.Unlock()
		c.readDL.set(time.Time{})
		c.writeDL.set(time.Time{})
		c.n.forget(c)
	})
	return nil
}

// LocalAddr returns this end's address (an Addr).
func (c *Conn) LocalAddr() net.Addr { return c.local }

// RemoteAddr returns the peer's address (an Addr).
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// SetDeadline sets the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	c.readDL.set(t)
	c.writeDL.set(t)
	return nil
}

// SetReadDeadline sets the read deadline; the zero time means none.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.readDL.set(t)
	return nil
}

// SetWriteDeadline sets the write deadline; the zero time means none.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.writeDL.set(t)
	return nil
}

// deadline is a resettable point in time signalled by closing a channel,
// as in net.Pipe.
type deadline struct {
	mu     sync.Mutex // guards timer and cancel
	timer  *time.Timer
	cancel chan struct{} // never nil; closed when the deadline passes
}

func makeDeadline() deadline { return deadline{cancel: make(chan struct{})} }

// set arms the deadline at t; the zero time disarms it.
func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil && !d.timer.Stop() {
		<-d.cancel // the callback is running or ran: wait for the close
	}
	d.timer = nil
	closed := isClosed(d.cancel)
	if t.IsZero() {
		if closed {
			d.cancel = make(chan struct{})
		}
		return
	}
	if dur := time.Until(t); dur > 0 {
		if closed {
			d.cancel = make(chan struct{})
		}
		ch := d.cancel
		d.timer = time.AfterFunc(dur, func() { close(ch) })
		return
	}
	if !closed {
		close(d.cancel)
	}
}

// wait returns a channel closed when the deadline passes.
func (d *deadline) wait() chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cancel
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
