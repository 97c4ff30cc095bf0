package jepsen

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// LeaseWorkload is the lease traffic of a run: holders on every node that
// acquire a permit of a random key (without waiting), hold it for a random
// time, renewing it at half its lifetime, and release it.
type LeaseWorkload struct {
	Limit          ConcLimit
	Keys           []string
	HoldersPerNode int
	MinHold        time.Duration
	MaxHold        time.Duration
	Pause          time.Duration // the most a holder waits between leases (random)
	// AbandonShare is the share of granted leases whose holder dies right
	// after the grant: it records a KindAbandon op and never renews or
	// releases the lease, then comes back as a fresh holder after its
	// pause. The owner must reclaim the permit when the lease expires.
	AbandonShare float64
	Deadline     time.Duration // per request
	Seed         uint64
}

// RunHolders runs wl against the nodes (name -> base URL) until ctx ends
// and records every lease request in rec. Client numbers start after
// firstClient. It returns when all holders stopped.
func RunHolders(ctx context.Context, nodes map[string]string, wl LeaseWorkload, firstClient int, rec *Recorder) {
	if wl.HoldersPerNode == 0 || len(wl.Keys) == 0 {
		return
	}
	tr := &http.Transport{MaxIdleConnsPerHost: wl.HoldersPerNode + 1, IdleConnTimeout: 10 * time.Second}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	client := firstClient
	for _, name := range sortedKeys(nodes) {
		for range wl.HoldersPerNode {
			client++
			h := holder{
				id: client, node: name, base: nodes[name], wl: wl, hc: hc, rec: rec,
				rnd: rand.New(rand.NewPCG(wl.Seed^0x1ea5e, uint64(client))),
			}
			wg.Go(func() { h.run(ctx) })
		}
	}
	wg.Wait()
}

type holder struct {
	id         int
	node, base string
	wl         LeaseWorkload
	hc         *http.Client
	rec        *Recorder
	rnd        *rand.Rand
}

// wait sleeps d or until ctx ends; it reports whether ctx is still live.
func wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (h *holder) randDur(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(h.rnd.Int64N(int64(hi-lo)))
}

func (h *holder) run(ctx context.Context) {
	if !wait(ctx, h.randDur(0, h.wl.Pause+1)) {
		return
	}
	for ctx.Err() == nil {
		key := h.wl.Keys[h.rnd.IntN(len(h.wl.Keys))]
		acq := h.do(ctx, Op{Kind: KindAcquire, Key: key}, http.MethodPost, "/v1/leases",
			map[string]any{"limit": h.wl.Limit.Name, "key": key, "ttl_ms": h.wl.Limit.LeaseTTLms, "wait_ms": 0, "evidence": true})
		switch {
		case acq.Result == Allowed && h.rnd.Float64() < h.wl.AbandonShare:
			now := h.rec.Now()
			h.rec.add(Op{
				ID: h.rec.id.Add(1), Kind: KindAbandon, Client: h.id, Node: h.node, Limit: acq.Limit,
				Key: acq.Key, LeaseID: acq.LeaseID, Call: now, Return: now, Result: Allowed,
			})
		case acq.Result == Allowed:
			h.hold(ctx, acq)
		}
		if !wait(ctx, h.randDur(h.wl.Pause/4, h.wl.Pause)) {
			return
		}
	}
}

// hold keeps the lease for a random time, renewing it at half its
// lifetime, then releases it (also when the run ends).
func (h *holder) hold(ctx context.Context, acq Op) {
	until := time.Now().Add(h.randDur(h.wl.MinHold, h.wl.MaxHold))
	ttl := time.Duration(acq.TTLms) * time.Millisecond
	renewAt := time.Now().Add(ttl / 2)
	for ctx.Err() == nil {
		next := until
		if renewAt.Before(next) {
			next = renewAt
		}
		if !wait(ctx, time.Until(next)) {
			break
		}
		if !time.Now().Before(until) {
			break
		}
		r := h.do(ctx, Op{Kind: KindRenew, Key: acq.Key, LeaseID: acq.LeaseID}, http.MethodPost,
			"/v1/leases/"+url.PathEscape(acq.LeaseID)+"/renew", map[string]any{"ttl_ms": h.wl.Limit.LeaseTTLms})
		if r.Result == Denied {
			return // lost: nothing to release
		}
		if r.Result == Allowed {
			ttl = time.Duration(r.TTLms) * time.Millisecond
		}
		renewAt = time.Now().Add(ttl / 2)
	}
	// Release even when the run ends, so the history closes the span: do
	// bounds it by the request deadline, and a context that is never
	// cancelled keeps a release that times out in the history (as a
	// timeout) instead of dropping it as cut off by the end of the run.
	h.do(context.WithoutCancel(ctx), Op{Kind: KindRelease, Key: acq.Key, LeaseID: acq.LeaseID}, http.MethodDelete,
		"/v1/leases/"+url.PathEscape(acq.LeaseID), nil)
}

type grantReply struct {
	ID      string `json:"id"`
	Fencing uint64 `json:"fencing_token"`
	TTLms   int64  `json:"ttl_ms"`
	Source  string `json:"source"` // owner | fallback (acquires ask for evidence)
}

// do sends one lease request, records it and returns the recorded op.
func (h *holder) do(ctx context.Context, o Op, method, path string, body any) Op {
	o.Client, o.Node, o.Limit = h.id, h.node, h.wl.Limit.Name
	status, data, answered, cut := h.rec.exchange(ctx, h.hc, &o, h.wl.Deadline, method, h.base+path, body)
	if cut {
		o.Result = Timeout
		return o // the run ended mid-request: not part of the history
	}
	switch {
	case !answered:
	case status == http.StatusCreated && o.Kind == KindAcquire:
		var g grantReply
		if jerr := json.Unmarshal(data, &g); jerr != nil || g.ID == "" {
			o.Result, o.Err = Timeout, fmt.Sprintf("bad grant: %.100s", data)
			break
		}
		o.Result, o.LeaseID, o.Fencing, o.TTLms, o.Source = Allowed, g.ID, g.Fencing, g.TTLms, g.Source
	case status == http.StatusOK && o.Kind == KindRenew:
		var g grantReply
		if jerr := json.Unmarshal(data, &g); jerr != nil {
			o.Result, o.Err = Timeout, fmt.Sprintf("bad renew: %.100s", data)
			break
		}
		o.Result, o.TTLms = Allowed, g.TTLms
	case status == http.StatusNoContent && o.Kind == KindRelease:
		o.Result = Allowed
	case status == http.StatusTooManyRequests && o.Kind == KindAcquire:
		var g grantReply
		_ = json.Unmarshal(data, &g) // the source is evidence only; a 429 is a refusal either way
		o.Result, o.Source = Denied, g.Source
	case status == http.StatusNotFound && o.Kind == KindRenew:
		o.Result = Denied
	default:
		o.otherStatus(status, data)
	}
	h.rec.add(o)
	return o
}
