package resp

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
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
	s.cmds = s.commands()
	for _, c := range s.cmds {
		s.order = append(s.order, c)
	}
	slices.SortFunc(s.order, func(a, b *command) int { return strings.Compare(a.name, b.name) })
	return s
}

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
	s        *Server
	nc       net.Conn
	guard    *guardReader
	rd       *redcon.Reader
	wr       *redcon.Writer
	st       session
	stopping atomic.Bool
}

func (s *Server) newConn(nc net.Conn) *conn {
	g := &guardReader{r: nc, max: int64(s.cfg.MaxRequestBytes)}
	return &conn{
		s: s, nc: nc, guard: g,
		rd: redcon.NewReader(g),
		wr: redcon.NewWriter(nc),
		st: session{id: s.ids.Add(1), proto: 2, authed: s.cfg.Authenticate == nil},
	}
}

// stop asks the connection to end after the batch it is on, waking it if
// it is waiting for input.
func (c *conn) stop() {
	c.stopping.Store(true)
	_ = c.nc.SetReadDeadline(time.Now())
}

// serve reads pipelined commands and answers them in order until the
// client quits or disconnects, the server stops, or the input breaks the
// protocol or its bounds.
func (c *conn) serve() {
	defer func() { _ = c.nc.Close() }()
	cfg := &c.s.cfg
	for !c.stopping.Load() {
		if cfg.IdleTimeout > 0 {
			_ = c.nc.SetReadDeadline(time.Now().Add(cfg.IdleTimeout))
		}
		c.guard.n = 0
		cmds, err := c.rd.ReadCommands()
		if err != nil {
			if msg, ok := protocolError(err); ok {
				c.wr.WriteError(msg)
				c.flush()
			}
			return
		}
		for i, cmd := range cmds {
			c.s.dispatch(c.s.ctx, &c.st, cmd.Args, c.wr)
			if c.st.quit {
				break
			}
			if (i+1)%cfg.MaxPipeline == 0 && !c.flush() {
				return
			}
		}
		if !c.flush() || c.st.quit {
			return
		}
	}
}

// flush writes the buffered answers within WriteTimeout.
func (c *conn) flush() bool {
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout))
	return c.wr.Flush() == nil
}

// protocolError returns the answer to a read error that is the client's
// malformed or oversize input, as Redis words it; ok is false for the
// connection ending, which gets no answer.
func protocolError(err error) (msg string, ok bool) {
	if errors.Is(err, errRequestTooLarge) {
		return "ERR Protocol error: request too large", true
	}
	if strings.HasPrefix(err.Error(), "Protocol error") { // redcon's parse errors
		return "ERR " + err.Error(), true
	}
	return "", false
}

// errRequestTooLarge is the guard's error for input over MaxRequestBytes.
var errRequestTooLarge = errors.New("request too large")

// guardReader caps the bytes the command reader may pull in one read of
// commands (n is reset before each): redcon's reader grows its buffer
// until a command is complete, so without the cap a client announcing a
// huge bulk could make it buffer without bound.
type guardReader struct {
	r   io.Reader
	n   int64
	max int64
}

// Read implements io.Reader.
func (g *guardReader) Read(p []byte) (int, error) {
	if g.n >= g.max {
		return 0, errRequestTooLarge
	}
	if rest := g.max - g.n; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := g.r.Read(p)
	g.n += int64(n)
	return n, err
}
