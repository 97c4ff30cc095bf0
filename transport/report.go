package transport

import (
	"context"
	"fmt"

	"github.com/weir-rl/weir/transport/peerpb"
)

// ReportRequest asks a peer for its Report.
type ReportRequest struct {
	// Limit restricts the hot keys to one limit; "" asks for every limit.
	Limit string
	// HotN is the number of hot keys per limit; 0 asks for none.
	HotN int
}

// HotKey is one key of a node's top-k sketch: Count over-estimates the
// cost asked of Key at that node by at most Err; Denied is a lower bound of
// the cost refused.
type HotKey struct {
	Key    string
	Count  int64
	Err    int64
	Denied int64
}

// HotList is a node's heaviest keys of one limit, heaviest first; Floor
// bounds the cost of every key left out.
type HotList struct {
	Limit string
	Floor int64
	Keys  []HotKey
}

// Report is one node's operational summary. Counters count checks since
// the node started.
type Report struct {
	Node          string
	LimitsVersion int64
	Allowed       uint64 // checks answered allowed
	Denied        uint64 // checks answered denied
	Fallback      uint64 // checks decided from local ceilings
	Buckets       int64  // live buckets the node owns
	LeasesHeld    int64
	Hot           []HotList
}

// Reporter is what the peer Server needs to answer Report. Package node
// implements it; it is called concurrently.
type Reporter interface {
	Report(ctx context.Context, req ReportRequest) Report
}

// Report asks the peer at peerAddr for its summary, within ctx's deadline.
func (p *Pool) Report(ctx context.Context, peerAddr string, req ReportRequest) (Report, error) {
	pr, err := p.peer(peerAddr)
	if err != nil {
		return Report{}, err
	}
	m, err := pr.client.Report(ctx, &peerpb.ReportRequest{Limit: req.Limit, HotN: uint32(max(req.HotN, 0))})
	if err != nil {
		return Report{}, fmt.Errorf("transport: report from %s: %w", peerAddr, err)
	}
	return decodeReport(m), nil
}

func encodeReport(r Report) *peerpb.ReportReply {
	m := &peerpb.ReportReply{
		Node: r.Node, LimitsVersion: r.LimitsVersion, Allowed: r.Allowed, Denied: r.Denied,
		Fallback: r.Fallback, Buckets: r.Buckets, LeasesHeld: r.LeasesHeld,
	}
	for _, l := range r.Hot {
		hl := &peerpb.HotList{Limit: l.Limit, Floor: l.Floor}
		for _, k := range l.Keys {
			hl.Keys = append(hl.Keys, &peerpb.HotKey{Key: k.Key, Count: k.Count, Err: k.Err, Denied: k.Denied})
		}
		m.Hot = append(m.Hot, hl)
	}
	return m
}

func decodeReport(m *peerpb.ReportReply) Report {
	r := Report{
		Node: m.GetNode(), LimitsVersion: m.GetLimitsVersion(), Allowed: m.GetAllowed(), Denied: m.GetDenied(),
		Fallback: m.GetFallback(), Buckets: m.GetBuckets(), LeasesHeld: m.GetLeasesHeld(),
	}
	for _, hl := range m.GetHot() {
		l := HotList{Limit: hl.GetLimit(), Floor: hl.GetFloor()}
		for _, k := range hl.GetKeys() {
			l.Keys = append(l.Keys, HotKey{Key: k.GetKey(), Count: k.GetCount(), Err: k.GetErr(), Denied: k.GetDenied()})
		}
		r.Hot = append(r.Hot, l)
	}
	return r
}
