package node

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/node/cluster"
	"github.com/weir-rl/weir/ring"
	"github.com/weir-rl/weir/topk"
	"github.com/weir-rl/weir/transport"
)

// reportTimeout bounds the whole fan-out of one operator request: a member
// that does not answer in time is listed as missing, not waited for.
const reportTimeout = 2 * time.Second

var _ api.Operator = (*Node)(nil)

// localReport is this node's counters and hot keys, for operator requests
// here and at peers.
func (n *Node) localReport(req transport.ReportRequest) transport.Report {
	r := transport.Report{
		Node:          n.cfg.NodeName,
		LimitsVersion: n.limits.Current().Version,
		Buckets:       int64(n.eng.Buckets()),
		LeasesHeld:    int64(n.eng.LeasesHeld()),
	}
	r.Allowed, r.Denied, r.Fallback = n.eng.Totals()
	if req.HotN > 0 {
		for _, l := range n.eng.Hot(req.Limit, req.HotN) {
			hl := transport.HotList{Limit: l.Limit, Floor: l.Summary.Floor}
			for _, e := range l.Summary.Entries {
				hl.Keys = append(hl.Keys, transport.HotKey{Key: e.Key, Count: e.Count, Err: e.Err, Denied: e.Denied})
			}
			r.Hot = append(r.Hot, hl)
		}
		for _, a := range n.eng.Allotments(req.Limit, 4*req.HotN) {
			r.Allotments = append(r.Allotments, transport.Allotment{Limit: a.Limit, Key: a.Key, Holder: a.Holder, Tokens: a.Tokens, ExpiresIn: a.ExpiresIn})
		}
	}
	return r
}

// reports asks every reachable member for its report within reportTimeout
// (this node answers its own at once).
func (n *Node) reports(ctx context.Context, req transport.ReportRequest) (*ring.View, []cluster.PeerReport) {
	ctx, cancel := context.WithTimeout(ctx, reportTimeout)
	defer cancel()
	return n.members.Reports(ctx, req, n.localReport(req))
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
	out := api.HotKeys{Node: n.cfg.NodeName, Nodes: []string{}, Missing: []string{}, Limits: []api.HotLimit{}, Allotments: []api.Allotment{}}
	parts := map[string][]topk.Summary{}
	for _, pr := range reps {
		if !pr.OK {
			out.Missing = append(out.Missing, pr.Member.Name)
			continue
		}
		out.Nodes = append(out.Nodes, pr.Member.Name)
		for _, a := range pr.Report.Allotments {
			out.Allotments = append(out.Allotments, api.Allotment{
				Limit: a.Limit, Key: a.Key, Owner: pr.Member.Name, Holder: a.Holder, Tokens: a.Tokens, ExpiresInMs: a.ExpiresIn.Milliseconds(),
			})
		}
		for _, hl := range pr.Report.Hot {
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
	slices.SortFunc(out.Allotments, func(a, b api.Allotment) int {
		return cmp.Or(cmp.Compare(b.Tokens, a.Tokens), cmp.Compare(a.Limit, b.Limit), cmp.Compare(a.Key, b.Key), cmp.Compare(a.Holder, b.Holder))
	})
	out.Allotments = out.Allotments[:min(len(out.Allotments), 4*count)]
	return out, nil
}

// Stats implements api.Operator: every known member's counters, asked of
// the member itself, and its share of this node's ring.
func (n *Node) Stats(ctx context.Context) (api.ClusterStats, error) {
	v, reps := n.reports(ctx, transport.ReportRequest{})
	out := api.ClusterStats{Node: n.cfg.NodeName, Epoch: v.Epoch, Members: make([]api.MemberStats, 0, len(reps))}
	for _, pr := range reps {
		ms := api.MemberStats{
			Name: pr.Member.Name, State: pr.Member.State.String(), Reachable: pr.OK,
			RingShare: v.Share(pr.Member.Name), LimitsVersion: pr.Member.Meta.LimitsVersion,
		}
		if pr.OK {
			r := pr.Report
			ms.LimitsVersion, ms.Allowed, ms.Denied, ms.Fallback = r.LimitsVersion, r.Allowed, r.Denied, r.Fallback
			ms.Buckets, ms.LeasesHeld = r.Buckets, r.LeasesHeld
		}
		out.Members = append(out.Members, ms)
	}
	return out, nil
}
