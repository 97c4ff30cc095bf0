package gossip

import (
	"bytes"
	"context"
	"crypto/sha256"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-rl/weir/ring"
)

// TestDecryptLogSteps: the first failure is logged, later ones within
// decryptLogEvery are suppressed, and the next logged one says how many.
func TestDecryptLogSteps(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	d := rateLog{every: decryptLogEvery}
	steps := []struct {
		at         time.Duration
		log        bool
		suppressed int
	}{
		{0, true, 0},
		{time.Millisecond, false, 0},
		{5 * time.Second, false, 0},
		{-time.Second, false, 0}, // a clock step back is within the interval
		{decryptLogEvery, true, 3},
		{decryptLogEvery + time.Second, false, 0},
		{3 * decryptLogEvery, true, 1},
	}
	for i, s := range steps {
		log, sup := d.note(t0.Add(s.at))
		if log != s.log || sup != s.suppressed {
			t.Fatalf("step %d at %v: log %v suppressed %d, want %v %d", i, s.at, log, sup, s.log, s.suppressed)
		}
	}
}

// lockedBuffer is a bytes.Buffer safe for the log handler's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestJunkPacketsAreCountedNotLogged: 500 UDP packets that do not decrypt,
// sent to a real member's gossip port, are all counted and logged once,
// not 500 times; so are junk TCP streams.
func TestJunkPacketsAreCountedNotLogged(t *testing.T) {
	key := sha256.Sum256([]byte("cluster secret"))
	var logs lockedBuffer
	var failures atomic.Int64
	cfg := LocalConfig()
	cfg.Name = "keyed"
	cfg.GossipKey = key[:]
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg.OnDecryptFailure = func() { failures.Add(1) }
	r, err := New(cfg, ring.Meta{GRPCAddr: "127.0.0.1:9000"})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var addr string
	waitFor(t, "own address", func() bool {
		m, _ := r.View().Member(cfg.Name)
		addr = m.Addr
		return addr != ""
	})
	udp, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	junk := bytes.Repeat([]byte{1, 0xde, 0xad}, 20) // version 1 and garbage
	const packets = 500
	for sent := 0; sent < packets; {
		for range 50 { // in batches, so the socket buffer never overflows
			if _, err := udp.Write(junk); err != nil {
				t.Fatal(err)
			}
			sent++
		}
		waitFor(t, "the batch to be counted", func() bool { return failures.Load() >= int64(sent) })
	}
	for range 5 {
		tcp, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = tcp.Write(append([]byte{1}, junk...)) // encryptMsg, then garbage
		_ = tcp.Close()
	}
	waitFor(t, "the streams to be counted", func() bool { return failures.Load() >= packets+5 })
	if n := strings.Count(logs.String(), "failed to decrypt"); n != 1 {
		t.Fatalf("%d decrypt failures logged %d lines, want 1:\n%s", failures.Load(), n, logs.String())
	}
	if n := strings.Count(logs.String(), "Decrypt packet failed"); n != 1 {
		t.Fatalf("memberlist's own line logged %d times, want once (inside the rate-limited line)", n)
	}
}
