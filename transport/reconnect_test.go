package transport

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/bucket"
)

// TestHandoffToAPeerBackFromFailure: a peer that refused dials for a while
// (it was down) listens again, and a handoff made at once reaches it. The
// connection is then still waiting out the backoff of its refused dials,
// and a call that does not dial again fails with the last dial's error: a
// new owner back from a crash would start the handed-over keys from a full
// bucket.
func TestHandoffToAPeerBackFromFailure(t *testing.T) {
	addr := closedPort(t)
	var dials atomic.Int64
	p := newTestPool(t, countingDials(&dials))
	st := State{Buckets: []bucket.Entry{{Name: "l", Key: "k", Snapshot: bucket.Snapshot{Count: 3, Since: -1}}}}
	if err := p.Handoff(context.Background(), addr, st); status.Code(err) != codes.Unavailable {
		t.Fatalf("handoff to a closed port: err = %v, want Unavailable", err)
	}
	// Six refused dials: the connection's next one is at least 400 ms away
	// (50 ms × 1.6⁵, less 20 % jitter).
	deadline := time.Now().Add(10 * time.Second)
	for dials.Load() < 6 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d dials in 10 s: the connection does not redial on its own", dials.Load())
		}
		time.Sleep(5 * time.Millisecond) // polling a count, not waiting for an effect
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("port %s taken meanwhile: %v", addr, err)
	}
	rec := &recorder{}
	srv := NewServer(rec, nil)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	if err := p.Handoff(context.Background(), addr, st); err != nil {
		t.Fatalf("handoff to the peer listening again: %v (after %d dials)", err, dials.Load())
	}
	if got, _ := rec.handedOver(); len(got.Buckets) != 1 || got.Buckets[0].Key != "k" {
		t.Fatalf("peer received %+v, want the one bucket", got)
	}
}

// countingDials is LocalConfig with a TCP dialer that counts its dials in
// dials.
func countingDials(dials *atomic.Int64) Config {
	cfg := LocalConfig()
	cfg.Dialer = func(ctx context.Context, a string) (net.Conn, error) {
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, "tcp", a)
	}
	return cfg
}
