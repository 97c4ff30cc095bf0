package transport

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/weir-rl/weir/transport/peerpb"
)

// rawPeerClient is a peer client of the server at addr without a Pool,
// for sending messages a Pool would not; closed when the test ends.
func rawPeerClient(t *testing.T, addr string) peerpb.PeerClient {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return peerpb.NewPeerClient(conn)
}

// TestProtocolVersionOnTheWire: a receiver serves the versions it speaks
// (0, a sender before versions, reads as 1) and refuses a newer one with
// FailedPrecondition before its handler sees it; a message with fields it
// does not know is served with the fields it knows.
func TestProtocolVersionOnTheWire(t *testing.T) {
	rec := &recorder{}
	c := rawPeerClient(t, startServer(t, rec, nil))
	ctx := context.Background()
	batch := func(v Version) *peerpb.BatchRequest {
		return &peerpb.BatchRequest{From: "n1", Protocol: v, Requests: []*peerpb.Request{
			{Op: peerpb.Op_OP_TAKE, Checks: []*peerpb.Check{{Limit: "l", Key: "k", Cost: 3}}},
		}}
	}
	for _, v := range []Version{0, MinVersion, MaxVersion} {
		if _, err := c.Batch(ctx, batch(v)); err != nil {
			t.Errorf("batch at version %d: %v", v, err)
		}
	}
	calls := rec.calls.Load()
	newer := MaxVersion + 1
	_, err := c.Batch(ctx, batch(newer))
	_, herr := c.Handoff(ctx, &peerpb.HandoffRequest{From: "n1", Protocol: newer})
	_, rerr := c.Report(ctx, &peerpb.ReportRequest{Protocol: newer})
	for _, err := range []error{err, herr, rerr} {
		if status.Code(err) != codes.FailedPrecondition {
			t.Errorf("version %d: err = %v, want FailedPrecondition", newer, err)
		}
	}
	if rec.calls.Load() != calls {
		t.Error("handler served a version the node does not speak")
	}

	// A newer sender's unknown field, on the wire through real gRPC.
	m := batch(MaxVersion)
	unknown := protowire.AppendString(protowire.AppendTag(nil, 900, protowire.BytesType), "future")
	m.ProtoReflect().SetUnknown(unknown)
	m.Requests[0].ProtoReflect().SetUnknown(unknown)
	out, err := c.Batch(ctx, m)
	if err != nil || len(out.GetReplies()) != 1 || out.GetReplies()[0].GetResults()[0].GetRemaining() != 3 {
		t.Fatalf("batch with unknown fields: %v, %v", out, err)
	}
}

// TestPoolProtocol: the pool sends the version set, clamped to what this
// build speaks, so a peer of this build always accepts it.
func TestPoolProtocol(t *testing.T) {
	addr := startServer(t, &recorder{}, nil)
	p := newTestPool(t, LocalConfig())
	if p.Protocol() != MinVersion {
		t.Fatalf("new pool speaks %d, want %d", p.Protocol(), MinVersion)
	}
	for _, v := range []Version{0, MaxVersion, MaxVersion + 5} {
		p.SetProtocol(v)
		if got := p.Protocol(); got < MinVersion || got > MaxVersion {
			t.Fatalf("SetProtocol(%d): %d", v, got)
		}
		if _, err := p.Do(context.Background(), addr, take(0)); err != nil {
			t.Errorf("Do at SetProtocol(%d): %v", v, err)
		}
	}
	if !Speaks(2, 2) || Speaks(1, 2) {
		t.Error("Speaks: a feature of version 2 is used exactly when the cluster speaks 2")
	}
}
