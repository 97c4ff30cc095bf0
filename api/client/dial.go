package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/weir-rl/weir/api/weirv1"
)

// ringTimeout bounds one GetRing call of a refresh.
const ringTimeout = 2 * time.Second

// Dial returns a cluster-aware client: it fetches the ring from the first
// of seeds (public gRPC addresses, host:port) that answers within ctx,
// holds one connection per live member, and sends each take and lease to
// its key's owner. ctx bounds only this first fetch. The client refreshes
// the ring in the background (see Options) until Close.
func Dial(ctx context.Context, seeds []string, opts Options) (*Client, error) {
	if len(seeds) == 0 {
		return nil, errors.New("client: Dial needs at least one seed address")
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	r := newRouter(opts)
	r.seeds = slices.Clone(seeds)
	r.dial = dialOptions(opts)
	var errs []error
	for _, addr := range seeds {
		v, m, err := r.fetchFrom(ctx, addr)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
			if ctx.Err() != nil {
				break
			}
			continue
		}
		r.apply(v, m)
		if r.members.Load() == nil {
			_ = m.conn.Close()
			errs = append(errs, fmt.Errorf("%s: the ring lists no member with a public gRPC address", addr))
			continue
		}
		r.wg.Add(1)
		go r.run()
		return &Client{r: r, al: newAllotter(r, opts), opts: opts}, nil
	}
	r.cancel()
	return nil, fmt.Errorf("client: no seed answered: %w", errors.Join(errs...))
}

// dialOptions are the options of every member connection.
func dialOptions(o Options) []grpc.DialOption {
	creds := o.Credentials
	switch {
	case creds != nil:
	case o.TLSConfig != nil:
		creds = credentials.NewTLS(o.TLSConfig)
	default:
		creds = insecure.NewCredentials()
	}
	out := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if o.Token != "" {
		out = append(out, grpc.WithPerRPCCredentials(newTokenCreds(o.Token, o.PlaintextToken)))
	}
	return append(out, o.DialOptions...)
}

// newMember opens a (lazy) connection to a member and, when it advertises
// a RESP address the client may use (leanOK), a pool of lean connections.
func (r *router) newMember(name, addr, respAddr string) (*member, error) {
	conn, err := grpc.NewClient(addr, r.dial...)
	if err != nil {
		return nil, err
	}
	m := &member{name: name, addr: addr, conn: conn, rpc: weirv1.NewLimiterClient(conn), useStream: true}
	m.setRESP(r, respAddr)
	return m, nil
}

// setRESP records m's RESP address and opens its lean pool when the
// client's options allow one. Only for a member not yet published.
func (m *member) setRESP(r *router, respAddr string) {
	m.respAddr = respAddr
	if respAddr != "" && r.opts.leanOK() {
		m.lean = newLeanPool(respAddr, &r.opts)
	}
}

// fetchFrom dials addr and asks it for the ring. The returned member holds
// the new connection.
func (r *router) fetchFrom(ctx context.Context, addr string) (*ringView, *member, error) {
	m, err := r.newMember("", addr, "")
	if err != nil {
		return nil, nil, err
	}
	v, err := fetch(ctx, m)
	if err != nil {
		_ = m.conn.Close()
		return nil, nil, err
	}
	m.name, m.seed = v.from, true
	return v, m, nil
}

func fetch(ctx context.Context, m *member) (*ringView, error) {
	ctx, cancel := context.WithTimeout(ctx, ringTimeout)
	defer cancel()
	resp, err := m.rpc.GetRing(ctx, &weirv1.GetRingRequest{})
	if err != nil {
		return nil, err
	}
	return viewFromProto(resp)
}

// apply installs v, fetched from member from (whose connection it adopts
// when v lists from at that address): members v lists that the client has
// no connection to are dialled, and members v no longer lists are retired.
// A view that lists no reachable member changes nothing.
func (r *router) apply(v *ringView, from *member) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		if from != nil && from.conn != nil && r.conns[from.addr] != from {
			_ = from.conn.Close()
		}
		return
	}
	set := &memberSet{byName: map[string]*member{}}
	keep := map[string]bool{}
	for name, addr := range v.addrs {
		m := r.conns[addr]
		respAddr := v.resp[name]
		if m != nil && (m.name != name || m.respAddr != respAddr) { // another member now listens there, or the member restarted with another RESP address
			r.retired = append(r.retired, retired{m: m, at: r.opts.Clock.Now()})
			delete(r.conns, addr)
			m = nil
		}
		switch {
		case m != nil:
		case from != nil && from.addr == addr && from.name == name && from.respAddr == respAddr:
			m = from
			m.seed = false
		case from != nil && from.addr == addr && from.name == name && from.seed:
			m = from // a seed connection, not yet published
			m.seed = false
			m.setRESP(r, respAddr)
		default:
			var err error
			if m, err = r.newMember(name, addr, respAddr); err != nil {
				r.opts.Logger.Warn("client: cannot dial member", "member", name, "addr", addr, "err", err)
				continue
			}
		}
		keep[addr] = true
		set.byName[name] = m
		set.list = append(set.list, m)
	}
	if len(set.list) == 0 {
		if from != nil && r.conns[from.addr] != from {
			_ = from.conn.Close()
		}
		return
	}
	slices.SortFunc(set.list, func(a, b *member) int { return strings.Compare(a.name, b.name) })
	now := r.opts.Clock.Now()
	for addr, m := range r.conns {
		if !keep[addr] {
			r.retired = append(r.retired, retired{m: m, at: now})
			delete(r.conns, addr)
		}
	}
	for _, m := range set.list {
		r.conns[m.addr] = m
	}
	// The member that answered is reachable. A failure seen at any other
	// stays marked until its downFor ends: the ring, built from gossip,
	// may still list as alive a member this client cannot reach (one that
	// is leaving hands its keys over before it leaves the ring, and the
	// refresh its failure asked for lists it still).
	if from != nil {
		from.downUntil.Store(0)
	}
	if from != nil && r.conns[from.addr] != from {
		_ = from.conn.Close() // a seed connection the view does not use
	}
	if m := set.byName[v.from]; m != nil {
		for prev := m.seen.Load(); prev < v.epoch && !m.seen.CompareAndSwap(prev, v.epoch); prev = m.seen.Load() {
		}
	}
	r.view.Store(v)
	r.members.Store(set)
	r.stats.refreshes.Add(1)
	r.closeRetiredLocked(now, false)
	r.opts.Logger.Debug("client: ring", "from", v.from, "epoch", v.epoch, "members", len(set.list))
}

// closeRetiredLocked closes retired connections older than retireAfter
// (all of them when all is set). r.mu must be held.
func (r *router) closeRetiredLocked(now time.Time, all bool) {
	kept := r.retired[:0]
	for _, x := range r.retired {
		if all || now.Sub(x.at) >= retireAfter {
			x.m.closeStream()
			if x.m.lean != nil {
				x.m.lean.close()
			}
			_ = x.m.conn.Close()
			continue
		}
		kept = append(kept, x)
	}
	r.retired = kept
}

// closeStream ends m's stream, if any.
func (m *member) closeStream() {
	m.smu.Lock()
	defer m.smu.Unlock()
	if m.stream != nil {
		m.stream.close()
		m.stream = nil
	}
}

// run is the refresher: it fetches the ring when an answer asks for it
// (at most every MinRefreshInterval) and every RefreshInterval, until the
// client is closed.
func (r *router) run() {
	defer r.wg.Done()
	t := time.NewTimer(r.opts.RefreshInterval)
	defer t.Stop()
	var last time.Time
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-r.kick:
		case <-t.C:
		}
		if d := r.opts.MinRefreshInterval - r.opts.Clock.Now().Sub(last); d > 0 {
			if r.opts.Clock.Sleep(r.ctx, d) != nil {
				return
			}
		}
		last = r.opts.Clock.Now()
		r.refresh(r.ctx)
		t.Reset(r.opts.RefreshInterval)
	}
}

// refresh fetches the ring from the member that asked for it, else from
// the healthy members in turn, else from the seeds.
func (r *router) refresh(ctx context.Context) {
	from := r.kickFrom.Swap(nil)
	set := r.members.Load()
	now := r.opts.Clock.Now()
	var order []*member
	if from != nil {
		order = append(order, from)
	}
	for _, m := range set.list {
		if m != from && m.healthy(now) {
			order = append(order, m)
		}
	}
	for _, m := range order {
		v, err := fetch(ctx, m)
		if err == nil {
			r.apply(v, m)
			return
		}
		if ctx.Err() != nil {
			return
		}
	}
	for _, addr := range r.seeds {
		v, m, err := r.fetchFrom(ctx, addr)
		if err == nil {
			r.apply(v, m)
			return
		}
		if ctx.Err() != nil {
			return
		}
	}
	r.opts.Logger.Warn("client: ring refresh failed: no member or seed answered")
}

// close stops the refresher and the streams and closes every connection
// the router opened.
func (r *router) close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	// Cancelled first, so that a take failed by a closing lean connection
	// below sees the client closed and is not retried over gRPC.
	r.cancel()
	for _, m := range r.conns {
		if m.lean != nil {
			m.lean.close()
		}
	}
	for _, x := range r.retired {
		if x.m.lean != nil {
			x.m.lean.close()
		}
	}
	r.mu.Unlock()
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	for addr, m := range r.conns {
		r.retired = append(r.retired, retired{m: m})
		delete(r.conns, addr)
	}
	r.closeRetiredLocked(time.Time{}, true)
}
