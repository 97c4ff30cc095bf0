package resp

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"

	"github.com/weir-rl/weir/api"
)

// Server serves the Redis protocol from an api.Decider. It owns one
// goroutine per connection, started by Serve and ended by Shutdown or
// Close. Its methods are safe for concurrent use.
type Server struct {
	d   api.Decider
	cfg Config
	log *slog.Logger
	// ctx is the context of every decision; cancel ends it on Close.
	ctx    context.Context
	cancel context.CancelFunc
	ids    atomic.Int64 // connection ids, for HELLO and CLIENT ID
	stats  stats        // what INFO reports (info.go)
	// cmds is the command table by lower-case name and order the same
	// commands sorted by name; both are built by New and never modified.
	cmds  map[string]*command
	order []*command

	mu      sync.Mutex // guards the fields below
	lns     map[net.Listener]struct{}
	conns   map[*conn]struct{}
	closing bool
	wg      sync.WaitGroup // connection goroutines
}

// New returns a server that answers from d. Zero bounds in cfg mean their
// defaults (see Config); logger receives internal errors and recovered
// panics, never a caller's key, and nil discards. It starts nothing.
func New(d api.Decider, cfg Config, logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		d: d, cfg: cfg.withDefaults(), log: logger, ctx: ctx, cancel: cancel,
		lns: map[net.Listener]struct{}{}, conns: map[*conn]struct{}{},
	}
	s.stats.start(time.Now())
	s.cmds = s.commands()
	for _, c := range s.cmds {
		s.order = append(s.order, c)
	}
	slices.SortFunc(s.order, func(a, b *command) int { return strings.Compare(a.name, b.name) })
	return s
}

// handshakeTimeout bounds a TLS handshake.
const handshakeTimeout = 10 * time.Second

// ErrServerClosed is returned by Serve after Shutdown or Close.
var ErrServerClosed = errors.New("resp: server closed")

// Serve accepts connections on ln until Shutdown or Close, serving each in
// its own goroutine, and then returns ErrServerClosed. With Config.TLS set
// every connection speaks TLS. Serve closes ln when it returns.
func (s *Server) Serve(ln net.Listener) error {
	if s.cfg.TLS != nil {
		ln = tls.NewListener(ln, s.cfg.TLS)
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		_ = ln.Close()
		return ErrServerClosed
	}
	s.lns[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.lns, ln)
		s.mu.Unlock()
		_ = ln.Close()
	}()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing || errors.Is(err, net.ErrClosed) {
				return ErrServerClosed
			}
			// A temporary failure (out of file descriptors): back off as
			// net/http does rather than spin.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("resp: accept failed", "err", err, "retry_in", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-s.ctx.Done():
				t.Stop()
				return ErrServerClosed
			}
			continue
		}
		backoff = 0
		c := s.newConn(nc)
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			_ = nc.Close()
			return ErrServerClosed
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			c.serve()
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
}

// Shutdown stops accepting, lets every connection finish the commands it
// has read and write their answers, closes it, and waits for its goroutine,
// until ctx ends; then it closes what is left as Close does.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	for ln := range s.lns {
		_ = ln.Close()
	}
	for c := range s.conns {
		c.stop() // wakes a connection blocked reading; it ends after its batch
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		s.cancel()
		return nil
	case <-ctx.Done():
		s.Close()
		<-done
		return ctx.Err()
	}
}

// Close stops accepting, cancels decisions in progress, closes every
// connection and waits for their goroutines.
func (s *Server) Close() {
	s.mu.Lock()
	s.closing = true
	for ln := range s.lns {
		_ = ln.Close()
	}
	for c := range s.conns {
		_ = c.nc.Close()
	}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// conn is one client connection. Only its own goroutine touches its
// fields, except stopping, which stop sets from Shutdown.
type conn struct {
	s       *Server
	nc      net.Conn
	rd      *reader
	wr      *redcon.Writer
	pending int // answers written to wr and not yet flushed
	failed  bool
	// writeBy is the write deadline set on nc; flush moves it only when
	// less than half of WriteTimeout is left, sparing a timer update per
	// answer.
	writeBy time.Time
	// authBy is when a connection that has not authenticated is closed
	// (Config.AuthTimeout after it was accepted); zero without
	// Config.Authenticate.
	authBy time.Time
	// cmdStart is when the first byte of the command being read arrived;
	// zero between commands. Config.CommandTimeout runs from it.
	cmdStart time.Time
	st       session
	stopping atomic.Bool
}

func (s *Server) newConn(nc net.Conn) *conn {
	c := &conn{
		s: s, nc: nc,
		wr: redcon.NewWriter(nc),
		st: session{id: s.ids.Add(1), proto: 2, authed: s.cfg.Authenticate == nil},
	}
	if s.cfg.Authenticate != nil {
		c.authBy = time.Now().Add(s.cfg.AuthTimeout)
	}
	c.rd = newReader(flushingReader{c}, s.cfg.MaxArgs, s.cfg.MaxBulkBytes, s.cfg.MaxRequestBytes)
	return c
}

// bound sets the reader's bounds for the next command: the configured
// ones once the connection has authenticated, the pre-AUTH ones before.
func (c *conn) bound() {
	cfg := &c.s.cfg
	if c.st.authed {
		c.rd.maxArgs, c.rd.maxBytes, c.rd.note = cfg.MaxArgs, cfg.MaxRequestBytes, ""
		return
	}
	c.rd.maxArgs, c.rd.maxBytes = min(cfg.MaxArgs, PreAuthMaxArgs), min(cfg.MaxRequestBytes, PreAuthMaxBytes)
	c.rd.note = " before AUTH"
}

// readDeadline is the deadline of the next read at now: the end of the
// command's CommandTimeout while a command is being read, else now +
// IdleTimeout, and never after authBy while the connection has not
// authenticated.
func (c *conn) readDeadline(now time.Time) time.Time {
	d := now.Add(c.s.cfg.IdleTimeout)
	if !c.cmdStart.IsZero() {
		d = c.cmdStart.Add(c.s.cfg.CommandTimeout)
	}
	if !c.st.authed && !c.authBy.IsZero() && c.authBy.Before(d) {
		d = c.authBy
	}
	return d
}

// flushingReader reads from the connection after writing out the answers
// buffered so far: the command reader only reads from the network when it
// has no buffered input left, so a pipeline's answers go out in one write
// and a client waiting for an answer never waits on the server's buffer.
type flushingReader struct{ c *conn }

// Read implements io.Reader.
func (f flushingReader) Read(p []byte) (int, error) {
	c := f.c
	if !c.flush() {
		return 0, net.ErrClosed
	}
	now := time.Now()
	if c.cmdStart.IsZero() && c.rd.br.Buffered() > 0 {
		c.cmdStart = now // part of a pipelined command is already here
	}
	_ = c.nc.SetReadDeadline(c.readDeadline(now))
	if c.stopping.Load() {
		return 0, net.ErrClosed
	}
	n, err := c.nc.Read(p)
	if n > 0 && c.cmdStart.IsZero() {
		c.cmdStart = time.Now()
	}
	return n, err
}

// stop asks the connection to end after the command it is on, waking it
// if it is waiting for input.
func (c *conn) stop() {
	c.stopping.Store(true)
	_ = c.nc.SetReadDeadline(time.Now())
}

// serve reads pipelined commands and answers them in order until the
// client quits or disconnects, the server stops, the input breaks the
// protocol or its bounds (answered -ERR Protocol error: ..., then closed),
// or a read passes its deadline (readDeadline: idle, half-sent command,
// not authenticated in time; closed without an answer, as Redis closes a
// connection past its timeout).
func (c *conn) serve() {
	defer func() { _ = c.nc.Close() }()
	if tc, ok := c.nc.(*tls.Conn); ok {
		// A client that connects and never finishes its handshake must
		// not hold the connection (and Shutdown) forever.
		_ = tc.SetDeadline(time.Now().Add(handshakeTimeout))
		if err := tc.HandshakeContext(c.s.ctx); err != nil {
			return
		}
		_ = tc.SetDeadline(time.Time{})
	}
	for !c.stopping.Load() {
		c.bound()
		args, err := c.rd.next()
		c.cmdStart = time.Time{}
		if err != nil {
			if pe, ok := errors.AsType[protocolError](err); ok {
				c.wr.WriteError("ERR " + pe.Error())
				c.pending++
			}
			c.flush()
			return
		}
		c.s.dispatch(c.s.ctx, &c.st, args, c.wr)
		c.pending++
		if c.st.quit {
			c.flush()
			return
		}
		if c.pending >= c.s.cfg.MaxPipeline && !c.flush() {
			return
		}
	}
	c.flush()
}

// flush writes the buffered answers within WriteTimeout; false once
// writing failed.
func (c *conn) flush() bool {
	if c.failed {
		return false
	}
	if c.pending == 0 {
		return true
	}
	c.pending = 0
	if wt := c.s.cfg.WriteTimeout; time.Until(c.writeBy) < wt/2 {
		c.writeBy = time.Now().Add(wt)
		_ = c.nc.SetWriteDeadline(c.writeBy)
	}
	if c.wr.Flush() != nil {
		c.failed = true
		return false
	}
	return true
}
