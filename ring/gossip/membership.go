package gossip

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/weir-rl/weir/ring"
)

// Errors returned by Membership's lifecycle methods.
var (
	ErrStarted    = errors.New("gossip: already started")
	ErrNotStarted = errors.New("gossip: not started")
	ErrClosed     = errors.New("gossip: closed")
	// ErrLeaveUnacknowledged wraps Leave's error when the leave broadcast
	// did not finish going out within the timeout: no member took it,
	// because every other member had left or was leaving too (a whole
	// cluster stopped at once) or none could be reached. The member has
	// left all the same; members still running learn it by failure
	// detection instead of the broadcast.
	ErrLeaveUnacknowledged = errors.New("gossip: leave not acknowledged by any member")
)

// maxDebounceFactor bounds how long a stream of events can delay a rebuild:
// at most maxDebounceFactor × RebuildDebounce after the first.
const maxDebounceFactor = 4

// Membership is one member's view of the cluster: memberlist membership,
// the members it has ever seen (until forgotten), and the ownership ring
// (a *ring.View) built from them. New starts nothing; Start runs memberlist
// and three owned goroutines (event loop, rejoin loop and the joins of a
// rejoin round); Close stops them all. All methods are safe for concurrent
// use; View never locks.
type Membership struct {
	cfg     Config
	log     *slog.Logger
	q       *eventQueue
	meta    atomic.Pointer[[]byte]
	view    atomic.Pointer[ring.View]
	changes chan *ring.View
	joined  atomic.Bool
	// logViews is set by Start: the view New publishes (this member
	// alone, before any gossip) is not worth a log line, and a node logs
	// its own first line before it starts.
	logViews  atomic.Bool
	rounds    atomic.Uint64 // completed rejoin rounds (observed by tests)
	joinFail  rateLog       // failed join rounds before the first join, every joinFailLogEvery
	left      atomic.Bool   // Leave was called
	announced atomic.Bool   // AnnounceLeave (or Leave) gossiped the leaving flag

	mu      sync.Mutex // guards tbl, epoch, closed and the changes channel
	tbl     *table
	epoch   uint64
	closed  bool
	kickCh  chan struct{} // one slot: rebuild now (Forget, SetMeta)
	firstCh chan struct{} // closed after the first rejoin round

	life    sync.Mutex // guards ml, started, cancel; held across Leave and Close
	ml      *memberlist.Memberlist
	started bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// New validates cfg and returns a Membership whose view holds only this
// member. It starts no goroutines and opens no sockets.
func New(cfg Config, meta ring.Meta) (*Membership, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := validateMeta(meta); err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg.Join = append([]string(nil), cfg.Join...)
	r := &Membership{
		cfg:      cfg,
		log:      logger.With("component", "gossip", "node", cfg.Name),
		q:        newEventQueue(),
		changes:  make(chan *ring.View, 1),
		tbl:      newTable(cfg.Name, meta, time.Now()),
		kickCh:   make(chan struct{}, 1),
		firstCh:  make(chan struct{}),
		joinFail: rateLog{every: joinFailLogEvery},
	}
	b := appendMeta(nil, meta, 0)
	r.meta.Store(&b)
	r.mu.Lock()
	r.publishLocked()
	r.mu.Unlock()
	return r, nil
}

// Start creates the memberlist, then starts the event loop and the rejoin
// loop, whose first round joins the seeds at once. It returns when that
// first round has finished or ctx is done, whichever is first; reaching no
// seed is not an error (the loop keeps trying; see Joined). ctx bounds only
// this wait; Close stops the goroutines.
func (r *Membership) Start(ctx context.Context) error {
	r.life.Lock()
	if r.started {
		r.life.Unlock()
		return ErrStarted
	}
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		r.life.Unlock()
		return ErrClosed
	}
	r.logViews.Store(true)
	mc := r.cfg.memberlistConfig()
	mc.Delegate = delegate{q: r.q, meta: &r.meta}
	mc.Events = delegate{q: r.q, meta: &r.meta}
	mc.Logger = log.New(logWriter{l: r.log, onDecrypt: r.cfg.OnDecryptFailure, dec: &rateLog{every: decryptLogEvery}}, "", 0)
	ml, err := memberlist.Create(mc)
	if err != nil {
		r.life.Unlock()
		return fmt.Errorf("gossip: start memberlist: %w", err)
	}
	// Create announced this node through NotifyJoin: apply it now, so the
	// first rejoin round knows its own address and never joins itself.
	r.mu.Lock()
	for _, ev := range r.q.drain() {
		r.tbl.apply(ev, time.Now())
	}
	r.publishLocked()
	r.mu.Unlock()
	if len(r.cfg.Join) == 0 {
		r.joined.Store(true)
	}
	loopCtx, cancel := context.WithCancel(context.Background())
	r.ml, r.started, r.cancel = ml, true, cancel
	r.wg.Add(2)
	go r.eventLoop(loopCtx)
	go r.rejoinLoop(loopCtx, ml)
	// Read while r.life is held: memberlist rewrites its own node's record
	// only in UpdateNode (AnnounceLeave, SetMeta), which take r.life too.
	addr := ml.LocalNode().Address()
	r.life.Unlock()
	r.log.Info("gossip: started", "addr", addr, "seeds", r.cfg.Join)
	select {
	case <-r.firstCh:
	case <-ctx.Done():
	}
	return nil
}

// Leave broadcasts that this member leaves the cluster and waits up to
// timeout for the broadcast to go out. Peers forget a member that left at
// once and stop contacting it. The Membership keeps running until Close, but
// stops rejoining and gossiping metadata. When the broadcast does not go out
// in time the error wraps ErrLeaveUnacknowledged.
func (r *Membership) Leave(timeout time.Duration) error {
	r.life.Lock()
	defer r.life.Unlock()
	if err := r.runningLocked(); err != nil || r.left.Load() {
		return err
	}
	r.left.Store(true)
	// Announce the leave in metadata first, unless AnnounceLeave did, and
	// wait for that broadcast to be sent (a later dead message about us
	// would cancel it); then memberlist's leave. See metaLeaving.
	start := time.Now()
	if !r.announced.Load() {
		r.announceLocked(timeout)
	}
	err := r.ml.Leave(max(timeout-time.Since(start), time.Millisecond))
	r.mu.Lock()
	if r.tbl.selfLeft(time.Now()) {
		r.publishLocked()
	}
	r.mu.Unlock()
	if err != nil {
		// memberlist's Leave fails only by timing out on the broadcast.
		return fmt.Errorf("%w: %w", ErrLeaveUnacknowledged, err)
	}
	return nil
}

// AnnounceLeave gossips that this member is about to leave, without
// leaving: peers' views mark it Leaving (a new view, so they know keys'
// state is about to move) while it still owns its keys and hands them
// over. It waits up to timeout for the broadcast to go out. Leave follows;
// the flag stays set until then. Calling it again, or after Leave, does
// nothing.
func (r *Membership) AnnounceLeave(timeout time.Duration) error {
	r.life.Lock()
	defer r.life.Unlock()
	if err := r.runningLocked(); err != nil || r.left.Load() || r.announced.Load() {
		return err
	}
	r.announceLocked(timeout)
	return nil
}

// runningLocked returns ErrNotStarted or ErrClosed when the Membership
// cannot gossip. r.life is held.
func (r *Membership) runningLocked() error {
	switch {
	case !r.started:
		return ErrNotStarted
	case r.ml == nil:
		return ErrClosed
	}
	return nil
}

// announceLocked gossips this member's metadata with the leaving flag,
// sends every other member the leaving note, and waits up to timeout for
// the broadcast and the notes to be sent. r.life is held.
func (r *Membership) announceLocked(timeout time.Duration) {
	r.announced.Store(true)
	r.mu.Lock()
	b := appendMeta(nil, r.tbl.members[r.cfg.Name].m.Meta, metaLeaving)
	r.mu.Unlock()
	r.meta.Store(&b)
	deadline := time.Now().Add(timeout)
	wait := r.sendLeavingNotes()
	if err := r.ml.UpdateNode(timeout); err != nil {
		r.log.Warn("gossip: leave announcement not confirmed", "err", err)
	}
	wait(deadline)
}

// Close stops memberlist (without a leave broadcast: call Leave first for a
// graceful exit) and every goroutine of the Membership, then closes the
// Changes channel. View keeps returning the last view. Close is idempotent.
// With memberlist's own transport, Close can wait up to Timing.TCPTimeout
// for a join or a leaving note in flight to a silent address (a dial
// cannot be cancelled there). A Membership cannot be restarted.
func (r *Membership) Close() error {
	r.life.Lock()
	defer r.life.Unlock()
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	var err error
	if r.ml != nil {
		r.cancel()
		err = r.ml.Shutdown()
		r.ml = nil
	}
	r.wg.Wait()
	r.mu.Lock()
	close(r.changes)
	r.mu.Unlock()
	if err != nil {
		return fmt.Errorf("gossip: close: %w", err)
	}
	return nil
}

// View returns the current view. It never locks and never returns nil.
func (r *Membership) View() *ring.View { return r.view.Load() }

// Changes returns a channel that receives each new view. It holds one view:
// if the reader falls behind, the latest view replaces the unread one, so
// the membership never blocks. It is closed by Close.
func (r *Membership) Changes() <-chan *ring.View { return r.changes }

// Joined reports whether this member has reached the cluster: a Join to a
// seed succeeded, another member is live, or there are no seeds (other than
// itself) to reach.
func (r *Membership) Joined() bool { return r.joined.Load() }

// SetMeta replaces this member's metadata and gossips it (the view changes
// at once; peers see it within a few gossip rounds). Metadata that does not
// fit memberlist's limit is logged and ignored. After Leave or Close it only
// changes the local view.
func (r *Membership) SetMeta(m ring.Meta) {
	if err := validateMeta(m); err != nil {
		r.log.Error("gossip: SetMeta ignored", "err", err)
		return
	}
	r.mu.Lock()
	if r.tbl.setSelfMeta(m) {
		r.publishLocked()
	}
	r.mu.Unlock()

	r.life.Lock()
	defer r.life.Unlock()
	if r.left.Load() || r.announced.Load() {
		return // keep gossiping the leave flag
	}
	b := appendMeta(nil, m, 0)
	r.meta.Store(&b)
	if r.ml == nil {
		return
	}
	// UpdateNode queues the alive broadcast and would wait for it to be
	// sent; gossip carries it without our waiting, so the wait is minimal.
	if err := r.ml.UpdateNode(time.Millisecond); err != nil {
		r.log.Debug("gossip: meta broadcast queued", "err", err)
	}
}

// Forget removes a failed member at once (an operator's `weir forget
// NAME`): it leaves the ring and the majority count and is no longer
// rejoined. It returns false for an unknown or live member, or self.
func (r *Membership) Forget(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.tbl.forget(name) {
		return false
	}
	r.log.Info("gossip: forgot member", "member", name)
	r.publishLocked()
	return true
}

// publishLocked builds and publishes a view if the member list changed.
// r.mu must be held.
func (r *Membership) publishLocked() {
	if r.closed {
		return
	}
	ms := r.tbl.list()
	if old := r.view.Load(); old != nil && sameMembers(old.Members, ms) {
		return
	}
	r.epoch++
	v := ring.NewView(r.epoch, r.cfg.Name, ms)
	r.view.Store(v)
	if v.Live > 1 {
		r.joined.Store(true)
	}
	select {
	case r.changes <- v:
	default:
		select { // replace the unread view with the latest one
		case <-r.changes:
		default:
		}
		r.changes <- v // the single publisher holds r.mu: the slot is free
	}
	if r.logViews.Load() {
		r.log.Info("gossip: view", "epoch", v.Epoch, "known", len(v.Members), "live", v.Live, "majority", v.Majority)
	}
}

// eventLoop applies memberlist events, expires failed members (checked
// every ProbeInterval), and rebuilds the view after a debounce.
func (r *Membership) eventLoop(ctx context.Context) {
	defer r.wg.Done()
	tick := time.NewTicker(r.cfg.Timing.ProbeInterval)
	defer tick.Stop()
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	defer debounce.Stop()
	var pending bool
	var first time.Time
	schedule := func(now time.Time) {
		if !pending {
			pending, first = true, now
		}
		d := min(r.cfg.RebuildDebounce, first.Add(maxDebounceFactor*r.cfg.RebuildDebounce).Sub(now))
		debounce.Reset(max(d, 0))
	}
	apply := func(now time.Time) bool {
		changed := false
		for _, ev := range r.q.drain() {
			changed = r.tbl.apply(ev, now) || changed
		}
		return changed
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.q.ready:
			now := time.Now()
			r.mu.Lock()
			changed := apply(now)
			r.mu.Unlock()
			if changed {
				schedule(now)
			}
		case <-tick.C:
			now := time.Now()
			r.mu.Lock()
			changed := apply(now)
			changed = r.tbl.expire(now, r.cfg.ForgetAfter) || changed
			r.mu.Unlock()
			if changed {
				schedule(now)
			}
		case <-debounce.C:
			pending = false
			r.mu.Lock()
			r.publishLocked()
			r.mu.Unlock()
		}
	}
}
