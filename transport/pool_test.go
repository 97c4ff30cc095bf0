package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-rl/weir/api"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/weir-rl/weir/transport/peerpb"
)

// recorder is a Handler that records what it is asked and echoes each
// request back: ErrDetail = LeaseID, Lease.ID = Holder, and one Result per
// check with Remaining = Cost. With block set, Serve first waits for it to
// be closed (ignoring its context, like a stuck owner) and signals entered.
type recorder struct {
	block   chan struct{}
	entered chan struct{} // receives once per blocked Serve, if non-nil

	mu       sync.Mutex
	batches  []int
	ops      [][]Op // the ops of each batch
	from     []string
	handoffs []State
	replicas []State
	dropped  []Key
	calls    atomic.Int64

	handoffErr   error
	replicateErr error         // Replicate's answer, after it records the batch
	short        bool          // answer one reply too few
	hold         time.Duration // a slow owner: Serve takes this long
	// deadlines are the Deadline of every request served, less the time
	// Serve was called: the budget left at arrival.
	deadlines []time.Duration
}

func (r *recorder) Serve(_ context.Context, from string, reqs []Request) []Reply {
	now := time.Now()
	r.calls.Add(1)
	r.mu.Lock()
	r.batches = append(r.batches, len(reqs))
	ops := make([]Op, len(reqs))
	for i, q := range reqs {
		ops[i] = q.Op
	}
	r.ops = append(r.ops, ops)
	r.from = append(r.from, from)
	for _, q := range reqs {
		r.deadlines = append(r.deadlines, q.Deadline.Sub(now))
	}
	r.mu.Unlock()
	time.Sleep(r.hold) // the owner's own slowness, not a wait for an event
	if r.block != nil {
		if r.entered != nil {
			r.entered <- struct{}{}
		}
		<-r.block
	}
	reps := make([]Reply, len(reqs))
	for i, q := range reqs {
		reps[i] = Reply{ErrDetail: q.LeaseID, Lease: api.AcquireResponse{ID: q.Holder}, Epoch: q.Epoch}
		for _, c := range q.Checks {
			reps[i].Results = append(reps[i].Results, api.Result{Allowed: true, Remaining: c.Cost})
		}
	}
	if r.short {
		reps = reps[1:]
	}
	return reps
}

func (r *recorder) Handoff(_ context.Context, from string, st State) error {
	r.calls.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.from = append(r.from, from)
	r.handoffs = append(r.handoffs, st)
	return r.handoffErr
}

// handedOver returns the handoffs received so far as one State, and the
// number of entries in each.
func (r *recorder) handedOver() (State, []int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var got State
	var sizes []int
	for _, h := range r.handoffs {
		got.Buckets = append(got.Buckets, h.Buckets...)
		got.Leases.Leases = append(got.Leases.Leases, h.Leases.Leases...)
		got.Leases.NextFencing = max(got.Leases.NextFencing, h.Leases.NextFencing)
		got.Holdings = append(got.Holdings, h.Holdings...)
		sizes = append(sizes, h.Len())
	}
	return got, sizes
}

func (r *recorder) Replicate(_ context.Context, from string, rep Replica) error {
	r.calls.Add(1)
	st := rep.State
	st.Buckets, _ = decodePacked(slices.Clip(st.Buckets), rep.Packed.b)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.from = append(r.from, from)
	r.replicas = append(r.replicas, st)
	r.dropped = append(r.dropped, rep.Dropped...)
	return r.replicateErr
}

// Report answers with an empty report.
func (r *recorder) Report(context.Context, ReportRequest) Report { return Report{} }

func (r *recorder) batchSizes() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.batches...)
}

func (r *recorder) batchOps() [][]Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]Op(nil), r.ops...)
}

// startServer serves h on a loopback port and returns its address. The
// server is stopped, and its Serve has returned, when the test ends.
func startServer(tb testing.TB, h Handler, creds *Credentials) string {
	tb.Helper()
	_, addr := startServerWith(tb, h, creds)
	return addr
}

// startServerWith is startServer returning the Server too, for a test that
// stops it itself; Cleanup stops it again, a no-op once stopped.
func startServerWith(tb testing.TB, h Handler, creds *Credentials) (*Server, string) {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := NewServer(h, creds)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	tb.Cleanup(func() {
		srv.Stop()
		if err := <-done; err != nil {
			tb.Errorf("Serve: %v", err)
		}
	})
	return srv, lis.Addr().String()
}

func newTestPool(tb testing.TB, cfg Config) *Pool {
	tb.Helper()
	p := NewPool(cfg)
	tb.Cleanup(func() { p.Close() })
	return p
}

// countObserver counts Observer events.
type countObserver struct {
	batches, batched, forwards, errs atomic.Int64
}

func (o *countObserver) BatchSent(_ string, size int) {
	o.batches.Add(1)
	o.batched.Add(int64(size))
}

func (o *countObserver) Forwarded(_ string, d time.Duration, err error) {
	o.forwards.Add(1)
	if err != nil {
		o.errs.Add(1)
	}
}

// testCreds returns the peer credentials derived from secret s.
func testCreds(tb testing.TB, s string) *Credentials {
	tb.Helper()
	c, err := SecretCredentials([]byte(s))
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func take(i int) Request {
	return Request{
		Op:      OpTake,
		Checks:  []api.Check{{Limit: "l", Key: fmt.Sprint("k", i), Cost: int64(i + 1)}},
		Epoch:   uint64(i),
		LeaseID: fmt.Sprint("id-", i),
		Holder:  fmt.Sprint("h-", i),
	}
}

func checkEcho(t *testing.T, i int, rep Reply) {
	t.Helper()
	if rep.ErrDetail != fmt.Sprint("id-", i) || rep.Lease.ID != fmt.Sprint("h-", i) || rep.Epoch != uint64(i) ||
		len(rep.Results) != 1 || rep.Results[0].Remaining != int64(i+1) {
		t.Errorf("caller %d got someone else's reply: %+v", i, rep)
	}
}

func TestConcurrentForwardsAreBatched(t *testing.T) {
	rec := &recorder{}
	tok := testCreds(t, "s")
	addr := startServer(t, rec, tok)
	obs := &countObserver{}
	cfg := LocalConfig()
	cfg.Self = "n1"
	cfg.Credentials = tok
	cfg.Window = 20 * time.Millisecond // wide, so a loaded CPU still batches
	cfg.Observer = obs
	p := newTestPool(t, cfg)

	const calls = 64
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			<-start
			rep, err := p.Do(context.Background(), addr, take(i))
			if err != nil {
				t.Errorf("caller %d: %v", i, err)
				return
			}
			checkEcho(t, i, rep)
		})
	}
	close(start)
	wg.Wait()

	sizes := rec.batchSizes()
	total := 0
	for _, s := range sizes {
		total += s
	}
	if total != calls {
		t.Fatalf("owner served %d requests, want %d", total, calls)
	}
	if len(sizes) >= calls {
		t.Fatalf("%d calls arrived in %d batches: not batched", calls, len(sizes))
	}
	t.Logf("%d calls in %d batches %v", calls, len(sizes), sizes)
	if obs.batches.Load() != int64(len(sizes)) || obs.batched.Load() != calls || obs.forwards.Load() != calls || obs.errs.Load() != 0 {
		t.Errorf("observer: %d batches of %d requests, %d forwards, %d errors",
			obs.batches.Load(), obs.batched.Load(), obs.forwards.Load(), obs.errs.Load())
	}
	for _, f := range rec.from {
		if f != "n1" {
			t.Errorf("from = %q, want n1", f)
		}
	}
}

// sentAt records when each batch was handed to the RPC.
type sentAt struct {
	mu sync.Mutex
	at []time.Time
}

func (o *sentAt) BatchSent(string, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.at = append(o.at, time.Now())
}

func (o *sentAt) Forwarded(string, time.Duration, error) {}

func (o *sentAt) last() time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.at[len(o.at)-1]
}

func TestIdlePeerPaysNoWindow(t *testing.T) {
	rec := &recorder{}
	addr := startServer(t, rec, nil)
	sent := &sentAt{}
	cfg := LocalConfig()
	cfg.Window = 100 * time.Millisecond
	cfg.Observer = sent
	p := newTestPool(t, cfg)
	for i := range 5 {
		begin := time.Now()
		rep, err := p.Do(context.Background(), addr, take(i))
		if err != nil {
			t.Fatal(err)
		}
		// Judged up to the send, not the answer: the round trip (the
		// first one dials) is not the window's, and on a loaded machine
		// it can last longer than the window by itself.
		if wait := sent.last().Sub(begin); wait >= cfg.Window {
			t.Errorf("serial forward %d was sent %v after Do: it waited for the window", i, wait)
		}
		checkEcho(t, i, rep)
	}
	if got := rec.batchSizes(); len(got) != 5 {
		t.Fatalf("5 serial calls in batches %v, want 5 batches of 1", got)
	}
}

func TestWindowSendsBehindStuckBatch(t *testing.T) {
	rec := &recorder{block: make(chan struct{}), entered: make(chan struct{}, 2)}
	addr := startServer(t, rec, nil)
	cfg := LocalConfig()
	cfg.Window = 20 * time.Millisecond
	cfg.Deadline = 10 * time.Second
	p := newTestPool(t, cfg)

	errs := make(chan error, 2)
	do := func(i int) {
		rep, err := p.Do(context.Background(), addr, take(i))
		if err == nil {
			checkEcho(t, i, rep)
		}
		errs <- err
	}
	go do(0)
	<-rec.entered // the first batch is held at the owner
	go do(1)
	<-rec.entered // the second left by its window, the first still held
	close(rec.block)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := rec.batchSizes(); len(got) != 2 || got[0] != 1 || got[1] != 1 {
		t.Fatalf("batches %v, want [1 1]", got)
	}
}

func TestBlockedOwnerHitsDeadline(t *testing.T) {
	rec := &recorder{block: make(chan struct{})}
	addr := startServer(t, rec, nil)
	t.Cleanup(func() { close(rec.block) }) // runs before the server stops
	cfg := LocalConfig()
	cfg.Deadline = 100 * time.Millisecond
	p := newTestPool(t, cfg)
	const slack = 500 * time.Millisecond // scheduling under -race on a shared CPU

	begin := time.Now()
	_, err := p.Do(context.Background(), addr, take(0))
	elapsed := time.Since(begin)
	if err == nil {
		t.Fatal("Do returned no error from a blocked owner")
	}
	if !errors.Is(err, ErrDeadline) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want ErrDeadline", err)
	}
	if elapsed < cfg.Deadline || elapsed > cfg.Deadline+slack {
		t.Errorf("Do returned after %v, want within [%v, %v]", elapsed, cfg.Deadline, cfg.Deadline+slack)
	}

	// A sooner context deadline wins over Config.Deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	begin = time.Now()
	if _, err := p.Do(ctx, addr, take(1)); err == nil {
		t.Fatal("Do returned no error")
	}
	if elapsed := time.Since(begin); elapsed > 20*time.Millisecond+slack {
		t.Errorf("ctx deadline 20ms: Do returned after %v", elapsed)
	}
}

// TestHeldAtOwnerIsSentAlone: a request its owner may hold before it
// answers goes in a batch of its own, so no take waits behind it: an
// acquire that waits for a permit, and an allotment ask, which its owner
// answers once the key's successor has stored the grant. Batched with
// asks, forwarded takes reached their deadline on Zipf keys at 256
// callers.
func TestHeldAtOwnerIsSentAlone(t *testing.T) {
	for _, tc := range []struct {
		op   Op
		wait time.Duration
	}{{OpAcquire, time.Second}, {OpAllot, 0}} {
		rec := &recorder{}
		addr := startServer(t, rec, nil)
		cfg := LocalConfig()
		cfg.Window = 50 * time.Millisecond
		p := newTestPool(t, cfg)
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				req := take(i)
				if i%2 == 0 {
					req.Op, req.Wait = tc.op, tc.wait
				}
				rep, err := p.Do(context.Background(), addr, req)
				if err != nil {
					t.Error(err)
					return
				}
				checkEcho(t, i, rep)
			})
		}
		wg.Wait()
		for _, ops := range rec.batchOps() {
			if len(ops) > 1 && slices.Contains(ops, tc.op) {
				t.Fatalf("%v went in a batch with others: %v", tc.op, rec.batchOps())
			}
		}
	}
}

func TestInvalidOps(t *testing.T) {
	rec := &recorder{}
	addr := startServer(t, rec, nil)
	p := newTestPool(t, LocalConfig())
	if _, err := p.Do(context.Background(), addr, Request{Op: 0}); !errors.Is(err, ErrInvalidOp) {
		t.Fatalf("Do with op 0: %v", err)
	}
	// A peer that sends an undefined op on the wire is refused before the handler.
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := peerpb.NewPeerClient(conn)
	for _, op := range []peerpb.Op{0, 9, 257} {
		_, err := c.Batch(context.Background(), &peerpb.BatchRequest{Requests: []*peerpb.Request{{Op: peerpb.Op_OP_TAKE}, {Op: op}}})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("op %d: err = %v, want InvalidArgument", op, err)
		}
	}
	if n := rec.calls.Load(); n != 0 {
		t.Fatalf("handler called %d times with invalid ops", n)
	}
}

func TestHandlerReplyCountMismatch(t *testing.T) {
	addr := startServer(t, &recorder{short: true}, nil)
	p := newTestPool(t, LocalConfig())
	_, err := p.Do(context.Background(), addr, take(0))
	if status.Code(err) != codes.Internal {
		t.Fatalf("err = %v, want Internal", err)
	}
}

func TestSettleIsNeverShorterThanDeadline(t *testing.T) {
	c := DefaultConfig()
	if c.Settle() != 750*time.Millisecond {
		t.Errorf("default settle bound %v, want 750ms", c.Settle())
	}
	c.Deadline = 5 * time.Second // --forward-timeout 5s
	if c.Settle() != 5*time.Second || c.Validate() != nil {
		t.Errorf("deadline 5s: settle bound %v (%v), want 5s and valid", c.Settle(), c.Validate())
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if err := LocalConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []func(*Config){
		func(c *Config) { c.Window = -1 },
		func(c *Config) { c.Window = time.Second },
		func(c *Config) { c.MaxBatch = 0 },
		func(c *Config) { c.MaxBatch = 1 << 20 },
		func(c *Config) { c.Deadline = 0 },
		func(c *Config) { c.Deadline = time.Hour },
		func(c *Config) { c.HandoffDeadline = 0 },
		func(c *Config) { c.SettleDeadline = -1 },
		func(c *Config) { c.SettleDeadline = time.Hour },
	}
	for i, mutate := range bad {
		c := DefaultConfig()
		mutate(&c)
		if c.Validate() == nil {
			t.Errorf("case %d: %+v accepted", i, c)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("NewPool accepted an invalid config")
		}
	}()
	NewPool(Config{})
}

// TestCallerDeadlineReplacesDefault: a forward waits for a slow owner as
// long as its caller does, not Config.Deadline; without a deadline of its
// own the caller gets Config.Deadline and ErrDeadline. The owner sees each
// request's deadline as the budget left at arrival, never more than the
// caller's.
func TestCallerDeadlineReplacesDefault(t *testing.T) {
	rec := &recorder{hold: 150 * time.Millisecond}
	addr := startServer(t, rec, nil)
	cfg := LocalConfig()
	cfg.Deadline = 20 * time.Millisecond
	p := newTestPool(t, cfg)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	begin := time.Now()
	rep, err := p.Do(ctx, addr, take(0))
	if err != nil {
		t.Fatalf("Do with a 10s caller deadline and a 150ms owner: %v", err)
	}
	checkEcho(t, 0, rep)
	if elapsed := time.Since(begin); elapsed < rec.hold {
		t.Fatalf("answered after %v, before the owner's %v", elapsed, rec.hold)
	}

	if _, err := p.Do(context.Background(), addr, take(1)); !errors.Is(err, ErrDeadline) {
		t.Fatalf("Do without a caller deadline: %v, want ErrDeadline after Config.Deadline", err)
	}
	rec.mu.Lock()
	got := append([]time.Duration(nil), rec.deadlines...)
	rec.mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("owner saw %d requests, want 2", len(got))
	}
	if got[0] <= 5*time.Second || got[0] > 10*time.Second {
		t.Errorf("budget at arrival with a 10s caller deadline: %v, want in (5s, 10s]", got[0])
	}
	if got[1] <= 0 || got[1] > cfg.Deadline {
		t.Errorf("budget at arrival without a caller deadline: %v, want in (0, %v]", got[1], cfg.Deadline)
	}
}
