package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/transport/peerpb"
)

// Connection tuning shared by Pool and Server. The client pings an idle
// connection every 10s and drops it after 3s without an answer; the server
// permits pings every 5s, so it never sends the client "too many pings".
// The server pings a connection it has read nothing from for 1s (gRPC's
// least) and drops it after 3s without an answer: a peer whose host is
// gone never closes its connections, and the server's graceful stop waits
// for every open one (Server.GracefulStop). gRPC also makes each side's
// timeout its socket's TCP_USER_TIMEOUT (unacknowledged data drops the
// connection after 3s; gRPC's default on the server was 20s). Reconnect
// backoff is capped at 2s (gRPC's default is 120s), so a peer that
// restarts is reachable again within seconds. memberlist, not these pings,
// decides that a peer is dead.
const (
	clientPingEvery   = 10 * time.Second
	clientPingTimeout = 3 * time.Second
	serverPingMin     = 5 * time.Second
	serverPingEvery   = time.Second
	serverPingTimeout = 3 * time.Second
	minConnectTimeout = 2 * time.Second
	maxReconnectDelay = 2 * time.Second
)

// handoffChunk is the number of entries per Handoff RPC, which keeps each
// message well under gRPC's default 4 MiB limit (keys are at most 512 bytes).
const handoffChunk = 1024

// Pool forwards requests to peers: one gRPC client connection and one
// batcher per peer address, created on first use. It is safe for concurrent
// use. The zero Pool is not usable; use NewPool. A Pool starts goroutines
// only while forwards are in flight or a batch window is open, and Close
// waits for them.
type Pool struct {
	cfg     Config
	creds   credentials.TransportCredentials
	linkTLS *tls.Config // the replica link's; nil in plaintext

	// protocol is the version every message is sent in (SetProtocol).
	protocol *atomic.Uint32

	mu     sync.Mutex // guards peers and closed
	peers  map[string]*peer
	closed bool
}

// SetProtocol sets the peer protocol version of the messages sent from now
// on: the cluster's version, the highest every live member speaks. A
// version this build does not speak (0 when members have none in common)
// is clamped into MinVersion..MaxVersion: a receiver that cannot read it
// refuses the call, saying why.
func (p *Pool) SetProtocol(v Version) { p.protocol.Store(min(max(v, MinVersion), MaxVersion)) }

// Protocol returns the version messages are sent in.
func (p *Pool) Protocol() Version { return p.protocol.Load() }

// NewPool returns a Pool with cfg. It panics if cfg.Validate fails: the
// node validates its configuration at start, so an invalid one here is a
// programming error.
func NewPool(cfg Config) *Pool {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	creds := insecure.NewCredentials()
	var linkTLS *tls.Config
	if cfg.Credentials != nil {
		creds = credentials.NewTLS(cfg.Credentials.ClientConfig())
		linkTLS = cfg.Credentials.ClientConfig()
	}
	p := &Pool{cfg: cfg, creds: creds, linkTLS: linkTLS, protocol: new(atomic.Uint32), peers: make(map[string]*peer)}
	p.protocol.Store(MinVersion)
	return p
}

// Do sends req to the peer at peerAddr and returns that peer's Reply. The
// request goes out at once when nothing is in flight to that peer, and
// otherwise joins its next batch (see Batcher); one with Wait > 0, which
// the owner may hold while it queues, is always sent alone.
//
// Do returns within the forward deadline: ctx's deadline when it has one
// (at most a minute, plus req.Wait, from the call), Config.Deadline
// (+ req.Wait) from the call when it has none, and in either case no later
// than a Deadline req already carries (a request passed on). A forward
// waits for its owner as long as its caller does. The request carries its
// deadline to the owner, which refuses it once that has passed
// (Reply.Expired).
//
// An error means the owner did not answer: one wrapping ErrDeadline (or
// the caller's context.Canceled) means the deadline passed before a reply
// came, which is no sign that the owner is down; any other (connection
// refused, Unauthenticated, ...; status.Code reports the gRPC code) means
// it was not reached. A semantic error of the owner is in Reply.ErrCode
// instead. ErrInvalidOp, ErrClosed and ErrDropped are returned as
// themselves.
func (p *Pool) Do(ctx context.Context, peerAddr string, req Request) (Reply, error) {
	if !req.Op.Valid() {
		return Reply{}, ErrInvalidOp
	}
	start := time.Now()
	wait := min(max(req.Wait, 0), api.MaxLeaseWait) // no overflow whatever a caller sent
	deadline := start.Add(p.cfg.Deadline + wait)
	if d, ok := ctx.Deadline(); ok {
		deadline = start.Add(maxDeadline + wait)
		if d.Before(deadline) {
			deadline = d
		}
	}
	if !req.Deadline.IsZero() && req.Deadline.Before(deadline) {
		deadline = req.Deadline
	}
	req.Deadline = deadline
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()

	pr, err := p.peer(peerAddr)
	if err != nil {
		return Reply{}, err
	}
	c := &call{req: req, ctx: ctx, deadline: deadline, done: make(chan outcome, 1)}
	if err := pr.enqueue(c, start); err != nil {
		return Reply{}, err
	}
	var o outcome
	select {
	case o = <-c.done:
	case <-ctx.Done():
		err := ctx.Err()
		if errors.Is(err, context.DeadlineExceeded) {
			err = ErrDeadline
		}
		o.err = fmt.Errorf("transport: forward to %s: %w", peerAddr, err)
	}
	if obs := p.cfg.Observer; obs != nil {
		obs.Forwarded(peerAddr, time.Since(start), o.err)
	}
	return o.rep, o.err
}

// Handoff sends st to the peer at peerAddr, in chunks of at most 1024
// buckets and leases per RPC, each bounded by Config.HandoffDeadline and
// ctx. A chunk that fails as unreachable goes once more after a dial made
// then (see Reconnect). It returns the first error; chunks before it were
// stored by the peer.
func (p *Pool) Handoff(ctx context.Context, peerAddr string, st State) error {
	_, err := p.handoff(ctx, peerAddr, false, st, nil)
	return err
}

// Replicate sends the latest state of keys this node owns, and the keys it
// dropped, to the member at peerAddr that keeps their replica: one batch
// (chunked like Handoff) within HandoffDeadline per chunk, on the replica
// link (link.go) when the cluster speaks V3 and as Handoff calls before.
// An empty batch is a heartbeat: it tells the receiver the stream is
// alive. It returns the bytes of the messages sent. An error means a
// chunk was not stored (the chunks before it were).
func (p *Pool) Replicate(ctx context.Context, peerAddr string, st State, dropped []Key) (int, error) {
	return p.handoff(ctx, peerAddr, true, st, dropped)
}

// handoff sends st and dropped keys in Handoff RPCs of at most
// handoffChunk entries and handoffChunk dropped keys each (a replica stream
// sends at least one: a heartbeat) and returns the bytes sent (counted for
// replicas only).
func (p *Pool) handoff(ctx context.Context, peerAddr string, replica bool, st State, dropped []Key) (int, error) {
	pr, err := p.peer(peerAddr)
	if err != nil {
		return 0, err
	}
	what := "handoff"
	if replica {
		what = "replicate"
	}
	version := p.Protocol()
	var packed []bucket.Entry
	if Speaks(version, V2) {
		packed, st.Buckets = splitPackable(st.Buckets)
	}
	entries := encodeState(st)
	sent := 0
	var bp *[]byte // the packing buffer, taken only when there is something to pack
	if len(packed) > 0 {
		bp = packedBufs.Get().(*[]byte)
		defer packedBufs.Put(bp)
	}
	for first := replica; first || len(entries) > 0 || len(dropped) > 0 || len(packed) > 0; first = false {
		chunk := entries[:min(len(entries), handoffChunk)]
		entries = entries[len(chunk):]
		drop := dropped[:min(len(dropped), handoffChunk)]
		dropped = dropped[len(drop):]
		req := &peerpb.HandoffRequest{From: p.cfg.Self, Entries: chunk, Replica: replica, Dropped: encodeKeys(drop), Protocol: version}
		if len(packed) > 0 {
			pk := packed[:min(len(packed), handoffChunk)]
			packed = packed[len(pk):]
			req.Buckets = appendPacked((*bp)[:0], pk)
			if cap(req.Buckets) <= maxPackedBuf { // a resync's long keys are not kept
				*bp = req.Buckets
			}
		}
		cctx, cancel := context.WithTimeout(ctx, p.cfg.HandoffDeadline)
		var n int
		var err error
		if replica && Speaks(version, V3) {
			n, err = pr.link.send(cctx, req)
		} else {
			_, err = pr.client.Handoff(cctx, req)
			if err == nil && replica {
				// gRPC's codec sized req to marshal it: read its cached
				// sizes instead of walking every entry again.
				n = proto.MarshalOptions{UseCachedSize: true}.Size(req)
			}
		}
		if err != nil && !replica {
			// Perhaps a peer back from a failure, its connection still
			// waiting out a backoff. A replica stream sends again at its
			// next interval; a failed handoff leaves the keys' debt here.
			pr, err = p.handoffAgain(cctx, pr, req, err)
		}
		cancel()
		if err != nil {
			return sent, fmt.Errorf("transport: %s to %s: %w", what, peerAddr, err)
		}
		sent += n
	}
	return sent, nil
}

// Drop closes the connection to peerAddr, for a member that left. Forwards
// still queued fail with ErrDropped and those in flight fail at once; the
// next Do to that address opens a new connection. Dropping an unknown
// address does nothing.
func (p *Pool) Drop(peerAddr string) {
	p.mu.Lock()
	pr := p.peers[peerAddr]
	delete(p.peers, peerAddr)
	p.mu.Unlock()
	if pr != nil {
		pr.close(ErrDropped)
	}
}

// Close closes every connection, fails forwards still queued with
// ErrClosed, and waits for the Pool's goroutines to end. Later calls fail
// with ErrClosed. Close is idempotent.
func (p *Pool) Close() error {
	p.mu.Lock()
	peers := p.peers
	p.peers = nil
	p.closed = true
	p.mu.Unlock()
	var errs []error
	for _, pr := range peers {
		errs = append(errs, pr.close(ErrClosed))
	}
	return errors.Join(errs...)
}

// dial opens a connection to addr with Config.Dialer, or over TCP.
func (p *Pool) dial(ctx context.Context, addr string) (net.Conn, error) {
	if p.cfg.Dialer != nil {
		return p.cfg.Dialer(ctx, addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// peer returns the peer for addr, creating it (without dialing) on first use.
func (p *Pool) peer(addr string) (*peer, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if pr := p.peers[addr]; pr != nil {
		return pr, nil
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(p.creds),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time: clientPingEvery, Timeout: clientPingTimeout, PermitWithoutStream: true,
		}),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: maxReconnectDelay},
			MinConnectTimeout: minConnectTimeout,
		}),
	}
	if p.cfg.Dialer != nil {
		opts = append(opts, grpc.WithContextDialer(p.cfg.Dialer))
	}
	// passthrough hands addr to the dialer unresolved, so a simulated
	// network's names work and DNS is the dialer's business.
	conn, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("transport: peer %s: %w", addr, err)
	}
	pr := &peer{
		addr:   addr,
		self:   p.cfg.Self,
		proto:  p.protocol,
		obs:    p.cfg.Observer,
		conn:   conn,
		client: peerpb.NewPeerClient(conn),
		link:   newLink(addr, p.dial, p.linkTLS),
		batch:  NewBatcher[*call](p.cfg.Window, p.cfg.MaxBatch),
	}
	pr.timer = time.AfterFunc(time.Hour, pr.fire)
	pr.timer.Stop()
	p.peers[addr] = pr
	return pr, nil
}

// call is one forward waiting for its reply.
type call struct {
	req      Request
	ctx      context.Context // Do's context; done means the caller gave up
	deadline time.Time       // Do's forward deadline
	done     chan outcome    // buffered 1: the sender never blocks
}

type outcome struct {
	rep Reply
	err error
}

// peer is the shell around one peer's Batcher: it takes the lock, reads
// the clock, arms the timer and sends the batches the Batcher releases. A
// batch released by Add or Tick gets its own goroutine, so a slow batch
// never holds up one whose window has passed; the goroutine then carries on
// with the batches that its completion releases.
type peer struct {
	addr   string
	self   string
	proto  *atomic.Uint32 // the pool's protocol
	obs    Observer
	conn   *grpc.ClientConn
	client peerpb.PeerClient
	link   *link // the replica link (V3), opened on its first batch

	mu       sync.Mutex // guards batch, armed, closeErr and timer resets
	batch    *Batcher[*call]
	timer    *time.Timer // runs fire; armed while a run is pending
	armed    bool
	closeErr error // ErrDropped or ErrClosed once closed; nil while open

	wg sync.WaitGroup // one count per send goroutine and per armed timer
}

// enqueue adds c at time now, sending a batch if that makes one ready.
func (pr *peer) enqueue(c *call, now time.Time) error {
	pr.mu.Lock()
	if err := pr.closeErr; err != nil {
		pr.mu.Unlock()
		return err
	}
	if heldAtOwner(c.req) {
		// Outside the batcher: it may be held at the owner, so it must not
		// count as the in-flight batch that others wait behind.
		pr.wg.Add(1)
		pr.mu.Unlock()
		go func() {
			defer pr.wg.Done()
			pr.send([]*call{c})
		}()
		return nil
	}
	flush, next := pr.batch.Add(c, now)
	if flush == nil && !pr.armed {
		pr.armed = true
		pr.wg.Add(1)
		pr.timer.Reset(next.Sub(now))
	}
	if flush != nil {
		pr.wg.Add(1)
	}
	pr.mu.Unlock()
	if flush != nil {
		go pr.run(flush)
	}
	return nil
}

// heldAtOwner reports a request its owner may hold before it answers: an
// acquire that waits for a permit (Wait), and an allotment grant, which
// the owner answers once the key's successor has stored it (a replication
// round trip). In a batch it would hold the batch's other requests, whose
// replies go together with its own. Measured before allotment asks went
// alone: on Zipf keys at 256 callers, forwarded takes to an owner granting
// allotments reached their 250 ms deadline.
func heldAtOwner(r Request) bool { return r.Wait > 0 || r.Op == OpAllot }

// fire is the timer's function: it sends the open batch if due and re-arms
// the timer while a batch is open. A run that finds nothing due (its batch
// left early, by size or Done) only re-arms.
func (pr *peer) fire() {
	pr.mu.Lock()
	pr.armed = false
	var flush []*call
	if pr.closeErr == nil {
		now := time.Now()
		flush = pr.batch.Tick(now)
		if pr.batch.Len() > 0 {
			pr.armed = true
			pr.wg.Add(1)
			pr.timer.Reset(pr.batch.Next().Sub(now))
		}
		if flush != nil {
			pr.wg.Add(1)
		}
	}
	pr.mu.Unlock()
	if flush != nil {
		pr.run(flush)
	}
	pr.wg.Done()
}

// run sends batch, then tells the batcher it is done and sends whatever
// batch that releases, until none is. It owns one wg count.
func (pr *peer) run(batch []*call) {
	defer pr.wg.Done()
	for batch != nil {
		pr.send(batch)
		pr.mu.Lock()
		batch = nil
		if pr.closeErr == nil {
			batch = pr.batch.Done()
		}
		pr.mu.Unlock()
	}
}

// send performs one Batch RPC for the calls whose callers still wait, with
// the latest of their deadlines, and hands each caller its own reply. A
// call whose deadline has passed by the clock is dropped even before its
// context's timer fires, so a sender that was paused (SIGSTOP, a long GC)
// does not send what its callers were already answered for.
func (pr *peer) send(batch []*call) {
	now := time.Now()
	live := batch[:0]
	var deadline time.Time
	for _, c := range batch {
		if c.ctx.Err() != nil || !now.Before(c.deadline) {
			// The caller gave up or is giving up: do not spend at the owner.
			c.done <- outcome{err: fmt.Errorf("transport: forward to %s: %w", pr.addr, ErrDeadline)}
			continue
		}
		live = append(live, c)
		if c.deadline.After(deadline) {
			deadline = c.deadline
		}
	}
	if len(live) == 0 {
		return
	}
	reqs := make([]Request, len(live))
	for i, c := range live {
		reqs[i] = c.req
	}
	if pr.obs != nil {
		pr.obs.BatchSent(pr.addr, len(live))
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	out, err := pr.client.Batch(ctx, &peerpb.BatchRequest{From: pr.self, Requests: encodeRequests(reqs, time.Now()), Protocol: pr.proto.Load()})
	cancel()
	if err == nil && len(out.GetReplies()) != len(live) {
		err = fmt.Errorf("transport: %d replies to %d requests", len(out.GetReplies()), len(live))
	}
	switch code := status.Code(err); {
	case err == nil:
	case code == codes.DeadlineExceeded || code == codes.Canceled:
		err = fmt.Errorf("transport: forward to %s: %w: %w", pr.addr, ErrDeadline, err)
	default:
		err = fmt.Errorf("transport: forward to %s: %w", pr.addr, err)
	}
	if err != nil {
		for _, c := range live {
			c.done <- outcome{err: err}
		}
		return
	}
	for i, c := range live {
		c.done <- outcome{rep: decodeReply(out.Replies[i])}
	}
}

// close fails the queued calls with err, closes the connection (which
// fails the calls in flight) and waits for the peer's goroutines.
func (pr *peer) close(err error) error {
	pr.mu.Lock()
	if pr.closeErr != nil {
		pr.mu.Unlock()
		return nil
	}
	pr.closeErr = err
	if pr.armed && pr.timer.Stop() {
		pr.armed = false
		pr.wg.Done()
	}
	pending := pr.batch.Drain()
	pr.mu.Unlock()
	for _, c := range pending {
		c.done <- outcome{err: err}
	}
	cerr := pr.conn.Close()
	pr.link.close()
	pr.wg.Wait()
	return cerr
}
