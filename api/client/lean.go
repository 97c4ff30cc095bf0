package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-rl/weir/api"
)

// This file is the lean transport: a member's takes over its RESP
// endpoint's WEIR.CTAKE (see doc.go for why), on a few connections per
// member that pipeline the takes of every caller.

// errConnBroken is what a take in flight on a lean connection gets when
// the connection ends under it: the take may or may not have been decided,
// as with errStreamBroken.
var errConnBroken = errors.New("client: RESP connection broke")

// errNoCTake says a member's RESP endpoint does not serve WEIR.CTAKE (a
// node from before it): its takes go over gRPC.
var errNoCTake = errors.New("client: the RESP endpoint has no WEIR.CTAKE")

// errIdleClosed is why a lean connection found closed by its member while
// it was idle broke.
var errIdleClosed = errors.New("closed by the member while idle")

// errClosed is what a take gets when Close ended it.
var errClosed = errors.New("client: closed")

// leanDialTimeout bounds dialling a lean connection and its handshake.
const leanDialTimeout = 2 * time.Second

// leanWriteTimeout cuts off a lean connection whose writes block this long
// (a member that stopped reading).
const leanWriteTimeout = 10 * time.Second

// leanSpill is how many takes in flight on a lean connection make the next
// take go on the member's next connection. Until then, more takes per
// connection mean more takes per write and per read on both ends; beyond
// it the batches gain little, while the member decides a connection's
// takes one after another on one goroutine.
const leanSpill = 32

// leanIdleCheck is how long a lean connection may sit without a take in
// flight before the next take first checks that the member has not closed
// it meanwhile (no reader watches an idle connection).
const leanIdleCheck = 100 * time.Millisecond

// leanWaiter is one take waiting on a lean connection for its reply.
type leanWaiter struct {
	ch   chan leanAnswer // one slot: its answer, or the turn to read
	gone bool            // its caller stopped waiting; guarded by leanConn.mu
}

// leanAnswer is what a waiter receives: the answer to its take, or (lead)
// the turn to read the connection's replies.
type leanAnswer struct {
	resp api.TakeResponse
	err  error
	lead bool
}

// leanConn is one RESP connection to a member. Takes append their command
// to buf and their waiter to the FIFO under mu; whoever holds flushMu
// writes everything appended so far in one write, so takes sent while a
// write is under way leave together in the next (pipelining without a
// delay: a lone caller's take is written at once). A take that finds
// others in flight yields the processor once before it writes, so the
// callers its answer's reader just woke add their takes to the same write.
//
// The replies are read by the takes themselves (leader and followers): the
// take that finds no one reading becomes the reader; it reads the replies
// in order and hands each to its waiter until its own arrives, then passes
// the turn to the oldest take still waiting. So a lone caller reads its
// own answer and no goroutine hands it over, and under load each answer
// still costs one wake-up, as with a reader goroutine. A reader whose
// context ends is woken by a read deadline; the reply reader is resumable,
// so the turn passes on without losing the reply it was reading.
type leanConn struct {
	nc    net.Conn
	rd    *replyReader // used only by the take whose turn it is to read
	clock Clock

	flushMu sync.Mutex // held while writing; guards spare and writeBy
	spare   []byte
	writeBy time.Time

	mu       sync.Mutex // guards the fields below
	buf      []byte     // commands not yet written
	waiters  []*leanWaiter
	inflight atomic.Int32 // len(waiters), for leanPool.get to read without mu (written under mu)
	reading  bool         // a take has the turn to read
	idleFrom atomic.Int64 // Unix ns when the last waiter left; 0 while any waits (written under mu)
	err      error        // set once the connection broke
	done     chan struct{}
}

// broken reports whether c has failed.
func (c *leanConn) broken() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// take sends a take and waits for its answer or ctx. An error is a
// replyError turned into a status error (the service answered), a ctx
// error, or one wrapping errConnBroken.
func (c *leanConn) take(ctx context.Context, rid []byte, checks []api.Check) (api.TakeResponse, error) {
	w := &leanWaiter{ch: make(chan leanAnswer, 1)}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return api.TakeResponse{}, err
	}
	c.buf = appendCTake(c.buf, rid, budgetOf(ctx), checks)
	c.waiters = append(c.waiters, w)
	c.inflight.Store(int32(len(c.waiters)))
	busy := len(c.waiters) > 1
	c.idleFrom.Store(0)
	lead := !c.reading
	c.reading = true
	c.mu.Unlock()
	if busy {
		// Other takes are in flight on c: let the callers that are
		// runnable append theirs before this one writes, so that one
		// write carries them all. A lone caller writes at once.
		runtime.Gosched()
	}
	c.flush()
	if lead {
		return c.lead(ctx, w)
	}
	select {
	case a := <-w.ch:
		if a.lead {
			return c.lead(ctx, w)
		}
		return a.resp, a.err
	case <-ctx.Done():
		return c.leave(ctx, w)
	}
}

// usable reports whether c can take a take: it did not break, and if it
// sat idle for leanIdleCheck, its member did not close it meanwhile (which
// breaks it now). No take reads an idle connection, so this is where its
// end is noticed before a take is sent into it.
func (c *leanConn) usable() bool {
	if c.broken() {
		return false
	}
	if from := c.idleFrom.Load(); from == 0 || c.clock.Now().UnixNano()-from < int64(leanIdleCheck) {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil && len(c.waiters) == 0 && peerClosed(c.nc) {
		c.failLocked(errIdleClosed)
	}
	return c.err == nil
}

// leave ends the wait of w, whose ctx ended: the answer when it has just
// arrived, else ctx's error; a turn to read passed to w meanwhile goes on
// to the next waiter. The reply to w's take, when it comes, is read and
// dropped.
func (c *leanConn) leave(ctx context.Context, w *leanWaiter) (api.TakeResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w.gone = true
	select {
	case a := <-w.ch:
		if !a.lead {
			return a.resp, a.err
		}
		c.passLocked()
	default:
	}
	return api.TakeResponse{}, ctx.Err()
}

// passLocked gives the turn to read to the oldest waiter still waiting, or
// leaves the connection without a reader when there is none (the next
// take reads).
func (c *leanConn) passLocked() {
	for _, w := range c.waiters {
		if !w.gone {
			w.ch <- leanAnswer{lead: true} // its slot is empty: its reply is still due
			return
		}
	}
	c.reading = false
	if len(c.waiters) == 0 {
		c.idleFrom.Store(c.clock.Now().UnixNano())
	}
}

// lead reads replies, handing each to its waiter, until w's own arrives or
// ctx ends, then passes the turn on. Under load the turn often comes with
// w's reply already buffered (read by the leader before): only a read
// from the connection, which may block, needs ctx's end to interrupt it,
// so the hook that does is set up before the first such read.
func (c *leanConn) lead(ctx context.Context, w *leanWaiter) (api.TakeResponse, error) {
	var block func()
	if ctx.Done() != nil {
		var stop func() bool
		block = func() {
			if stop == nil {
				stop = context.AfterFunc(ctx, func() { _ = c.nc.SetReadDeadline(time.Unix(1, 0)) })
			}
		}
		defer func() {
			if stop != nil {
				stop()
			}
		}()
	}
	for {
		resp, err := c.rd.readCTake(block)
		var re replyError
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil:
			// Our ctx ended: let the next waiter read on from here.
			_ = c.nc.SetReadDeadline(time.Time{})
			c.mu.Lock()
			w.gone = true
			c.passLocked()
			c.mu.Unlock()
			return api.TakeResponse{}, ctx.Err()
		case errors.Is(err, os.ErrDeadlineExceeded):
			// Set for a reader before us whose ctx ended as it finished.
			_ = c.nc.SetReadDeadline(time.Time{})
			continue
		case errors.As(err, &re):
			err = statusOfReply(re)
		case err != nil:
			c.fail(err)
			return api.TakeResponse{}, c.failure()
		}
		c.mu.Lock()
		if len(c.waiters) == 0 { // a reply nobody asked for
			c.failLocked(errBadReply)
			c.mu.Unlock()
			return api.TakeResponse{}, c.failure()
		}
		h := c.waiters[0]
		c.waiters[0] = nil
		c.waiters = c.waiters[1:]
		c.inflight.Store(int32(len(c.waiters)))
		if h == w {
			c.passLocked()
			c.mu.Unlock()
			return resp, err
		}
		c.mu.Unlock()
		// Its slot is empty (it does not lead), so this never blocks; a
		// waiter that left drops it.
		h.ch <- leanAnswer{resp: resp, err: err}
	}
}

// flush writes what was appended to buf, unless another flush already took
// it.
func (c *leanConn) flush() {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	c.mu.Lock()
	data := c.buf
	c.buf = c.spare[:0]
	c.mu.Unlock()
	if len(data) == 0 {
		c.spare = data
		return
	}
	if now := time.Now(); c.writeBy.Sub(now) < leanWriteTimeout/2 {
		c.writeBy = now.Add(leanWriteTimeout)
		_ = c.nc.SetWriteDeadline(c.writeBy)
	}
	_, err := c.nc.Write(data)
	c.spare = data[:0]
	if err != nil {
		c.fail(err)
	}
}

// failure returns why c broke.
func (c *leanConn) failure() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// fail breaks c: the connection closes and every take waiting on it gets
// an error wrapping errConnBroken and why.
func (c *leanConn) fail(why error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failLocked(why)
}

func (c *leanConn) failLocked(why error) {
	if c.err != nil {
		return
	}
	c.err = fmt.Errorf("%w: %w", errConnBroken, why)
	_ = c.nc.Close()
	for _, w := range c.waiters {
		select {
		case w.ch <- leanAnswer{err: c.err}:
		default: // it holds the turn to read: it reads the closed connection and fails
		}
	}
	c.waiters = nil
	c.inflight.Store(0)
	close(c.done)
}

// leanPool holds a member's lean connections: up to size, dialled on
// first use and again after they break. A take goes on the first
// connection with fewer than leanSpill takes in flight, so the takes of
// callers share as few connections, and as full writes, as the load
// allows; the next connection is dialled only when those before it are
// that busy, and when all are, the take goes on the least busy. After a failed
// dial (no listener, TLS or AUTH refused, no WEIR.CTAKE) the member's takes
// go over gRPC for downFor, so a member whose RESP endpoint cannot serve
// this client costs nothing but that.
type leanPool struct {
	addr  string
	opts  *Options
	slots []atomic.Pointer[leanConn]

	mu        sync.Mutex // guards the fields below and serialises dialling
	downUntil time.Time
	closed    bool
}

func newLeanPool(addr string, opts *Options) *leanPool {
	return &leanPool{addr: addr, opts: opts, slots: make([]atomic.Pointer[leanConn], opts.LeanConns)}
}

// get returns a working connection, dialling one if the slot it picks has
// none; nil means send this take over gRPC.
func (p *leanPool) get(ctx context.Context) *leanConn {
	slot := p.pick()
	if c := slot.Load(); c != nil && c.usable() {
		return c
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := slot.Load(); c != nil && c.usable() {
		return c
	}
	now := p.opts.Clock.Now()
	if p.closed || now.Before(p.downUntil) {
		return nil
	}
	c, err := p.dial(ctx)
	if err != nil {
		if ctx.Err() == nil {
			p.downUntil = now.Add(downFor)
			p.opts.Logger.Debug("client: RESP endpoint unusable, takes over gRPC for a while", "addr", p.addr, "err", err)
		}
		return nil
	}
	slot.Store(c)
	return c
}

// pick returns the slot of the first connection with fewer than leanSpill
// takes in flight, or of the first that is not open (or broke); when
// every connection is that busy, the least busy one's.
func (p *leanPool) pick() *atomic.Pointer[leanConn] {
	best, least := 0, int32(math.MaxInt32)
	for i := range p.slots {
		c := p.slots[i].Load()
		if c == nil || c.broken() {
			return &p.slots[i]
		}
		n := c.inflight.Load()
		if n < leanSpill {
			return &p.slots[i]
		}
		if n < least {
			best, least = i, n
		}
	}
	return &p.slots[best]
}

// dial opens a connection: TCP, TLS with Options.TLSConfig when set, AUTH
// with Options.Token when set, and a probe that WEIR.CTAKE exists (it
// answers a command without arguments with a wrong-arguments error, an
// older node with an unknown-command error).
func (p *leanPool) dial(ctx context.Context) (*leanConn, error) {
	ctx, cancel := context.WithTimeout(ctx, leanDialTimeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, err
	}
	if tc := p.opts.TLSConfig; tc != nil {
		cfg := tc.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(p.addr)
		}
		tlc := tls.Client(nc, cfg)
		if err := tlc.HandshakeContext(ctx); err != nil {
			_ = nc.Close()
			return nil, err
		}
		nc = tlc
	}
	c, err := handshake(ctx, nc, p.opts.Token)
	if err != nil {
		_ = nc.Close()
		return nil, err
	}
	c.clock = p.opts.Clock
	return c, nil
}

// handshake authenticates nc with token (when set), probes for WEIR.CTAKE
// and returns the connection ready for takes.
func handshake(ctx context.Context, nc net.Conn, token string) (*leanConn, error) {
	dl, _ := ctx.Deadline()
	_ = nc.SetDeadline(dl)
	var b []byte
	if token != "" {
		b = append(b, "*2\r\n$4\r\nAUTH\r\n"...)
		b = appendBulk(b, token)
	}
	b = append(b, "*1\r\n$10\r\nWEIR.CTAKE\r\n"...)
	if _, err := nc.Write(b); err != nil {
		return nil, err
	}
	rd := newReplyReader(nc)
	if token != "" {
		ok, err := rd.readSimple()
		if err != nil {
			return nil, err
		}
		if ok != "OK" {
			return nil, errBadReply
		}
	}
	_, err := rd.readSimple()
	var re replyError
	if !errors.As(err, &re) {
		if err == nil {
			err = errNoCTake
		}
		return nil, err
	}
	if string(re) != "ERR wrong number of arguments for 'weir.ctake' command" {
		return nil, fmt.Errorf("%w: %s", errNoCTake, string(re))
	}
	_ = nc.SetDeadline(time.Time{})
	return &leanConn{nc: nc, rd: rd, done: make(chan struct{})}, nil
}

// close breaks every connection (takes in flight on them fail) and stops
// dialling new ones.
func (p *leanPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for i := range p.slots {
		if c := p.slots[i].Load(); c != nil {
			c.fail(net.ErrClosed)
		}
	}
}

// leanable reports whether a take may go over WEIR.CTAKE: it carries no
// inline limit (those stay on gRPC) and not more checks than a reply may.
func leanable(checks []api.Check) bool {
	if len(checks) > maxLeanChecks {
		return false
	}
	for _, ch := range checks {
		if ch.Inline != nil {
			return false
		}
	}
	return true
}
