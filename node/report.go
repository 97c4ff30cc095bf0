package node

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/ring"
	"github.com/weir-rl/weir/topk"
	"github.com/weir-rl/weir/transport"
)

// reportTimeout bounds the whole fan-out of one operator request: a member
// that does not answer in time is listed as missing, not waited for.
const reportTimeout = 2 * time.Second

var (
	_ api.Operator       = (*Node)(nil)
	_ transport.Reporter = peerHandler{}
)

// Report implements transport.Reporter: this node's summary for a peer
// that merges the cluster-wide views.
func (h peerHandler) Report(_ context.Context, req transport.ReportRequest) transport.Report {
	return h.n.localReport(req)
}

// localReport is this node's counters and hot keys.
func (n *Node) localReport(req transport.ReportRequest) transport.Report {
	r := transport.Report{
		Node:          n.cfg.NodeName,
		LimitsVersion: n.limits.Current().Version,
		Buckets:       int64(n.eng.store.Len()),
		LeasesHeld:    int64(n.leases.held()),
	}
	r.Allowed, r.Denied, r.Fallback = decisionTotals(n.m.decisions)
	if req.HotN > 0 {
		for _, l := range n.eng.hot.summaries(req.Limit, min(req.HotN, hotShards*hotShardCap)) {
			hl := transport.HotList{Limit: l.limit, Floor: l.sum.Floor}
			for _, e := range l.sum.Entries {
				hl.Keys = append(hl.Keys, transport.HotKey{Key: e.Key, Count: e.Count, Err: e.Err, Denied: e.Denied})
			}
			r.Hot = append(r.Hot, hl)
		}
	}
	return r
}

// decisionTotals sums weir_decisions_total into checks answered allowed,
// denied (shadow denials were answered allowed) and decided from fallback.
func decisionTotals(v *prometheus.CounterVec) (allowed, denied, fallback uint64) {
	ch := make(chan prometheus.Metric, 64)
	go func() {
		v.Collect(ch)
		close(ch)
	}()
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) != nil {
			continue
		}
		c := uint64(d.GetCounter().GetValue())
		var outcome, source string
		for _, lp := range d.GetLabel() {
			switch lp.GetName() {
			case "outcome":
				outcome = lp.GetValue()
			case "source":
				source = lp.GetValue()
			}
		}
		if outcome == "denied" {
			denied += c
		} else {
			allowed += c
		}
		if source == api.SourceFallback.String() {
			fallback += c
		}
	}
	return allowed, denied, fallback
}

// peerReport is the answer of one member, or why there is none.
type peerReport struct {
	member ring.Member
	rep    transport.Report
	ok     bool
}

// reports asks every live member but this one for its report, at once,
// and returns them with this node's own, in member order. A member that
// is not live or does not answer within reportTimeout has ok=false.
func (n *Node) reports(ctx context.Context, req transport.ReportRequest) (*ring.View, []peerReport) {
	self := n.localReport(req)
	c := n.cl.Load()
	if c == nil {
		return nil, []peerReport{{member: ring.Member{Name: self.Node, State: ring.Alive}, rep: self, ok: true}}
	}
	v := c.ring.View()
	ctx, cancel := context.WithTimeout(ctx, reportTimeout)
	defer cancel()
	out := make([]peerReport, len(v.Members))
	var wg sync.WaitGroup
	for i, m := range v.Members {
		out[i].member = m
		switch {
		case m.Name == v.Self:
			out[i].rep, out[i].ok = self, true
		case m.State.Live() && m.Meta.GRPCAddr != "":
			wg.Go(func() {
				rep, err := c.pool.Report(ctx, m.Meta.GRPCAddr, req)
				out[i].rep, out[i].ok = rep, err == nil
			})
		}
	}
	wg.Wait()
	return v, out
}

// Hot implements api.Operator: the sketches of every reachable member,
// merged per limit.
func (n *Node) Hot(ctx context.Context, limit string, count int) (api.HotKeys, error) {
	if count < 1 || count > api.MaxHotN {
		return api.HotKeys{}, api.Errorf(api.CodeInvalid, "n must be from 1 to %d", api.MaxHotN)
	}
	if limit != "" {
		l, ok := n.limits.Current().Lookup(limit)
		if !ok {
			return api.HotKeys{}, api.Errorf(api.CodeInvalid, "unknown limit %q", limit)
		}
		limit = l.Name // an alias names its limit
	}
	// Each member sends more than count keys: a key a member leaves out
	// counts at that member's floor, the smallest count it sent, and a
	// deeper list makes that floor, and so the merged error, smaller.
	_, reps := n.reports(ctx, transport.ReportRequest{Limit: limit, HotN: 4 * count})
	out := api.HotKeys{Node: n.cfg.NodeName, Nodes: []string{}, Missing: []string{}, Limits: []api.HotLimit{}}
	parts := map[string][]topk.Summary{}
	for _, pr := range reps {
		if !pr.ok {
			out.Missing = append(out.Missing, pr.member.Name)
			continue
		}
		out.Nodes = append(out.Nodes, pr.member.Name)
		for _, hl := range pr.rep.Hot {
			s := topk.Summary{Floor: hl.Floor}
			for _, k := range hl.Keys {
				s.Entries = append(s.Entries, topk.Entry{Key: k.Key, Count: k.Count, Err: k.Err, Denied: k.Denied})
			}
			parts[hl.Limit] = append(parts[hl.Limit], s)
		}
	}
	names := make([]string, 0, len(parts))
	for name := range parts {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		hl := api.HotLimit{Limit: name, Keys: []api.HotKey{}}
		// A member with no traffic on the limit has no summary for it:
		// its floor is 0, which Merge takes as contributing nothing.
		for _, e := range topk.Merge(parts[name], count) {
			hl.Keys = append(hl.Keys, api.HotKey{Key: e.Key, Cost: e.Count, Error: e.Err, Denied: e.Denied})
		}
		out.Limits = append(out.Limits, hl)
	}
	return out, nil
}

// Stats implements api.Operator: every known member's counters, asked of
// the member itself, and its share of this node's ring.
func (n *Node) Stats(ctx context.Context) (api.ClusterStats, error) {
	v, reps := n.reports(ctx, transport.ReportRequest{})
	out := api.ClusterStats{Node: n.cfg.NodeName, Epoch: 1, Members: make([]api.MemberStats, 0, len(reps))}
	if v != nil {
		out.Epoch = v.Epoch
	}
	for _, pr := range reps {
		ms := api.MemberStats{Name: pr.member.Name, State: pr.member.State.String(), Reachable: pr.ok, RingShare: 1}
		if v != nil {
			ms.RingShare = v.Share(pr.member.Name)
			ms.LimitsVersion = pr.member.Meta.LimitsVersion
		}
		if pr.ok {
			r := pr.rep
			ms.LimitsVersion, ms.Allowed, ms.Denied, ms.Fallback = r.LimitsVersion, r.Allowed, r.Denied, r.Fallback
			ms.Buckets, ms.LeasesHeld = r.Buckets, r.LeasesHeld
		}
		out.Members = append(out.Members, ms)
	}
	return out, nil
}
