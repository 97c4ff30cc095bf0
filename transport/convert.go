package transport

import (
	"time"

	"github.com/weir-rl/weir/transport/peerpb"
)

// This file converts between the plain Go types of the package and the
// generated messages. Messages and checks of one batch are allocated as one
// slice each and pointed into, rather than one allocation per element.

// encodeRequests converts reqs into the requests of a BatchRequest.
func encodeRequests(reqs []Request) []*peerpb.Request {
	n := 0
	for i := range reqs {
		n += len(reqs[i].Checks)
	}
	msgs := make([]peerpb.Request, len(reqs))
	ptrs := make([]*peerpb.Request, len(reqs))
	checks := make([]peerpb.Check, n)
	checkPtrs := make([]*peerpb.Check, n)
	for i := range reqs {
		r := &reqs[i]
		m := &msgs[i]
		m.Op = peerpb.Op(r.Op)
		m.Epoch = r.Epoch
		m.LeaseId = r.LeaseID
		m.Holder = r.Holder
		m.TtlNs = int64(r.TTL)
		m.WaitNs = int64(r.Wait)
		m.Proxied = r.Proxied
		if r.RequestID != "" {
			m.RequestId = []byte(r.RequestID)
		}
		if len(r.Checks) > 0 {
			cp := checkPtrs[:len(r.Checks):len(r.Checks)]
			checkPtrs = checkPtrs[len(r.Checks):]
			for j, c := range r.Checks {
				pc := &checks[j]
				pc.Limit, pc.Key, pc.Cost = c.Limit, c.Key, c.Cost
				if in := c.Inline; in != nil {
					pc.Inline = true
					pc.InlineAlgorithm, pc.InlineCapacity, pc.InlineBurst = in.Algorithm, in.Capacity, in.Burst
					pc.InlineLimit, pc.InlineRate, pc.InlineWindow = in.Limit, in.Rate, in.Window
				}
				cp[j] = pc
			}
			checks = checks[len(r.Checks):]
			m.Checks = cp
		}
		ptrs[i] = m
	}
	return ptrs
}

// decodeRequests converts the requests of a BatchRequest back.
func decodeRequests(msgs []*peerpb.Request) []Request {
	n := 0
	for _, m := range msgs {
		n += len(m.GetChecks())
	}
	reqs := make([]Request, len(msgs))
	checks := make([]Check, n)
	for i, m := range msgs {
		r := &reqs[i]
		r.Op = decodeOp(m.GetOp())
		r.Epoch = m.GetEpoch()
		r.LeaseID = m.GetLeaseId()
		r.Holder = m.GetHolder()
		r.TTL = time.Duration(m.GetTtlNs())
		r.Wait = time.Duration(m.GetWaitNs())
		r.Proxied = m.GetProxied()
		if id := m.GetRequestId(); len(id) > 0 {
			r.RequestID = string(id)
		}
		if mc := m.GetChecks(); len(mc) > 0 {
			cs := checks[:len(mc):len(mc)]
			checks = checks[len(mc):]
			for j, c := range mc {
				cs[j] = Check{Limit: c.GetLimit(), Key: c.GetKey(), Cost: c.GetCost()}
				if c.GetInline() {
					cs[j].Inline = &Inline{
						Algorithm: c.GetInlineAlgorithm(), Capacity: c.GetInlineCapacity(), Burst: c.GetInlineBurst(),
						Limit: c.GetInlineLimit(), Rate: c.GetInlineRate(), Window: c.GetInlineWindow(),
					}
				}
			}
			r.Checks = cs
		}
	}
	return reqs
}

// encodeReplies converts replies into the replies of a BatchReply.
func encodeReplies(reps []Reply) []*peerpb.Reply {
	n, leases := 0, 0
	for i := range reps {
		n += len(reps[i].Results)
		if reps[i].Lease != (Grant{}) {
			leases++
		}
	}
	msgs := make([]peerpb.Reply, len(reps))
	ptrs := make([]*peerpb.Reply, len(reps))
	results := make([]peerpb.Result, n)
	resultPtrs := make([]*peerpb.Result, n)
	grants := make([]peerpb.Grant, leases)
	for i := range reps {
		r := &reps[i]
		m := &msgs[i]
		m.ErrCode = uint32(r.ErrCode)
		m.ErrDetail = r.ErrDetail
		m.NotOwner = r.NotOwner
		m.Epoch = r.Epoch
		m.RulesVersion = r.RulesVersion
		if len(r.Entries) > 0 {
			m.Entries = encodeEntries(r.Entries)
		}
		if len(r.Results) > 0 {
			rp := resultPtrs[:len(r.Results):len(r.Results)]
			resultPtrs = resultPtrs[len(r.Results):]
			for j, res := range r.Results {
				pr := &results[j]
				pr.Allowed = res.Allowed
				pr.Remaining = res.Remaining
				pr.Capacity = res.Capacity
				pr.RetryAfterNs = int64(res.RetryAfter)
				pr.ResetAfterNs = int64(res.ResetAfter)
				pr.WindowNs = int64(res.Window)
				pr.Run = res.Run
				pr.DecidedAtNs = res.DecidedAt
				pr.Bucket = res.Bucket
				rp[j] = pr
			}
			results = results[len(r.Results):]
			m.Results = rp
		}
		if r.Lease != (Grant{}) {
			g := &grants[0]
			grants = grants[1:]
			g.Granted = r.Lease.Granted
			g.Id = r.Lease.ID
			g.Fencing = r.Lease.Fencing
			g.TtlNs = int64(r.Lease.TTL)
			g.RetryAfterNs = int64(r.Lease.RetryAfter)
			g.Permits = r.Lease.Permits
			m.Lease = g
		}
		ptrs[i] = m
	}
	return ptrs
}

// decodeReply converts one reply of a BatchReply back. It allocates only
// the Results slice.
func decodeReply(m *peerpb.Reply) Reply {
	r := Reply{
		ErrCode:      uint8(m.GetErrCode()),
		ErrDetail:    m.GetErrDetail(),
		NotOwner:     m.GetNotOwner(),
		Epoch:        m.GetEpoch(),
		RulesVersion: m.GetRulesVersion(),
	}
	if me := m.GetEntries(); len(me) > 0 {
		r.Entries = decodeEntries(me)
	}
	if mr := m.GetResults(); len(mr) > 0 {
		r.Results = make([]Result, len(mr))
		for j, res := range mr {
			r.Results[j] = Result{
				Allowed:    res.GetAllowed(),
				Remaining:  res.GetRemaining(),
				Capacity:   res.GetCapacity(),
				RetryAfter: time.Duration(res.GetRetryAfterNs()),
				ResetAfter: time.Duration(res.GetResetAfterNs()),
				Window:     time.Duration(res.GetWindowNs()),
				Run:        res.GetRun(),
				DecidedAt:  res.GetDecidedAtNs(),
				Bucket:     res.GetBucket(),
			}
		}
	}
	if g := m.GetLease(); g != nil {
		r.Lease = Grant{
			Granted:    g.GetGranted(),
			ID:         g.GetId(),
			Fencing:    g.GetFencing(),
			TTL:        time.Duration(g.GetTtlNs()),
			RetryAfter: time.Duration(g.GetRetryAfterNs()),
			Permits:    g.GetPermits(),
		}
	}
	return r
}

// encodeEntries converts handoff entries into messages.
func encodeEntries(entries []HandoffEntry) []*peerpb.HandoffEntry {
	msgs := make([]peerpb.HandoffEntry, len(entries))
	ptrs := make([]*peerpb.HandoffEntry, len(entries))
	var states []peerpb.BucketState // one allocation for the batch's buckets
	for i := range entries {
		e := &entries[i]
		m := &msgs[i]
		m.Kind = uint32(e.Kind)
		m.Limit = e.Limit
		m.Key = e.Key
		switch e.Kind {
		case HandoffBucket:
			if states == nil {
				states = make([]peerpb.BucketState, 0, len(entries)-i)
			}
			b := e.Bucket
			states = append(states, peerpb.BucketState{
				Algorithm: uint32(b.Algorithm), Full: b.Full, Count: b.Count, Frac: b.Frac, Prev: b.Prev,
				AheadNs: int64(b.Ahead), SinceNs: int64(b.Since), LeftNs: int64(b.Left), UntilFullNs: int64(b.UntilFull),
			})
			m.Bucket = &states[len(states)-1]
		case HandoffLease:
			l := e.Lease
			m.Lease = &peerpb.LeaseState{
				Id: l.ID, Holder: l.Holder, Fencing: l.Fencing, TtlNs: int64(l.TTL),
				RemainingNs: int64(l.Remaining), NextFencing: l.NextFencing,
			}
		}
		ptrs[i] = m
	}
	return ptrs
}

// decodeEntries converts handoff messages back. An entry whose kind has no
// state of that kind, or whose kind is unknown, is kept with its Kind as
// sent, for the node to ignore.
func decodeEntries(msgs []*peerpb.HandoffEntry) []HandoffEntry {
	entries := make([]HandoffEntry, 0, len(msgs))
	for _, m := range msgs {
		e := HandoffEntry{Kind: HandoffKind(m.GetKind()), Limit: m.GetLimit(), Key: m.GetKey()}
		if m.GetKind() > 255 {
			e.Kind = 0
		}
		if b := m.GetBucket(); b != nil && e.Kind == HandoffBucket {
			e.Bucket = BucketState{
				Algorithm: uint8(min(b.GetAlgorithm(), 255)), Full: b.GetFull(), Count: b.GetCount(), Frac: b.GetFrac(), Prev: b.GetPrev(),
				Ahead: time.Duration(b.GetAheadNs()), Since: time.Duration(b.GetSinceNs()),
				Left: time.Duration(b.GetLeftNs()), UntilFull: time.Duration(b.GetUntilFullNs()),
			}
		} else if e.Kind == HandoffBucket {
			e.Kind = 0
		}
		if l := m.GetLease(); l != nil && e.Kind == HandoffLease {
			e.Lease = LeaseState{
				ID: l.GetId(), Holder: l.GetHolder(), Fencing: l.GetFencing(), TTL: time.Duration(l.GetTtlNs()),
				Remaining: time.Duration(l.GetRemainingNs()), NextFencing: l.GetNextFencing(),
			}
		} else if e.Kind == HandoffLease {
			e.Kind = 0
		}
		entries = append(entries, e)
	}
	return entries
}

// encodeChecks and decodeChecks carry the dropped keys of a replication.
func encodeChecks(cs []Check) []*peerpb.Check {
	out := make([]*peerpb.Check, len(cs))
	for i, c := range cs {
		out[i] = &peerpb.Check{Limit: c.Limit, Key: c.Key}
	}
	return out
}

func decodeChecks(ms []*peerpb.Check) []Check {
	out := make([]Check, len(ms))
	for i, m := range ms {
		out[i] = Check{Limit: m.GetLimit(), Key: m.GetKey()}
	}
	return out
}

// decodeOp maps a wire op to Op; a value that does not fit is the invalid
// zero Op rather than a truncation that could land on a valid one.
func decodeOp(o peerpb.Op) Op {
	if o < 0 || o > 255 {
		return 0
	}
	return Op(o)
}
