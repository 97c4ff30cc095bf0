package client

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
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

// errClosed is what a take gets when Close ended it.
var errClosed = errors.New("client: closed")

// leanDialTimeout bounds dialling a lean connection and its handshake.
const leanDialTimeout = 2 * time.Second

// leanWriteTimeout cuts off a lean connection whose writes block this long
// (a member that stopped reading).
const leanWriteTimeout = 10 * time.Second

// leanAnswer is the answer to one take on a lean connection.
type leanAnswer struct {
	resp api.TakeResponse
	err  error
}

// leanConn is one RESP connection to a member. Takes append their command
// to buf and their waiter to the FIFO under mu; whoever holds flushMu
// writes everything appended so far in one write, so takes sent while a
// write is under way leave together in the next (pipelining without a
// delay: a lone caller's take is written at once). One goroutine reads the
// replies, in order, and hands each to the oldest waiter.
type leanConn struct {
	nc net.Conn
	br *bufio.Reader

	flushMu sync.Mutex // held while writing; guards spare and writeBy
	spare   []byte
	writeBy time.Time

	mu      sync.Mutex // guards the fields below
	buf     []byte     // commands not yet written
	waiters []chan leanAnswer
	err     error // set once the connection broke
	done    chan struct{}
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
	ch := make(chan leanAnswer, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return api.TakeResponse{}, err
	}
	c.buf = appendCTake(c.buf, rid, budgetOf(ctx), checks)
	c.waiters = append(c.waiters, ch)
	c.mu.Unlock()
	c.flush()
	select {
	case a := <-ch:
		return a.resp, a.err
	case <-ctx.Done():
		// The answer, when it comes, goes to ch's buffer and is dropped.
		return api.TakeResponse{}, ctx.Err()
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

// read hands replies to their waiters until the connection fails.
func (c *leanConn) read() {
	for {
		resp, err := readCTake(c.br)
		var re replyError
		if err != nil && !errors.As(err, &re) {
			c.fail(err)
			return
		}
		if err != nil {
			err = statusOfReply(re)
		}
		c.mu.Lock()
		if len(c.waiters) == 0 { // a reply nobody asked for
			c.mu.Unlock()
			c.fail(errBadReply)
			return
		}
		ch := c.waiters[0]
		c.waiters[0] = nil
		c.waiters = c.waiters[1:]
		c.mu.Unlock()
		ch <- leanAnswer{resp: resp, err: err} // buffered: never blocks
	}
}

// fail breaks c: the connection closes and every take waiting on it gets
// an error wrapping errConnBroken and why.
func (c *leanConn) fail(why error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = fmt.Errorf("%w: %w", errConnBroken, why)
	_ = c.nc.Close()
	for _, ch := range c.waiters {
		ch <- leanAnswer{err: c.err}
	}
	c.waiters = nil
	close(c.done)
}

// leanPool holds a member's lean connections: up to size, dialled on
// first use and again after they break, and used in turn. After a failed
// dial (no listener, TLS or AUTH refused, no WEIR.CTAKE) the member's takes
// go over gRPC for downFor, so a member whose RESP endpoint cannot serve
// this client costs nothing but that.
type leanPool struct {
	addr  string
	opts  *Options
	wg    *sync.WaitGroup // the router's: counts the readers
	slots []atomic.Pointer[leanConn]
	next  atomic.Uint32

	mu        sync.Mutex // guards the fields below and serialises dialling
	downUntil time.Time
	closed    bool
}

func newLeanPool(addr string, opts *Options, wg *sync.WaitGroup) *leanPool {
	return &leanPool{addr: addr, opts: opts, wg: wg, slots: make([]atomic.Pointer[leanConn], opts.LeanConns)}
}

// get returns a working connection, dialling one if its slot has none; nil
// means send this take over gRPC.
func (p *leanPool) get(ctx context.Context) *leanConn {
	slot := &p.slots[int(p.next.Add(1))%len(p.slots)]
	if c := slot.Load(); c != nil && !c.broken() {
		return c
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := slot.Load(); c != nil && !c.broken() {
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
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		c.read()
	}()
	return c
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
	br := bufio.NewReaderSize(nc, 16<<10)
	if token != "" {
		ok, err := readSimple(br)
		if err != nil {
			return nil, err
		}
		if ok != "OK" {
			return nil, errBadReply
		}
	}
	_, err := readSimple(br)
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
	return &leanConn{nc: nc, br: br, done: make(chan struct{})}, nil
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
