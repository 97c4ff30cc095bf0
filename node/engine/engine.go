package engine

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-rl/weir/allot"
	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/internal/dedup"
	"github.com/weir-rl/weir/lease"
	"github.com/weir-rl/weir/node/limits"
)

// Config bounds what one engine holds. The zero value of TakeDedup means
// its default; every other field is required (node.Config fills them).
type Config struct {
	// Name names this node in evidence; a random boot nonce is added, so
	// bucket instances never repeat across restarts.
	Name string
	// Store bounds the owner's live buckets (docs/architecture.md §8.3).
	Store bucket.Config
	// FallbackStore bounds the buckets of local ceilings.
	FallbackStore bucket.Config
	// Leases bounds the lease tables (the owner's and the local
	// ceilings').
	Leases lease.Config
	// MaxKeyBytes is the longest key a caller may send, in bytes: the one
	// bound every surface applies, forwards included. At least 1.
	MaxKeyBytes int
	// TakeDedup bounds the owner's memory of takes' request ids; the zero
	// value means dedup.DefaultConfig().
	TakeDedup dedup.Config
	// SweepInterval is how often Run evicts idle, fully refilled buckets
	// and forgets request ids whose window ended. 0 disables the sweep.
	SweepInterval time.Duration
	// MaxHoldings bounds the allotments this node records as an owner
	// (one per holder and key); past it, asks are refused as overloaded.
	// Zero means 100,000.
	MaxHoldings int
}

// Validate reports a bad bound. It changes nothing.
func (c Config) Validate() error {
	var errs []error
	if err := c.Store.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.FallbackStore.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Leases.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.TakeDedup != (dedup.Config{}) {
		if err := c.TakeDedup.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.MaxKeyBytes < 1 {
		errs = append(errs, errors.New("engine: MaxKeyBytes must be at least 1"))
	}
	if c.SweepInterval < 0 {
		errs = append(errs, errors.New("engine: SweepInterval must not be negative"))
	}
	return errors.Join(errs...)
}

// Deps are what an engine is handed: the limits in force, the clock, the
// metrics registry and the cluster's parts. All are required; a cluster of
// one passes SingleNode, NoPeers and NoChanges.
type Deps struct {
	// Limits returns the limits in force (the limits file and any envoy
	// rules' limits), read once per request.
	Limits func() *limits.File
	// Clock returns the time decisions are made at.
	Clock func() time.Time
	// Registry receives the engine's metrics.
	Registry prometheus.Registerer
	// Router says where keys are decided.
	Router Router
	// Peers forwards steps to owners elsewhere.
	Peers Peers
	// Changes is told of every owner bucket and lease key that changed.
	Changes Changes
}

// Engine is the decision engine: the one place that decides "here, forward
// or fallback" for every take and every lease operation, and the owner of
// the state it decides from. It is safe for concurrent use: the stores lock
// their own shards and each lease table serializes itself.
type Engine struct {
	now     func() time.Time
	limits  func() *limits.File
	router  Router
	peers   Peers
	changes Changes
	store   *bucket.Store // buckets this node owns
	// held is store.Has, made once: a method value made per take would
	// allocate on the decision path.
	held     func(limit, key string) bool
	fallback *bucket.Store // local ceilings for keys whose owner is unreachable
	leases   *leases       // the owner lease table
	// fallbackLeases holds permits granted from local ceilings while a
	// key's owner is unreachable.
	fallbackLeases *leases
	m              *metrics
	// ledger is the owner's record of the allotments it granted; purses
	// are this node's allotments as a holder, asks the asks waiting for
	// allotDriver. holder names this node as a holder.
	ledger ledger
	purses *purses
	asks   chan ask
	holder string
	om     *ownerMetrics
	hm     *holderMetrics
	// allotSeq numbers the holdings this node records (allot.Holding.Seq),
	// from a random start so a restarted or new owner does not reuse them.
	allotSeq atomic.Uint64
	hot      *hotKeys    // cost asked per (limit, key), counted where requests arrive
	counters hotCounters // m's take-path children, per limit
	dedup    *takeDedup  // recent request ids
	inline   inlineCache // validated inline limits (see resolve)
	maxKey   int
	sweep    time.Duration
	// caps are the stores' MaxBuckets, for the sweep.
	capOwner, capFallback int
	// run names this node run in evidence: the node's name and a random
	// boot nonce.
	run string
}

// New builds an engine. It starts no goroutine; Run drives lease expiry
// and the sweep.
func New(cfg Config, deps Deps) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxHoldings <= 0 {
		cfg.MaxHoldings = 100_000
	}
	e := &Engine{
		now: deps.Clock, limits: deps.Limits, router: deps.Router, peers: deps.Peers, changes: deps.Changes,
		store: bucket.NewStore(cfg.Store), fallback: bucket.NewStore(cfg.FallbackStore),
		hot: newHotKeys(), maxKey: cfg.MaxKeyBytes, sweep: cfg.SweepInterval,
		purses: newPurses(), asks: make(chan ask, 1024), holder: cfg.Name,
		capOwner: cfg.Store.MaxBuckets, capFallback: cfg.FallbackStore.MaxBuckets,
		run: cfg.Name + "/" + strconv.FormatUint(rand.Uint64()&0xffffff, 16),
	}
	e.held = e.store.Has
	e.m = newMetrics(deps.Registry, gauges{
		owner:      func() float64 { return float64(e.store.Len()) },
		fallback:   func() float64 { return float64(e.fallback.Len()) },
		evictions:  func() float64 { return float64(e.store.Evictions() + e.fallback.Evictions()) },
		leasesHeld: func() float64 { return float64(e.leases.held()) },
	})
	e.m.bucketsMax.Set(float64(cfg.Store.MaxBuckets))
	e.ledger.l = allot.NewLedger(cfg.MaxHoldings)
	e.ledger.initUnlocks()
	e.allotSeq.Store(rand.Uint64())
	e.om = newOwnerMetrics(deps.Registry, &e.ledger)
	e.hm = newHolderMetrics(deps.Registry)
	e.counters = hotCounters{m: e.m, current: deps.Limits}
	// Seed fencing from the wall clock so a restarted owner, which lost its
	// counter, still issues tokens above those it issued before (lease doc).
	lc := cfg.Leases
	lc.FirstFencing = max(lc.FirstFencing, uint64(time.Now().UnixMicro()))
	var err error
	if e.leases, err = newLeases(lc, deps.Clock, e.m, deps.Changes); err != nil {
		return nil, err
	}
	// Permits granted from a local ceiling are not replicated.
	if e.fallbackLeases, err = newLeases(lc, deps.Clock, e.m, NoChanges{}); err != nil {
		return nil, err
	}
	dc := cfg.TakeDedup
	if dc == (dedup.Config{}) {
		dc = dedup.DefaultConfig()
	}
	e.dedup = newTakeDedup(dc, e.run, deps.Registry)
	return e, nil
}

// Run drives the lease tables' expiry and, every SweepInterval, evicts
// idle, fully refilled buckets and forgets expired request ids, so memory
// follows the live key set and the recent takes. It returns when ctx ends.
func (e *Engine) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { e.leases.run(ctx) })
	wg.Go(func() { e.fallbackLeases.run(ctx) })
	wg.Go(func() { e.allotDriver(ctx) })
	if e.sweep > 0 {
		wg.Go(func() { e.sweepEvery(ctx) })
	}
	wg.Wait()
}

func (e *Engine) sweepEvery(ctx context.Context) {
	t := time.NewTicker(e.sweep)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			now := e.now()
			e.store.SweepAt(now, e.capOwner)
			e.fallback.SweepAt(now, e.capFallback)
			e.dedup.expire(now)
		}
	}
}

// Drain answers every parked acquire with a refusal and parks nobody
// after, so a graceful shutdown is not held up by queued acquires.
func (e *Engine) Drain() {
	e.leases.drain()
	e.fallbackLeases.drain()
}

// Limits returns the limits in force.
func (e *Engine) Limits() *limits.File { return e.limits() }
