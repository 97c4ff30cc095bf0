package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/weir-rl/weir/transport/peerpb"
)

// The replica link (protocol V3): an owner's replica batches go to each
// successor on one long-lived connection of their own to the successor's
// peer port, not as gRPC calls. A batch is the HandoffRequest a Handoff
// call would carry, framed as a 4-byte big-endian length and its bytes;
// the successor answers each frame with a frame of its own, empty when it
// stored the batch and holding the reason when it refused it. The owner
// writes a batch from the goroutine that flushes and reads the answer on
// that goroutine too, so a batch costs a write, a read and the receiver's
// one wakeup, where a gRPC call cost stream setup, HTTP/2 frames and
// goroutine hand-offs at both ends: at 64 callers with every key in debt
// those calls, not the entries, were most of replication's cost
// (bench/results/repl-diag-b783e4c).
//
// A connection opens with linkPreface in plaintext, then (with
// Credentials) the same mutually authenticated TLS 1.3 as gRPC's, so the
// peer port serves both: Server.Serve tells a link from gRPC by its first
// byte (gRPC's is 'P' in plaintext, a TLS record's 0x16). Handoffs,
// forwards and reports stay on gRPC.

// linkPreface opens a replica link connection.
const linkPreface = "WEIR REPLICA 3\r\n"

// maxLinkFrame bounds a frame either end reads: gRPC's default message
// limit, which Handoff chunks were sized to stay under.
const maxLinkFrame = 4 << 20

// maxLinkRefusal bounds the reason a refusal carries.
const maxLinkRefusal = 1 << 10

// link is the owner's end of the replica link to one peer. Its methods
// are safe for concurrent use; sends are serialized, one batch and its
// answer at a time. Make it with newLink.
type link struct {
	addr string
	dial func(ctx context.Context, addr string) (net.Conn, error)
	tls  *tls.Config // nil: plaintext

	now func() time.Time // time.Now; a test's clock
	// stop ends a send in progress when the link closes: close cancels it
	// rather than wait for the send's mutex.
	stop       context.Context
	cancelStop context.CancelFunc

	mu    sync.Mutex // guards the fields below
	conn  net.Conn   // nil until the first send, and after a failure
	r     *bufio.Reader
	frame []byte // the last frame's buffer, reused
	// After a failed dial, sends fail at once with dialErr until retryAt,
	// as gRPC's reconnect backoff makes its calls fail: a successor that
	// cannot be reached does not hold every flush for a dial timeout.
	dialErr error
	retryAt time.Time
	backoff time.Duration // the last wait; 0 after a good dial
}

// Reconnect backoff of the link, as the pool's gRPC connections' (pool.go).
const (
	linkFirstRetry = 50 * time.Millisecond
	linkRetryGrows = 1.6
)

// newLink returns the link to the peer at addr, which dials on its first
// send.
func newLink(addr string, dial func(ctx context.Context, addr string) (net.Conn, error), tlsConf *tls.Config) *link {
	stop, cancel := context.WithCancel(context.Background())
	return &link{addr: addr, dial: dial, tls: tlsConf, now: time.Now, stop: stop, cancelStop: cancel}
}

// refusedError is a replica batch the receiver read and refused: it
// stored nothing of it. The link stays open.
type refusedError struct{ Reason string }

// Error implements error.
func (e *refusedError) Error() string { return "refused: " + e.Reason }

// send writes req to the peer and waits for its answer, until ctx ends.
// It returns the bytes written. A connection that fails is closed; the
// next send dials again. A send on a connection opened by an earlier one
// that fails before an answer (the peer restarted, say) is tried once
// more on a new connection: a replica batch is safe to store twice.
func (l *link) send(ctx context.Context, req *peerpb.HandoffRequest) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(l.stop, cancel)()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stop.Err() != nil { // closed
		return 0, ErrDropped
	}
	frame, err := appendFrame(l.frame[:0], req)
	if err != nil {
		return 0, err
	}
	if cap(frame) <= maxPackedBuf {
		l.frame = frame
	}
	reused := l.conn != nil
	err = l.exchange(ctx, frame)
	var refused *refusedError
	if err != nil && reused && !errors.As(err, &refused) && ctx.Err() == nil {
		err = l.exchange(ctx, frame)
	}
	if err != nil {
		return 0, err
	}
	return len(frame), nil
}

// exchange writes frame on the connection, opened if need be, and reads
// the answer. Called with l.mu held.
func (l *link) exchange(ctx context.Context, frame []byte) error {
	if l.conn == nil {
		if err := l.open(ctx); err != nil {
			return err
		}
	}
	c := l.conn
	if d, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	err := func() error {
		if _, err := c.Write(frame); err != nil {
			return err
		}
		return readAnswer(l.r)
	}()
	var refused *refusedError
	if err != nil && !errors.As(err, &refused) {
		l.drop()
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return err
}

// open dials the peer, writes the preface and, with credentials, makes
// the TLS handshake, within ctx and minConnectTimeout. A failure holds
// the next dial back (linkFirstRetry, growing to maxReconnectDelay).
func (l *link) open(ctx context.Context) error {
	now := l.now()
	if now.Before(l.retryAt) {
		return fmt.Errorf("transport: replica link to %s down, next dial in %v: %w", l.addr, l.retryAt.Sub(now), l.dialErr)
	}
	if err := l.connect(ctx); err != nil {
		l.backoff = min(max(time.Duration(float64(l.backoff)*linkRetryGrows), linkFirstRetry), maxReconnectDelay)
		l.dialErr, l.retryAt = err, now.Add(l.backoff)
		return err
	}
	l.backoff, l.dialErr, l.retryAt = 0, nil, time.Time{}
	return nil
}

// connect is open's dial, preface and handshake.
func (l *link) connect(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, minConnectTimeout)
	defer cancel()
	c, err := l.dial(ctx, l.addr)
	if err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(d)
	}
	if _, err := io.WriteString(c, linkPreface); err != nil {
		_ = c.Close()
		return err
	}
	if l.tls != nil {
		tc := tls.Client(c, l.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = c.Close()
			return err
		}
		c = tc
	}
	l.conn, l.r = c, bufio.NewReaderSize(c, 512)
	return nil
}

// drop closes the connection; the next send dials again at once. Called
// with l.mu held.
func (l *link) drop() {
	if l.conn != nil {
		_ = l.conn.Close()
		l.conn, l.r = nil, nil
	}
}

// close closes the link for good: later sends fail with ErrDropped, and
// one in progress fails at once (a pool's Close does not wait out a
// successor that stopped answering).
func (l *link) close() {
	l.cancelStop()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.drop()
}

// appendFrame appends req, framed, to b.
func appendFrame(b []byte, req *peerpb.HandoffRequest) ([]byte, error) {
	b = append(b, 0, 0, 0, 0)
	b, err := proto.MarshalOptions{}.MarshalAppend(b, req)
	if err != nil {
		return nil, err
	}
	n := len(b) - 4
	if n > maxLinkFrame {
		return nil, fmt.Errorf("transport: replica batch of %d bytes is over the link's %d", n, maxLinkFrame)
	}
	binary.BigEndian.PutUint32(b, uint32(n))
	return b, nil
}

// readFrame reads one frame of at most limit bytes into buf (grown if
// need be) and returns its body.
func readFrame(r *bufio.Reader, buf []byte, limit int) ([]byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(h[:]))
	if n > limit {
		return nil, fmt.Errorf("transport: link frame of %d bytes is over %d", n, limit)
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// readAnswer reads the peer's answer to a batch: nil when it stored it, a
// *refusedError when it refused it.
func readAnswer(r *bufio.Reader) error {
	b, err := readFrame(r, nil, maxLinkRefusal)
	if err != nil {
		return err
	}
	if len(b) > 0 {
		return &refusedError{Reason: string(b)}
	}
	return nil
}

// appendAnswer appends the answer to a batch: empty for nil, err's text
// (cut to maxLinkRefusal) otherwise.
func appendAnswer(b []byte, err error) []byte {
	var reason string
	if err != nil {
		reason = err.Error()
		if reason == "" {
			reason = "refused"
		}
		reason = reason[:min(len(reason), maxLinkRefusal)]
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(reason)))
	return append(b, reason...)
}
