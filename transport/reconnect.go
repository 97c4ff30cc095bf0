package transport

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/transport/peerpb"
)

// Reconnect makes the next call to peerAddr dial now when its connection
// is in transient failure, rather than wait out the reconnect backoff.
// While a peer is down its connection keeps redialling, waiting up to 2 s
// between refused dials, and a call made meanwhile fails at once with the
// last dial's error even after the peer is back. Reconnect drops such a
// connection (calls on it fail at once anyway); the next call opens a new
// one. It leaves a connection in any other state alone. The cluster calls
// it for a member that gossip holds alive again, so forwards and handoffs
// to it do not fail for the rest of that wait. (gRPC's own
// ClientConn.ResetConnectBackoff reads the connection's subchannel map
// without its lock, a data race with a call that is opening one.)
func (p *Pool) Reconnect(peerAddr string) {
	p.mu.Lock()
	pr := p.peers[peerAddr]
	failed := pr != nil && pr.conn.GetState() == connectivity.TransientFailure
	if failed {
		delete(p.peers, peerAddr)
	}
	p.mu.Unlock()
	if failed {
		pr.close(ErrDropped)
	}
}

// redialWait bounds how long a handoff that failed as unreachable waits
// for the dial it then makes: a peer that is up again answers a dial on
// its network within milliseconds.
const redialWait = 500 * time.Millisecond

// handoffAgain sends req once more after a handoff call to pr failed with
// err as unreachable, which a connection still waiting out its backoff
// reports without dialling: it reconnects (Reconnect) and waits for the
// connection, within ctx and redialWait. It returns the peer to send the
// next chunks to, and nil when the second call succeeded or err otherwise,
// which says why the peer was unreachable better than a deadline would.
// Sending a chunk twice is safe: a receiver keeps the fewer tokens of two
// copies of a bucket, the larger of two holdings, and a lease by its id.
func (p *Pool) handoffAgain(ctx context.Context, pr *peer, req *peerpb.HandoffRequest, err error) (*peer, error) {
	if status.Code(err) != codes.Unavailable {
		return pr, err
	}
	p.Reconnect(pr.addr)
	npr, perr := p.peer(pr.addr)
	if perr != nil {
		return pr, err
	}
	rctx, cancel := context.WithTimeout(ctx, redialWait)
	defer cancel()
	if _, again := npr.client.Handoff(rctx, req, grpc.WaitForReady(true)); again != nil {
		return npr, err
	}
	return npr, nil
}
