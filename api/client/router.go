package client

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/api/weirv1"
	"github.com/weir-rl/weir/ring/ownership"
)

// downFor is how long a member whose connection failed is skipped when
// routing (requests go to another member, which forwards), whether or not
// a newer ring lists it: gossip may hold alive a member this client cannot
// reach. Only the member's own answer to a ring fetch lifts it early.
const downFor = time.Second

// retireAfter is how long the connection of a member that left the ring is
// kept, so that requests in flight on it can finish.
const retireAfter = 5 * time.Second

// member is one node the client talks to: one connection, one shared
// TakeStream opened on first use, and, when the member advertises a RESP
// endpoint the client may use, a pool of lean connections for its takes.
type member struct {
	name      string
	addr      string
	respAddr  string           // the advertised RESP address, "" for none
	lean      *leanPool        // nil: takes over gRPC
	seed      bool             // made by fetchFrom and not yet published (guarded by router.mu)
	conn      *grpc.ClientConn // nil for New's caller-owned connection
	rpc       weirv1.LimiterClient
	useStream bool
	seen      atomic.Uint64 // the highest ring epoch it answered with
	downUntil atomic.Int64  // Unix ns before which routing skips it

	smu    sync.Mutex // guards stream
	stream *takeStream
}

// healthy reports whether routing may send to m at now.
func (m *member) healthy(now time.Time) bool {
	if now.UnixNano() < m.downUntil.Load() {
		return false
	}
	if m.conn == nil {
		return true
	}
	s := m.conn.GetState()
	return s != connectivity.TransientFailure && s != connectivity.Shutdown
}

// memberSet is an immutable set of members, published whole.
type memberSet struct {
	byName map[string]*member
	list   []*member
}

// router sends each request to a member: the owner of its keys when the
// client holds a ring, else any member. It owns the member connections,
// their streams and the refresher goroutine (Dial); Close stops them.
type router struct {
	opts   Options
	static bool // New/NewWith: one caller-owned member, no ring
	seeds  []string
	dial   []grpc.DialOption

	ctx    context.Context // the client's lifetime: streams and refreshes
	cancel context.CancelFunc
	wg     sync.WaitGroup

	view    atomic.Pointer[ringView] // nil for a static router
	members atomic.Pointer[memberSet]
	rr      atomic.Uint64 // round robin over members

	stats routerStats

	kick     chan struct{} // one slot: refresh soon
	kickFrom atomic.Pointer[member]
	idPrefix uint64
	idSeq    atomic.Uint64

	mu      sync.Mutex         // guards the fields below
	conns   map[string]*member // by address
	retired []retired
	budget  retryBudget
	closed  bool
}

// routerStats count what the router did, for Client.Stats.
type routerStats struct {
	takes, retries, budgetRefused, refreshes, failures, lean atomic.Uint64
}

type retired struct {
	m  *member
	at time.Time
}

func newRouter(opts Options) *router {
	r := &router{opts: opts, kick: make(chan struct{}, 1), conns: map[string]*member{}, budget: newRetryBudget(opts.Retry), idPrefix: rand.Uint64()}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r
}

// newID returns a fresh request id: the client's random prefix and a
// counter, 16 bytes.
func (r *router) newID() []byte {
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b, r.idPrefix)
	binary.BigEndian.PutUint64(b[8:], r.idSeq.Add(1))
	return b
}

// oneOwner reports whether every check surely has the same owner: they
// share a ring hash (ownership.KeySum; every ring places equal hashes on
// one owner), or the ring names one owner for all of them. Only such a
// take is deduplicated by its owner, so only such a take is retried after
// an ambiguous failure. It hashes each check once and allocates nothing.
func oneOwner(v *ringView, checks []api.Check) (string, bool) {
	if len(checks) == 0 {
		return "", false
	}
	first := ownership.KeySum(checks[0].Limit, checks[0].Key)
	owner, ok := "", v != nil
	if ok {
		owner, ok = v.table.OwnerSum(first)
	}
	same := true
	for _, ch := range checks[1:] {
		h := ownership.KeySum(ch.Limit, ch.Key)
		same = same && h == first
		if ok {
			if o, _ := v.table.OwnerSum(h); o != owner {
				ok = false
			}
		}
	}
	return owner, same || ok
}

// pick chooses where to send checks: their owner when they have one and it
// is healthy (toOwner), else any healthy member not in avoid (the members
// that failed this call's earlier attempts). single reports whether all
// checks surely share one owner (see oneOwner).
func (r *router) pick(checks []api.Check, avoid ...*member) (m *member, single, toOwner bool) {
	set := r.members.Load()
	owner, single := oneOwner(r.view.Load(), checks)
	now := r.opts.Clock.Now()
	if owner != "" && single {
		if m := set.byName[owner]; m != nil && !slices.Contains(avoid, m) && m.healthy(now) {
			return m, single, true
		}
	}
	return r.any(set, avoid, now), single, false
}

// any returns a healthy member not in avoid, round robin; failing that any
// member not in avoid (one that failed another call, not this one);
// failing that any member.
func (r *router) any(set *memberSet, avoid []*member, now time.Time) *member {
	n := len(set.list)
	start := int(r.rr.Add(1) % uint64(n))
	var fallback *member
	for i := range n {
		m := set.list[(start+i)%n]
		if slices.Contains(avoid, m) {
			continue
		}
		if m.healthy(now) {
			return m
		}
		if fallback == nil {
			fallback = m
		}
	}
	if fallback != nil {
		return fallback
	}
	return set.list[start]
}

// take runs one take with retries (see RetryPolicy and retryable).
func (r *router) take(ctx context.Context, checks []api.Check) (api.TakeResponse, error) {
	var pc []*weirv1.Check // the checks for gRPC, made on first use
	rid := r.newID()
	r.stats.takes.Add(1)
	r.mu.Lock()
	r.budget.requestAt(r.opts.Clock.Now())
	r.mu.Unlock()
	// The members whose transport failed an attempt of this take: the
	// retries skip them all while any other is left.
	var avoidBuf [4]*member
	avoid := avoidBuf[:0]
	for attempt := 0; ; attempt++ {
		m, single, toOwner := r.pick(checks, avoid...)
		resp, transportErr, err := m.take(ctx, r, checks, &pc, rid)
		if err == nil {
			r.observe(m, resp.RingEpoch, toOwner && resp.Forwarded)
			return resp, nil
		}
		if !retryable(ctx, err) {
			return api.TakeResponse{}, fromStatus(ctx, "take", err)
		}
		if r.ctx.Err() != nil {
			return api.TakeResponse{}, fmt.Errorf("client: take: %w", errClosed)
		}
		if transportErr {
			r.failed(m)
		}
		if !single || attempt+1 >= r.opts.Retry.MaxAttempts {
			return api.TakeResponse{}, fromStatus(ctx, "take", err)
		}
		if !r.allowRetry() {
			r.stats.budgetRefused.Add(1)
			return api.TakeResponse{}, fromStatus(ctx, "take", err)
		}
		r.stats.retries.Add(1)
		d := backoff(attempt, r.opts.Retry.BaseBackoff, r.opts.Retry.MaxBackoff, r.opts.Rand())
		if err := r.opts.Clock.Sleep(ctx, d); err != nil {
			return api.TakeResponse{}, fromStatus(ctx, "take", err)
		}
		if transportErr {
			avoid = append(avoid, m)
		}
	}
}

// allowRetry spends one retry of the budget, or reports that none is left.
func (r *router) allowRetry() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.budget.retryAt(r.opts.Clock.Now())
}

// take sends one attempt to m: over a lean connection when m has them and
// the take may use one (leanable), else on m's shared stream when the
// connection is ready, else as a unary call (which waits for the
// connection under ctx). pc holds the checks converted for gRPC, made on
// first use. transportErr reports a failure of the member rather than an
// answer of the service.
func (m *member) take(ctx context.Context, r *router, checks []api.Check, pc *[]*weirv1.Check, rid []byte) (resp api.TakeResponse, transportErr bool, err error) {
	if m.lean != nil && leanable(checks) {
		if c := m.lean.get(ctx); c != nil {
			r.stats.lean.Add(1)
			resp, err = c.take(ctx, rid, checks)
			return resp, errors.Is(err, errConnBroken), err
		}
	}
	if *pc == nil {
		*pc = make([]*weirv1.Check, len(checks))
		for i, ch := range checks {
			(*pc)[i] = &weirv1.Check{Limit: ch.Limit, Key: ch.Key, Cost: ch.Cost, Inline: inlineToProto(ch.Inline)}
		}
	}
	var presp *weirv1.TakeResponse
	if s := m.readyStream(r); s != nil {
		presp, err = s.take(ctx, *pc, rid)
		if !errors.Is(err, errStreamFull) {
			if err != nil {
				return api.TakeResponse{}, errors.Is(err, errStreamBroken), err
			}
			return takeFromProto(presp), false, nil
		}
	}
	presp, err = m.rpc.Take(ctx, &weirv1.TakeRequest{Checks: *pc, RequestId: rid})
	if err != nil {
		return api.TakeResponse{}, true, err
	}
	return takeFromProto(presp), false, nil
}

// readyStream returns m's TakeStream, opening it if the connection is
// ready; nil means use a unary call.
func (m *member) readyStream(r *router) *takeStream {
	if !m.useStream {
		return nil
	}
	m.smu.Lock()
	defer m.smu.Unlock()
	if m.stream != nil && !m.stream.broken() {
		return m.stream
	}
	m.stream = nil
	if m.conn.GetState() != connectivity.Ready {
		m.conn.Connect()
		return nil
	}
	s, err := openTakeStream(r.ctx, m.rpc, r.opts.StreamInFlight, &r.wg)
	if err != nil {
		return nil
	}
	m.stream = s
	return s
}

// observe notes the ring epoch an answer of m carried and asks for a
// refresh when m's view moved on since its last answer, or when stale is
// set: m had to forward a request the client sent it as the owner.
func (r *router) observe(m *member, epoch uint64, stale bool) {
	if r.static {
		return
	}
	moved := false
	for {
		prev := m.seen.Load()
		if epoch <= prev {
			break
		}
		if m.seen.CompareAndSwap(prev, epoch) {
			moved = prev != 0
			break
		}
	}
	if moved || stale {
		r.askRefresh(m)
	}
}

// failed marks m down for a while and asks for a refresh from another
// member.
func (r *router) failed(m *member) {
	r.stats.failures.Add(1)
	m.downUntil.Store(r.opts.Clock.Now().Add(downFor).UnixNano())
	if !r.static {
		r.opts.Logger.Debug("client: member failed", "member", m.name, "addr", m.addr)
		r.askRefresh(nil)
	}
}

// askRefresh wakes the refresher; from, when set, is the member whose view
// is newest.
func (r *router) askRefresh(from *member) {
	if from != nil {
		r.kickFrom.Store(from)
	}
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// pickFor returns the member for a lease operation on (limit, key), and
// whether it is the key's owner.
func (r *router) pickFor(limit, key string) (*member, bool) {
	m, _, toOwner := r.pick([]api.Check{{Limit: limit, Key: key}})
	return m, toOwner
}

// inlineToProto converts a check's inline limit; nil stays nil.
func inlineToProto(in *api.InlineLimit) *weirv1.InlineLimit {
	if in == nil {
		return nil
	}
	return &weirv1.InlineLimit{Algorithm: in.Algorithm, Capacity: in.Capacity, Burst: in.Burst, Limit: in.Limit, Rate: in.Rate, Window: in.Window}
}

// takeFromProto converts a TakeResponse.
func takeFromProto(resp *weirv1.TakeResponse) api.TakeResponse {
	out := api.TakeResponse{
		Allowed:      resp.GetAllowed(),
		RetryAfter:   api.MillisDuration(resp.GetRetryAfterMs()),
		RulesVersion: resp.GetRulesVersion(),
		Results:      make([]api.Result, len(resp.GetResults())),
		RingEpoch:    resp.GetRingEpoch(),
		Forwarded:    resp.GetForwarded(),
	}
	for i, r := range resp.GetResults() {
		out.Results[i] = api.Result{
			Limit:      r.GetLimit(),
			Allowed:    r.GetAllowed(),
			Remaining:  r.GetRemaining(),
			Capacity:   r.GetCapacity(),
			RetryAfter: api.MillisDuration(r.GetRetryAfterMs()),
			ResetAfter: api.MillisDuration(r.GetResetAfterMs()),
			Source:     fromSource(r.GetSource()),
			Window:     api.MillisDuration(r.GetWindowMs()),
		}
	}
	return out
}
