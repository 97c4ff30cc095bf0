package transport

import (
	"time"

	"github.com/weir-rl/weir/allot"
	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/lease"
	"github.com/weir-rl/weir/transport/peerpb"
)

// This file is the one place that converts between the package's Go types
// (api.Check, api.Result, bucket.Entry, lease.Snapshot, ...) and the
// generated messages. Messages and checks of one batch are allocated as one
// slice each and pointed into, rather than one allocation per element.

// encodeRequests converts reqs into the requests of a BatchRequest sent
// at now: a request's Deadline travels as its time left at now (at least
// 1 ns; the sender drops a request whose time is up before encoding it).
func encodeRequests(reqs []Request, now time.Time) []*peerpb.Request {
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
		m.Want, m.Demand, m.Unspent, m.Seq = r.Want, r.Demand, r.Unspent, r.Seq
		m.Traceparent = r.TraceParent
		if !r.Deadline.IsZero() {
			m.BudgetNs = max(int64(r.Deadline.Sub(now)), 1)
		}
		if r.RequestID != "" {
			m.RequestId = []byte(r.RequestID)
		}
		m.TenantPrefix, m.TenantMaxBuckets = r.Tenant.Prefix, r.Tenant.MaxBuckets
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

// decodeRequests converts the requests of a BatchRequest that arrived at
// now back: a request's budget becomes a Deadline that long after now.
func decodeRequests(msgs []*peerpb.Request, now time.Time) []Request {
	n := 0
	for _, m := range msgs {
		n += len(m.GetChecks())
	}
	reqs := make([]Request, len(msgs))
	checks := make([]api.Check, n)
	for i, m := range msgs {
		r := &reqs[i]
		r.Op = decodeOp(m.GetOp())
		r.Epoch = m.GetEpoch()
		r.LeaseID = m.GetLeaseId()
		r.Holder = m.GetHolder()
		r.TTL = time.Duration(m.GetTtlNs())
		r.Wait = time.Duration(m.GetWaitNs())
		r.Proxied = m.GetProxied()
		r.Want, r.Demand, r.Unspent, r.Seq = m.GetWant(), m.GetDemand(), m.GetUnspent(), m.GetSeq()
		r.TraceParent = m.GetTraceparent()
		if b := m.GetBudgetNs(); b > 0 {
			r.Deadline = now.Add(time.Duration(b))
		}
		if id := m.GetRequestId(); len(id) > 0 {
			r.RequestID = string(id)
		}
		r.Tenant = api.Tenant{Prefix: m.GetTenantPrefix(), MaxBuckets: m.GetTenantMaxBuckets()}
		if mc := m.GetChecks(); len(mc) > 0 {
			cs := checks[:len(mc):len(mc)]
			checks = checks[len(mc):]
			for j, c := range mc {
				cs[j] = api.Check{Limit: c.GetLimit(), Key: c.GetKey(), Cost: c.GetCost()}
				if c.GetInline() {
					cs[j].Inline = &api.InlineLimit{
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
		if reps[i].Lease != (api.AcquireResponse{}) {
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
		m.Expired = r.Expired
		m.Epoch = r.Epoch
		m.RulesVersion = r.RulesVersion
		if r.State.Len() > 0 {
			m.Entries = encodeState(r.State)
		}
		if a := r.Allot; a != (api.AllotResponse{}) {
			m.Allot = &peerpb.Allotment{
				Tokens: a.Tokens, TtlNs: int64(a.TTL), RetryAfterNs: int64(a.RetryAfter),
				Capacity: a.Capacity, WindowNs: int64(a.Window), Seq: a.Seq,
			}
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
				if ev := res.Evidence; ev.Run != "" {
					pr.Run = ev.Run
					pr.DecidedAtNs = ev.DecidedAt.UnixNano()
					pr.Bucket = ev.Bucket
				}
				rp[j] = pr
			}
			results = results[len(r.Results):]
			m.Results = rp
		}
		if r.Lease != (api.AcquireResponse{}) {
			g := &grants[0]
			grants = grants[1:]
			g.Granted = r.Lease.Granted
			g.Id = r.Lease.ID
			g.Fencing = r.Lease.FencingToken
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
		Expired:      m.GetExpired(),
		Epoch:        m.GetEpoch(),
		RulesVersion: m.GetRulesVersion(),
	}
	if me := m.GetEntries(); len(me) > 0 {
		r.State = decodeState(me)
	}
	if mr := m.GetResults(); len(mr) > 0 {
		r.Results = make([]api.Result, len(mr))
		for j, res := range mr {
			r.Results[j] = api.Result{
				Allowed:    res.GetAllowed(),
				Remaining:  res.GetRemaining(),
				Capacity:   res.GetCapacity(),
				RetryAfter: time.Duration(res.GetRetryAfterNs()),
				ResetAfter: time.Duration(res.GetResetAfterNs()),
				Window:     time.Duration(res.GetWindowNs()),
			}
			if run := res.GetRun(); run != "" {
				r.Results[j].Evidence = api.Evidence{Run: run, DecidedAt: time.Unix(0, res.GetDecidedAtNs()), Bucket: res.GetBucket()}
			}
		}
	}
	if a := m.GetAllot(); a != nil {
		r.Allot = api.AllotResponse{
			Tokens: a.GetTokens(), TTL: time.Duration(a.GetTtlNs()), RetryAfter: time.Duration(a.GetRetryAfterNs()),
			Capacity: a.GetCapacity(), Window: time.Duration(a.GetWindowNs()), Seq: a.GetSeq(),
		}
	}
	if g := m.GetLease(); g != nil {
		r.Lease = api.AcquireResponse{
			Granted:      g.GetGranted(),
			ID:           g.GetId(),
			FencingToken: g.GetFencing(),
			TTL:          time.Duration(g.GetTtlNs()),
			RetryAfter:   time.Duration(g.GetRetryAfterNs()),
			Permits:      g.GetPermits(),
		}
	}
	return r
}

// Handoff entry kinds on the wire (peer.proto HandoffEntry.kind).
const (
	entryBucket  = 1
	entryLease   = 2
	entryHolding = 3
)

// encodeState converts owner state into handoff entries: one per bucket,
// then one per lease, each lease carrying the sender's fencing floor.
func encodeState(st State) []*peerpb.HandoffEntry {
	n := st.Len()
	msgs := make([]peerpb.HandoffEntry, n)
	ptrs := make([]*peerpb.HandoffEntry, n)
	states := make([]peerpb.BucketState, len(st.Buckets)) // one allocation for the batch's buckets
	for i, e := range st.Buckets {
		b := e.Snapshot
		states[i] = peerpb.BucketState{
			Algorithm: uint32(b.Algorithm), Full: b.Full, Count: b.Count, Frac: b.Frac, Prev: b.Prev,
			AheadNs: int64(b.Ahead), SinceNs: int64(b.Since), LeftNs: int64(b.Left), UntilFullNs: int64(b.UntilFull),
		}
		m := &msgs[i]
		m.Kind, m.Limit, m.Key, m.Bucket = entryBucket, e.Name, e.Key, &states[i]
		if l := e.Limit; l != (bucket.Limit{}) {
			m.LimitDef = &peerpb.BucketLimit{
				Algorithm: uint32(l.Algorithm), Capacity: l.Capacity, RateN: l.Rate.N, RatePerNs: int64(l.Rate.Per),
				WindowNs: int64(l.Window), Calendar: uint32(l.Calendar),
			}
		}
		ptrs[i] = m
	}
	for j, l := range st.Leases.Leases {
		m := &msgs[len(st.Buckets)+j]
		m.Kind, m.Limit, m.Key = entryLease, l.Limit, l.Key
		m.Lease = &peerpb.LeaseState{
			Id: l.ID, Holder: l.Holder, Fencing: l.Fencing, TtlNs: int64(l.TTL),
			RemainingNs: int64(l.Remaining), NextFencing: st.Leases.NextFencing,
		}
		ptrs[len(st.Buckets)+j] = m
	}
	base := len(st.Buckets) + len(st.Leases.Leases)
	for j, h := range st.Holdings {
		m := &msgs[base+j]
		m.Kind, m.Limit, m.Key = entryHolding, h.Key.Limit, h.Key.Key
		m.Holding = &peerpb.HoldingState{Holder: h.Holder, Tokens: h.Tokens, RemainingNs: int64(h.Remaining), Demand: h.Demand, Seq: h.Seq}
		ptrs[base+j] = m
	}
	return ptrs
}

// decodeLimit converts a bucket's carried limit back; nil is the zero
// Limit (none carried). The receiver validates it before use.
func decodeLimit(m *peerpb.BucketLimit) bucket.Limit {
	if m == nil || m.GetAlgorithm() > uint32(bucket.FixedWindow) || m.GetCalendar() > 255 {
		return bucket.Limit{}
	}
	return bucket.Limit{
		Algorithm: bucket.Algorithm(m.GetAlgorithm()), Capacity: m.GetCapacity(),
		Rate:   bucket.Rate{N: m.GetRateN(), Per: time.Duration(m.GetRatePerNs())},
		Window: time.Duration(m.GetWindowNs()), Calendar: bucket.Calendar(m.GetCalendar()),
	}
}

// decodeState converts handoff entries back. An entry of an unknown kind,
// one without the state its kind names, and a bucket of an algorithm this
// version does not know are dropped; the fencing floor is the highest one
// sent.
func decodeState(msgs []*peerpb.HandoffEntry) State {
	var st State
	for _, m := range msgs {
		switch m.GetKind() {
		case entryBucket:
			b := m.GetBucket()
			if b == nil || b.GetAlgorithm() > uint32(bucket.FixedWindow) {
				continue
			}
			st.Buckets = append(st.Buckets, bucket.Entry{Name: m.GetLimit(), Key: m.GetKey(), Snapshot: bucket.Snapshot{
				Algorithm: bucket.Algorithm(b.GetAlgorithm()), Full: b.GetFull(), Count: b.GetCount(), Frac: b.GetFrac(), Prev: b.GetPrev(),
				Ahead: time.Duration(b.GetAheadNs()), Since: time.Duration(b.GetSinceNs()),
				Left: time.Duration(b.GetLeftNs()), UntilFull: time.Duration(b.GetUntilFullNs()),
			}, Limit: decodeLimit(m.GetLimitDef())})
		case entryLease:
			l := m.GetLease()
			if l == nil {
				continue
			}
			st.Leases.Leases = append(st.Leases.Leases, lease.Snapshot{
				ID: l.GetId(), Limit: m.GetLimit(), Key: m.GetKey(), Holder: l.GetHolder(),
				Fencing: l.GetFencing(), TTL: time.Duration(l.GetTtlNs()), Remaining: time.Duration(l.GetRemainingNs()),
			})
			st.Leases.NextFencing = max(st.Leases.NextFencing, l.GetNextFencing())
		case entryHolding:
			h := m.GetHolding()
			if h == nil {
				continue
			}
			st.Holdings = append(st.Holdings, allot.Entry{
				Key: allot.Key{Limit: m.GetLimit(), Key: m.GetKey()}, Holder: h.GetHolder(), Tokens: h.GetTokens(),
				Remaining: time.Duration(h.GetRemainingNs()), Demand: h.GetDemand(), Seq: h.GetSeq(),
			})
		}
	}
	return st
}

// encodeKeys and decodeKeys carry the dropped keys of a replication.
func encodeKeys(ks []Key) []*peerpb.Check {
	out := make([]*peerpb.Check, len(ks))
	for i, k := range ks {
		out[i] = &peerpb.Check{Limit: k.Limit, Key: k.Key}
	}
	return out
}

func decodeKeys(ms []*peerpb.Check) []Key {
	out := make([]Key, len(ms))
	for i, m := range ms {
		out[i] = Key{Limit: m.GetLimit(), Key: m.GetKey()}
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
	for _, a := range r.Allotments {
		m.Allotments = append(m.Allotments, &peerpb.HeldAllotment{Limit: a.Limit, Key: a.Key, Holder: a.Holder, Tokens: a.Tokens, ExpiresInMs: a.ExpiresIn.Milliseconds()})
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
	for _, a := range m.GetAllotments() {
		r.Allotments = append(r.Allotments, Allotment{
			Limit: a.GetLimit(), Key: a.GetKey(), Holder: a.GetHolder(), Tokens: a.GetTokens(), ExpiresIn: time.Duration(a.GetExpiresInMs()) * time.Millisecond,
		})
	}
	return r
}
