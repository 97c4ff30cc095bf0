package transport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/weir-rl/weir/allot"
	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/lease"
	"github.com/weir-rl/weir/transport/peerpb"
)

// The replica link (link.go, link_server.go), against a real Server on
// loopback.

// linkSample is a replica batch with every kind of entry: packed buckets,
// a bucket with an inline limit (sent as a HandoffEntry), a lease and an
// allotment.
func linkSample() (State, []Key) {
	inline := decodeState([]*peerpb.HandoffEntry{goldenBucketEntry()}).Buckets
	st := State{
		Buckets:  append(inline, goldenPackedEntries...), // in the order the receiver decodes them
		Leases:   lease.Handoff{NextFencing: 9, Leases: []lease.Snapshot{{ID: "l1", Limit: "db", Key: "x", Holder: "h", Fencing: 8, TTL: time.Second}}},
		Holdings: []allot.Entry{{Key: allot.Key{Limit: "api", Key: "k1"}, Holder: "rlqs-1", Tokens: 40, Remaining: time.Second, Seq: 5}},
	}
	return st, []Key{{Limit: "api", Key: "gone"}}
}

// linkConn is the owner's link connection to addr, nil when none is open.
func linkConn(t *testing.T, p *Pool, addr string) net.Conn {
	t.Helper()
	pr, err := p.peer(addr)
	if err != nil {
		t.Fatal(err)
	}
	pr.link.mu.Lock()
	defer pr.link.mu.Unlock()
	return pr.link.conn
}

// TestLinkCarriesReplicaBatches: at V3 a replica batch reaches the
// successor's handler whole over the link, in plaintext and over TLS, and
// forwards and handoffs keep working on the same port beside it.
func TestLinkCarriesReplicaBatches(t *testing.T) {
	for _, tc := range []struct {
		name  string
		creds *Credentials
	}{{"plaintext", nil}, {"tls", testCreds(t, "link")}} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			addr := startServer(t, rec, tc.creds)
			cfg := LocalConfig()
			cfg.Credentials, cfg.Self = tc.creds, "owner"
			p := newTestPool(t, cfg)
			p.SetProtocol(V3)
			st, dropped := linkSample()
			n, err := p.Replicate(context.Background(), addr, st, dropped)
			if err != nil {
				t.Fatal(err)
			}
			if linkConn(t, p, addr) == nil {
				t.Fatal("no link connection: the batch did not go over the link")
			}
			if n < 100 {
				t.Errorf("Replicate counted %d bytes", n)
			}
			if _, err := p.Replicate(context.Background(), addr, State{}, nil); err != nil {
				t.Fatalf("heartbeat: %v", err)
			}
			rec.mu.Lock()
			got, gotDropped, from := rec.replicas, rec.dropped, rec.from
			rec.mu.Unlock()
			if len(got) != 2 || !reflect.DeepEqual(got[0], st) || got[1].Len() != 0 {
				t.Fatalf("the successor got %+v, want %+v and a heartbeat", got, st)
			}
			if !reflect.DeepEqual(gotDropped, dropped) || from[0] != "owner" {
				t.Errorf("dropped %v from %q", gotDropped, from[0])
			}
			rep, err := p.Do(context.Background(), addr, take(1))
			if err != nil || len(rep.Results) != 1 {
				t.Fatalf("forward beside the link: %+v, %v", rep, err)
			}
			if err := p.Handoff(context.Background(), addr, State{Buckets: goldenPackedEntries}); err != nil {
				t.Fatalf("handoff beside the link: %v", err)
			}
		})
	}
}

// TestLinkOnlyFromV3: a cluster that speaks V2 sends replica batches as
// Handoff calls and opens no link, so a successor of an older release
// still gets them.
func TestLinkOnlyFromV3(t *testing.T) {
	rec, addr, p := handoffPeers(t, "owner")
	p.SetProtocol(V2)
	st, dropped := linkSample()
	if _, err := p.Replicate(context.Background(), addr, st, dropped); err != nil {
		t.Fatal(err)
	}
	if linkConn(t, p, addr) != nil {
		t.Fatal("a V2 cluster opened a replica link")
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.replicas) != 1 || !reflect.DeepEqual(rec.replicas[0], st) {
		t.Fatalf("the successor got %+v", rec.replicas)
	}
}

// TestLinkRefusalKeepsTheLink: a batch the handler refuses fails the send
// with the handler's reason, and the link stays open for the next batch.
func TestLinkRefusalKeepsTheLink(t *testing.T) {
	rec, addr, p := handoffPeers(t, "owner")
	p.SetProtocol(V3)
	rec.replicateErr = errors.New("replica store full")
	st, _ := linkSample()
	_, err := p.Replicate(context.Background(), addr, st, nil)
	var refused *refusedError
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "replica store full") {
		t.Fatalf("refused batch: err = %v", err)
	}
	c := linkConn(t, p, addr)
	rec.mu.Lock()
	rec.replicateErr = nil
	rec.mu.Unlock()
	if _, err := p.Replicate(context.Background(), addr, st, nil); err != nil {
		t.Fatal(err)
	}
	if c == nil || linkConn(t, p, addr) != c {
		t.Error("the refusal closed the link")
	}
}

// TestLinkRedialsARestartedPeer: a successor that restarted on the same
// address gets the next batch on a new connection, without an error.
func TestLinkRedialsARestartedPeer(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	first := NewServer(&recorder{}, nil)
	done := make(chan error, 1)
	go func() { done <- first.Serve(lis) }()
	p := newTestPool(t, LocalConfig())
	p.SetProtocol(V3)
	if _, err := p.Replicate(context.Background(), addr, State{}, nil); err != nil {
		t.Fatal(err)
	}
	first.Stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	rec := &recorder{}
	lis2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the restarted peer cannot listen on %s again: %v", addr, err)
	}
	second := NewServer(rec, nil)
	go func() { done <- second.Serve(lis2) }()
	t.Cleanup(func() { second.Stop(); <-done })
	st, _ := linkSample()
	if _, err := p.Replicate(context.Background(), addr, st, nil); err != nil {
		t.Fatalf("batch to the restarted peer: %v", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.replicas) != 1 {
		t.Fatalf("the restarted peer got %d batches", len(rec.replicas))
	}
}

// TestLinkUnansweredBatchFails: a peer that reads batches and never
// answers fails the send within HandoffDeadline, and the owner drops the
// connection, so the keys go back to the log (node/cluster requeues them).
func TestLinkUnansweredBatchFails(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	cfg := LocalConfig()
	cfg.HandoffDeadline = 100 * time.Millisecond
	p := newTestPool(t, cfg)
	p.SetProtocol(V3)
	addr := lis.Addr().String()
	if _, err := p.Replicate(context.Background(), addr, State{}, nil); err == nil {
		t.Fatal("a batch nobody answered counted as sent")
	}
	if linkConn(t, p, addr) != nil {
		t.Error("the unanswered connection stays open")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Replicate(ctx, addr, State{}, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled send: err = %v, want context.Canceled", err)
	}
}

// rawLink opens a link connection to addr by hand and writes the preface.
func rawLink(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, linkPreface); err != nil {
		t.Fatal(err)
	}
	return c, bufio.NewReader(c)
}

// TestLinkBadFrames: a frame that is not a readable replica batch is
// refused with a reason and stores nothing; one over the limit, or a
// wrong preface, ends the connection and stores nothing; the server goes
// on serving.
func TestLinkBadFrames(t *testing.T) {
	rec := &recorder{}
	addr := startServer(t, rec, nil)
	frame := func(b []byte) []byte { return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...) }
	marshal := func(m *peerpb.HandoffRequest) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name, reason string
		body         []byte
	}{
		{"not protobuf", "cannot parse", []byte{0xff, 0xff, 0xff}},
		{"a handoff", "replica batches only", marshal(&peerpb.HandoffRequest{From: "x", Protocol: 3})},
		{"an unknown version", "version 99", marshal(&peerpb.HandoffRequest{From: "x", Replica: true, Protocol: 99})},
		{"broken packed buckets", "packed", marshal(&peerpb.HandoffRequest{From: "x", Replica: true, Protocol: 3, Buckets: []byte{9, 9}})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, r := rawLink(t, addr)
			if _, err := c.Write(frame(tc.body)); err != nil {
				t.Fatal(err)
			}
			err := readAnswer(r)
			var refused *refusedError
			if !errors.As(err, &refused) || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("answer %v, want a refusal naming %q", err, tc.reason)
			}
		})
	}
	t.Run("over the limit", func(t *testing.T) {
		c, r := rawLink(t, addr)
		if _, err := c.Write(binary.BigEndian.AppendUint32(nil, maxLinkFrame+1)); err != nil {
			t.Fatal(err)
		}
		if _, err := r.ReadByte(); !errors.Is(err, io.EOF) {
			t.Fatalf("read after an oversized frame: %v, want EOF", err)
		}
	})
	t.Run("wrong preface", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(c, "WEIR REPLICA 9\r\n"+string(frame(marshal(&peerpb.HandoffRequest{Replica: true})))); err != nil {
			t.Fatal(err)
		}
		if n, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read after a wrong preface: %d bytes, %v; want the connection closed", n, err)
		}
	})
	if rec.calls.Load() != 0 {
		t.Fatalf("the handler was called %d times for bad frames", rec.calls.Load())
	}
	p := newTestPool(t, LocalConfig())
	p.SetProtocol(V3)
	if _, err := p.Replicate(context.Background(), addr, State{}, nil); err != nil {
		t.Fatalf("a good batch after the bad ones: %v", err)
	}
}

// TestLinkNeedsCredentials: a server with credentials stores nothing from
// a link in plaintext or from one with another cluster's certificate.
func TestLinkNeedsCredentials(t *testing.T) {
	rec := &recorder{}
	addr := startServer(t, rec, testCreds(t, "ours"))
	st, _ := linkSample()

	c, r := rawLink(t, addr)
	b, err := appendFrame(nil, &peerpb.HandoffRequest{From: "x", Replica: true, Protocol: 3})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.Write(b)
	if err := readAnswer(r); err == nil {
		t.Fatal("a plaintext batch was answered")
	}

	cfg := LocalConfig()
	cfg.Credentials = testCreds(t, "theirs")
	p := newTestPool(t, cfg)
	p.SetProtocol(V3)
	if _, err := p.Replicate(context.Background(), addr, st, nil); err == nil {
		t.Fatal("another cluster's batch was stored")
	}
	if n := rec.calls.Load(); n != 0 {
		t.Fatalf("the handler was called %d times", n)
	}
}

// TestStopClosesLinks: a server's stop, graceful or not, closes its open
// links rather than waiting on them, and the owner's next batch fails.
func TestStopClosesLinks(t *testing.T) {
	for _, graceful := range []bool{false, true} {
		srv, addr := startServerWith(t, &recorder{}, nil)
		p := newTestPool(t, LocalConfig())
		p.SetProtocol(V3)
		if _, err := p.Replicate(context.Background(), addr, State{}, nil); err != nil {
			t.Fatal(err)
		}
		if graceful {
			srv.GracefulStop()
		} else {
			srv.Stop()
		}
		srv.links.mu.Lock()
		open := len(srv.links.conns)
		srv.links.mu.Unlock()
		if open != 0 {
			t.Errorf("graceful=%v: %d link connections open after stop", graceful, open)
		}
		if _, err := p.Replicate(context.Background(), addr, State{}, nil); err == nil {
			t.Errorf("graceful=%v: a batch to a stopped server counted as sent", graceful)
		}
	}
}

// TestLinkFrameLayout fixes the link's bytes: a frame is the big-endian
// length and the HandoffRequest, an answer the length and the reason.
func TestLinkFrameLayout(t *testing.T) {
	req := golden[V3]["replica-batch"].(*peerpb.HandoffRequest)
	body, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := appendFrame(nil, req)
	if err != nil {
		t.Fatal(err)
	}
	if want := append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...); !bytes.Equal(got, want) {
		t.Errorf("frame % x\nwant % x", got, want)
	}
	if got := appendAnswer(nil, nil); !bytes.Equal(got, []byte{0, 0, 0, 0}) {
		t.Errorf("stored: % x", got)
	}
	if got := appendAnswer(nil, errors.New("no")); !bytes.Equal(got, []byte{0, 0, 0, 2, 'n', 'o'}) {
		t.Errorf("refused: % x", got)
	}
	if long := appendAnswer(nil, errors.New(strings.Repeat("x", 5000))); len(long) != 4+maxLinkRefusal {
		t.Errorf("a long reason is %d bytes framed", len(long))
	}
	if linkPreface[0] == 'P' || linkPreface[0] == 0x16 {
		t.Error("the preface's first byte is gRPC's or TLS's")
	}
}

// TestLinkBacksOffAfterAFailedDial: after a dial fails, batches fail at
// once with its error until the backoff has passed, as gRPC's calls do
// while it waits to reconnect, so a successor that cannot be reached
// holds no flush for a dial each; then the link dials again.
func TestLinkBacksOffAfterAFailedDial(t *testing.T) {
	addr := closedPort(t)
	var dials atomic.Int64
	p := newTestPool(t, countingDials(&dials))
	p.SetProtocol(V3)
	pr, err := p.peer(addr)
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Unix(1000, 0)
	pr.link.now = func() time.Time { return clock }
	send := func() error { _, err := p.Replicate(context.Background(), addr, State{}, nil); return err }
	if err := send(); err == nil {
		t.Fatal("a batch to a closed port counted as sent")
	}
	clock = clock.Add(linkFirstRetry - time.Millisecond)
	if err := send(); err == nil || !strings.Contains(err.Error(), "next dial in") {
		t.Fatalf("within the backoff: err = %v", err)
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("%d dials within the backoff, want 1", n)
	}
	clock = clock.Add(time.Millisecond)
	if err := send(); err == nil {
		t.Fatal("the port is still closed")
	}
	if n := dials.Load(); n != 2 {
		t.Fatalf("%d dials after the backoff, want 2", n)
	}
	// The second failure holds the next dial back longer.
	clock = clock.Add(linkFirstRetry)
	if err := send(); err == nil || dials.Load() != 2 {
		t.Fatalf("a growing backoff: err = %v after %d dials", err, dials.Load())
	}
}

// TestPoolCloseEndsALinkSend: closing the pool (a node stopping, or
// killed in a test) fails a send that waits on a successor that stopped
// answering, rather than waiting out HandoffDeadline behind it.
func TestPoolCloseEndsALinkSend(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	read := make(chan struct{})
	go func() {
		c, err := lis.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, len(linkPreface)+4)
		if _, err := io.ReadFull(c, buf); err == nil {
			close(read) // the preface and a frame's length: the batch is out
		}
		_, _ = io.Copy(io.Discard, c)
	}()
	cfg := LocalConfig()
	cfg.HandoffDeadline = 10 * time.Minute
	p := NewPool(cfg)
	p.SetProtocol(V3)
	sent := make(chan error, 1)
	go func() {
		_, err := p.Replicate(context.Background(), lis.Addr().String(), State{}, nil)
		sent <- err
	}()
	<-read
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-sent; err == nil {
		t.Fatal("a batch nobody answered counted as sent")
	}
}

// keepingHandler keeps each replica batch's packed buckets undecoded, as
// the successor's replica log does.
type keepingHandler struct {
	echoHandler
	mu     sync.Mutex
	packed []Packed
}

func (h *keepingHandler) Replicate(_ context.Context, _ string, r Replica) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.packed = append(h.packed, r.Packed)
	return nil
}

// TestLinkBatchesOwnTheirBytes: the successor keeps a batch's packed
// buckets as the bytes that arrived (replicaLog), and the link server
// reads every frame into one buffer: a batch kept must not change when
// the next frame is read.
func TestLinkBatchesOwnTheirBytes(t *testing.T) {
	h := &keepingHandler{}
	addr := startServer(t, h, nil)
	p := newTestPool(t, LocalConfig())
	p.SetProtocol(V3)
	batch := func(prefix string) State {
		var st State
		for i := range 50 {
			st.Buckets = append(st.Buckets, bucket.Entry{Name: "l", Key: fmt.Sprintf("%s-%d", prefix, i), Snapshot: bucket.Snapshot{Count: int64(i), UntilFull: time.Second}})
		}
		return st
	}
	first, second := batch("first"), batch("other")
	for _, st := range []State{first, second} {
		if _, err := p.Replicate(context.Background(), addr, st, nil); err != nil {
			t.Fatal(err)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.packed) != 2 {
		t.Fatalf("%d batches kept", len(h.packed))
	}
	got, err := decodePacked(nil, h.packed[0].b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, first.Buckets) {
		t.Fatalf("the first batch kept reads %v after the second arrived", got[:2])
	}
}
