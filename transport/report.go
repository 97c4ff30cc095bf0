package transport

import (
	"context"
	"fmt"
	"time"

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
	// Allotments are the largest holdings the node records as an owner,
	// largest first (at most 4 × HotN).
	Allotments []Allotment
}

// Allotment is one holding an owner records: Holder's Tokens outstanding
// of (Limit, Key), usable for ExpiresIn more at most.
type Allotment struct {
	Limit, Key, Holder string
	Tokens             int64
	ExpiresIn          time.Duration
}

// Report asks the peer at peerAddr for its summary, within ctx's deadline.
func (p *Pool) Report(ctx context.Context, peerAddr string, req ReportRequest) (Report, error) {
	pr, err := p.peer(peerAddr)
	if err != nil {
		return Report{}, err
	}
	m, err := pr.client.Report(ctx, &peerpb.ReportRequest{Limit: req.Limit, HotN: uint32(max(req.HotN, 0)), Protocol: p.Protocol()})
	if err != nil {
		return Report{}, fmt.Errorf("transport: report from %s: %w", peerAddr, err)
	}
	return decodeReport(m), nil
}
