package client

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/auth"
	"github.com/weir-rl/weir/internal/testpki"
	"github.com/weir-rl/weir/internal/tlsreload"
	"github.com/weir-rl/weir/node" //nolint:depguard // integration tests against a real node, in tests only
)

// These tests drive the lean transport against real nodes and real
// sockets: a proxy that cuts a connection under a take, and a fake RESP
// endpoint that answers garbage or nothing.

const leanLimits = `version: 1
limits:
  - name: exact
    algorithm: token_bucket
    capacity: 1000
    rate: 1/h
  - name: fast
    algorithm: token_bucket
    capacity: 1
    rate: 20/s
`

// startLeanNode starts a node with its RESP endpoint on (unless edit turns
// it off), stopped in t.Cleanup.
func startLeanNode(t *testing.T, edit func(*node.Config)) *node.Node {
	t.Helper()
	path := filepath.Join(t.TempDir(), "limits.yaml")
	if err := os.WriteFile(path, []byte(leanLimits), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := node.LocalConfig()
	cfg.LimitsPath = path
	cfg.RESPAddr = "127.0.0.1:0"
	if edit != nil {
		edit(&cfg)
	}
	n, err := node.New(cfg, node.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Shutdown(context.Background()) })
	return n
}

// dialLean dials n and, when leanAddr is set, points every member's lean
// pool at leanAddr instead of the advertised RESP address.
func dialLean(t *testing.T, n *node.Node, opts Options, leanAddr string) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, []string{n.GRPCAddr()}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if leanAddr != "" {
		c.r.mu.Lock()
		for _, m := range c.r.members.Load().list {
			m.lean = newLeanPool(leanAddr, &c.r.opts)
		}
		c.r.mu.Unlock()
	}
	return c
}

func takeExact(t *testing.T, c *Client, key string) api.TakeResponse {
	t.Helper()
	resp, err := c.Take(t.Context(), api.Check{Limit: "exact", Key: key})
	if err != nil || !resp.Allowed {
		t.Fatalf("take %s: %+v, %v", key, resp, err)
	}
	return resp
}

// TestLeanFallsBackToGRPC: a member without a RESP address, TransportGRPC,
// and options RESP cannot honour (Credentials, DialOptions) all take over
// gRPC; a member with one takes over RESP.
func TestLeanFallsBackToGRPC(t *testing.T) {
	plain := startLeanNode(t, func(c *node.Config) { c.RESPAddr = "" })
	c := dialLean(t, plain, Options{}, "")
	takeExact(t, c, "a")
	if st := c.Stats(); st.LeanTakes != 0 || st.Takes != 1 {
		t.Fatalf("no RESP address: stats %+v, want one take over gRPC", st)
	}
	n := startLeanNode(t, nil)
	c = dialLean(t, n, Options{Transport: TransportGRPC}, "")
	takeExact(t, c, "a")
	if st := c.Stats(); st.LeanTakes != 0 {
		t.Fatalf("TransportGRPC: stats %+v, want the take over gRPC", st)
	}
	c = dialLean(t, n, Options{}, "")
	takeExact(t, c, "a")
	if st := c.Stats(); st.LeanTakes != 1 {
		t.Fatalf("RESP advertised: stats %+v, want the take over RESP", st)
	}
	// A RESP address where nothing listens: the take goes over gRPC.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	_ = ln.Close()
	c = dialLean(t, n, Options{}, dead)
	takeExact(t, c, "a")
	if st := c.Stats(); st.LeanTakes != 0 || st.Retries != 0 {
		t.Fatalf("RESP unreachable: stats %+v, want the take over gRPC at once", st)
	}
}

// TestLeanWait: Wait over RESP sleeps the retry-after the denial carried
// and comes back allowed.
func TestLeanWait(t *testing.T) {
	n := startLeanNode(t, nil)
	c := dialLean(t, n, Options{}, "")
	for i := range 3 {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		resp, err := c.Wait(ctx, api.Check{Limit: "fast", Key: "w"})
		cancel()
		if err != nil || !resp.Allowed {
			t.Fatalf("wait %d: %+v, %v", i, resp, err)
		}
	}
	if st := c.Stats(); st.LeanTakes < 4 || st.LeanTakes != st.Takes {
		t.Fatalf("stats %+v: want every try over RESP, and at least one denied", st)
	}
}

// cutProxy forwards a RESP connection to a node; armed, it drops the next
// answer it reads from the node and closes both sides, so the take under
// it was decided and the client never hears of it.
type cutProxy struct {
	ln    net.Listener
	to    string
	armed atomic.Bool
	cuts  atomic.Int32
	wg    sync.WaitGroup
}

func newCutProxy(t *testing.T, to string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, to: to}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		_ = ln.Close()
		p.wg.Wait()
	})
	return p
}

func (p *cutProxy) accept() {
	for {
		cc, err := p.ln.Accept()
		if err != nil {
			return
		}
		sc, err := net.Dial("tcp", p.to)
		if err != nil {
			_ = cc.Close()
			continue
		}
		p.wg.Go(func() {
			_, _ = io.Copy(sc, cc)
			_ = sc.Close()
		})
		p.wg.Go(func() {
			defer cc.Close()
			defer sc.Close()
			buf := make([]byte, 4096)
			for {
				n, err := sc.Read(buf)
				if n > 0 && p.armed.CompareAndSwap(true, false) {
					p.cuts.Add(1)
					return
				}
				if n > 0 {
					if _, err := cc.Write(buf[:n]); err != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		})
	}
}

// TestLeanConnKilledMidTake: the connection dies after the owner decided
// and before the answer arrives; the client retries on a new connection
// with the same request id and gets the first decision: spent once.
func TestLeanConnKilledMidTake(t *testing.T) {
	n := startLeanNode(t, nil)
	p := newCutProxy(t, n.RESPAddr())
	c := dialLean(t, n, Options{LeanConns: 1}, p.ln.Addr().String())
	first := takeExact(t, c, "k")
	p.armed.Store(true)
	second := takeExact(t, c, "k")
	if p.cuts.Load() != 1 {
		t.Fatalf("the proxy cut %d connections, want 1", p.cuts.Load())
	}
	if got, want := second.Results[0].Remaining, first.Results[0].Remaining-1; got != want {
		t.Fatalf("the retried take left %d, want %d", got, want)
	}
	third := takeExact(t, c, "k")
	if got, want := third.Results[0].Remaining, first.Results[0].Remaining-2; got != want {
		t.Fatalf("after the retried take %d are left, want %d: the retry spent again", got, want)
	}
	if st := c.Stats(); st.Retries != 1 || st.LeanTakes != 4 {
		t.Fatalf("stats %+v: want one retry, four takes over RESP", st)
	}
}

// TestLeanTLSAndToken: against a node with TLS and a tokens file, takes go
// over RESP with TLS and AUTH; a token the node does not know takes
// nothing over either transport.
func TestLeanTLSAndToken(t *testing.T) {
	const tok = "svc-0123456789abcdef0123456789abcdef"
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "ca")
	pair := ca.Server(t, dir, "node")
	tokens := filepath.Join(dir, "tokens.yaml")
	body := "version: 1\ntokens:\n  - name: svc\n    sha256: " + auth.HashToken(tok) + "\n    scopes: [decide]\n"
	if err := os.WriteFile(tokens, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	n := startLeanNode(t, func(c *node.Config) {
		c.Security.TLS = tlsreload.Config{CertFile: pair.CertFile, KeyFile: pair.KeyFile}
		c.Security.TokensFile = tokens
	})
	tc, err := tlsreload.ClientConfig(tlsreload.ClientOptions{CAFile: ca.CertFile})
	if err != nil {
		t.Fatal(err)
	}
	c := dialLean(t, n, Options{TLSConfig: tc, Token: tok}, "")
	for i := range 3 {
		if r := takeExact(t, c, "k"); r.Results[0].Remaining != int64(999-i) {
			t.Fatalf("take %d: %+v", i, r)
		}
	}
	if st := c.Stats(); st.LeanTakes != 3 {
		t.Fatalf("stats %+v: want three takes over RESP", st)
	}
	// The RESP endpoint refuses a wrong token (the pool then falls back to
	// gRPC, which refuses it too).
	p := newLeanPool(n.RESPAddr(), &Options{TLSConfig: tc, Token: "wrong", LeanConns: 1, Clock: realClock{}})
	if _, err := p.dial(t.Context()); err == nil || !errors.As(err, new(replyError)) {
		t.Fatalf("dial with a wrong token: %v, want WRONGPASS", err)
	}
	// And plaintext on its TLS port gets no connection.
	p = newLeanPool(n.RESPAddr(), &Options{LeanConns: 1, Clock: realClock{}})
	if _, err := p.dial(t.Context()); err == nil {
		t.Fatal("a plaintext handshake with the TLS endpoint succeeded")
	}
}

// fakeRESP is a RESP endpoint on a real socket: it answers the handshake's
// probe as a node does and every WEIR.CTAKE with answer of its arguments
// (nothing when it returns nil).
type fakeRESP struct {
	ln     net.Listener
	answer func(args []string) []byte
	seen   atomic.Int32 // WEIR.CTAKE commands read
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
}

func newFakeRESP(t *testing.T, answer func() []byte) *fakeRESP {
	return newFakeRESPWith(t, nil, func([]string) []byte { return answer() })
}

// newFakeRESPWith is newFakeRESP serving TLS with tc when it is set, whose
// answer sees the command's arguments.
func newFakeRESPWith(t *testing.T, tc *tls.Config, answer func(args []string) []byte) *fakeRESP {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if tc != nil {
		ln = tls.NewListener(ln, tc)
	}
	f := &fakeRESP{ln: ln, answer: answer}
	f.wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.conns = append(f.conns, nc)
			f.mu.Unlock()
			f.wg.Go(func() { f.serve(nc) })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		f.mu.Lock()
		for _, c := range f.conns {
			_ = c.Close()
		}
		f.mu.Unlock()
		f.wg.Wait()
	})
	return f
}

func (f *fakeRESP) serve(nc net.Conn) {
	defer nc.Close()
	br := bufio.NewReader(nc)
	for {
		line, err := br.ReadString('\n')
		if err != nil || len(line) < 3 || line[0] != '*' {
			return
		}
		argc, _ := strconv.Atoi(line[1 : len(line)-2])
		args := make([]string, 0, argc)
		for range argc {
			h, err := br.ReadString('\n')
			if err != nil || len(h) < 3 {
				return
			}
			size, _ := strconv.Atoi(h[1 : len(h)-2])
			b := make([]byte, size+2)
			if _, err := io.ReadFull(br, b); err != nil {
				return
			}
			args = append(args, string(b[:size]))
		}
		if argc == 1 {
			_, _ = nc.Write([]byte("-ERR wrong number of arguments for 'weir.ctake' command\r\n"))
			continue
		}
		f.seen.Add(1)
		if a := f.answer(args); a != nil {
			if _, err := nc.Write(a); err != nil {
				return
			}
		}
	}
}

// TestLeanBadReply: a reply the client cannot read fails the take as a
// transport failure, at once, and the connection is dropped.
func TestLeanBadReply(t *testing.T) {
	n := startLeanNode(t, nil)
	for _, bad := range []string{
		"*999999\r\n",
		"*13\r\n:1\r\n:0\r\n:1\r\n:1\r\n:0\r\n$99999999\r\n",
		"*13\r\n:x\r\n",
		"+OK\r\n",
		"*13\r\n:1\r\n" + string(make([]byte, 20<<10)),
	} {
		f := newFakeRESP(t, func() []byte { return []byte(bad) })
		c := dialLean(t, n, Options{Retry: RetryPolicy{MaxAttempts: 1}}, f.ln.Addr().String())
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		_, err := c.Take(ctx, api.Check{Limit: "exact", Key: "k"})
		if !errors.Is(err, errConnBroken) || ctx.Err() != nil {
			t.Errorf("reply %.20q: %v, want a broken connection at once", bad, err)
		}
		cancel()
	}
}

// TestLeanPendingTakes: a take waiting for an answer that never comes ends
// with its context, and Close fails every take in flight at once.
func TestLeanPendingTakes(t *testing.T) {
	n := startLeanNode(t, nil)
	f := newFakeRESP(t, func() []byte { return nil })
	c := dialLean(t, n, Options{}, f.ln.Addr().String())
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	_, err := c.Take(ctx, api.Check{Limit: "exact", Key: "k"})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("take past its deadline: %v", err)
	}
	const inFlight = 8
	errs := make(chan error, inFlight)
	for range inFlight {
		go func() {
			_, err := c.Take(context.Background(), api.Check{Limit: "exact", Key: "k"})
			errs <- err
		}()
	}
	waitUntil(t, 20*time.Second, "the endpoint to read every take", func() bool { return f.seen.Load() >= 1+inFlight })
	_ = c.Close()
	for range inFlight {
		if err := <-errs; !errors.Is(err, errClosed) {
			t.Errorf("take in flight at Close: %v, want errClosed", err)
		}
	}
}

// TestReadCTakeRejects: the decoder refuses malformed and oversized
// replies without reading past them.
func TestReadCTakeRejects(t *testing.T) {
	ok := "*13\r\n:1\r\n:0\r\n:7\r\n:3\r\n:0\r\n$5\r\nexact\r\n:1\r\n:9\r\n:10\r\n:0\r\n:100\r\n:0\r\n:1000\r\n"
	resp, err := newReplyReader(stringsReader(ok)).readCTake(nil)
	if err != nil || !resp.Allowed || resp.RulesVersion != 7 || resp.RingEpoch != 3 || len(resp.Results) != 1 ||
		resp.Results[0] != (api.Result{Limit: "exact", Allowed: true, Remaining: 9, Capacity: 10, ResetAfter: 100 * time.Millisecond, Window: time.Second}) {
		t.Fatalf("good reply: %+v, %v", resp, err)
	}
	for _, bad := range []string{
		"", "*\r\n", "*12\r\n", "*14\r\n", "*-1\r\n", ":1\r\n", "*13\n",
		"*13\r\n:1\r\n:0\r\n:7\r\n:3\r\n:0\r\n$5\r\nexactXY:1\r\n",
		"*13\r\n:1\r\n:0\r\n:7\r\n:3\r\n:0\r\n$5\r\nexact\r\n:1\r\n:9\r\n:10\r\n:0\r\n:100\r\n:3\r\n:1000\r\n",
		"*13\r\n:1\r\n:0\r\n:7\r\n:3\r\n:0\r\n$-1\r\n",
	} {
		if _, err := newReplyReader(stringsReader(bad)).readCTake(nil); err == nil {
			t.Errorf("readCTake(%q) accepted", bad)
		}
	}
	if _, err := newReplyReader(stringsReader("-QUOTA tenant full\r\n")).readCTake(nil); statusOfReply(err.(replyError)) == nil { //nolint:errorlint // the decoder returns it bare
		t.Error("error reply not converted")
	}
}

func stringsReader(s string) io.Reader { return &onceReader{s: s} }

type onceReader struct{ s string }

func (r *onceReader) Read(p []byte) (int, error) {
	if r.s == "" {
		return 0, io.EOF
	}
	n := copy(p, r.s)
	r.s = r.s[n:]
	return n, nil
}
