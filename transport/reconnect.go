package transport

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/transport/peerpb"
)

// Reconnect makes the connection to peerAddr, if the Pool has one, dial
// again now rather than at the end of its reconnect backoff. While a peer
// is down its connection keeps redialling, waiting up to 2 s between
// refused dials, and a call made meanwhile fails at once with the last
// dial's error even after the peer is back. The cluster calls Reconnect
// for a member that gossip holds alive again, so forwards and handoffs to
// it do not fail for the rest of that wait.
func (p *Pool) Reconnect(peerAddr string) {
	p.mu.Lock()
	pr := p.peers[peerAddr]
	p.mu.Unlock()
	if pr != nil {
		pr.conn.ResetConnectBackoff()
	}
}

// redialWait bounds how long a handoff that failed as unreachable waits
// for the dial it then makes: a peer that is up again answers a dial on
// its network within milliseconds.
const redialWait = 500 * time.Millisecond

// handoffAgain sends req once more after a handoff call failed with err as
// unreachable, which a connection still waiting out its backoff reports
// without dialling: it dials now and waits for the connection, within ctx
// and redialWait. It returns nil when the second call succeeded and err
// otherwise, which says why the peer was unreachable better than a
// deadline would. Sending a chunk twice is safe: a receiver keeps the
// fewer tokens of two copies of a bucket, the larger of two holdings, and
// a lease by its id.
func (pr *peer) handoffAgain(ctx context.Context, req *peerpb.HandoffRequest, err error) error {
	if status.Code(err) != codes.Unavailable {
		return err
	}
	pr.conn.ResetConnectBackoff()
	rctx, cancel := context.WithTimeout(ctx, redialWait)
	defer cancel()
	if _, again := pr.client.Handoff(rctx, req, grpc.WaitForReady(true)); again != nil {
		return err
	}
	return nil
}
