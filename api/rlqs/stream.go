package rlqs

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weir-rl/weir/api"
)

// This file is one stream: its buckets, and the step that answers a
// report. A stream is served by one goroutine; the asks of one report run
// in parallel, each on its own bucket.

// maxDemand bounds the demand sent with an ask (api.ValidateAllot allows
// up to 1e12 per second).
const maxDemand = 1e9

// stream is one RLQS stream: one holder, its domain and its buckets.
type stream struct {
	s       *Server
	holder  string
	domain  string // set by the first report
	buckets map[bucketRef]*tracked
}

// tracked is a bucket the stream tracks, with the id Envoy sent for it
// (echoed in every action).
type tracked struct {
	id *rlqsv3.BucketId
	b  bucket
}

func newStream(s *Server, holder string) *stream {
	return &stream{s: s, holder: holder, buckets: map[bucketRef]*tracked{}}
}

// close releases the stream's buckets from the server's count. Its
// allotments are not returned: the proxy may still apply its assignments
// until they expire, and the owner's holdings expire after them.
func (st *stream) close() {
	st.s.buckets.Add(-int64(len(st.buckets)))
	clear(st.buckets)
}

// handle answers one report: every bucket it names is validated first (a
// bad report changes nothing and ends the stream), then counted, then
// refreshed at its owner where due, in parallel. It returns the actions
// to send, in the report's order.
func (st *stream) handle(ctx context.Context, msg *rlqsv3.RateLimitQuotaUsageReports) ([]*rlqsv3.RateLimitQuotaResponse_BucketAction, error) {
	if err := st.checkDomain(msg.GetDomain()); err != nil {
		return nil, err
	}
	usages := msg.GetBucketQuotaUsages()
	if len(usages) > st.s.cfg.MaxUsages {
		return nil, api.Errorf(api.CodeInvalid, "bucket_quota_usages has %d entries, over the %d maximum", len(usages), st.s.cfg.MaxUsages)
	}
	refs := make([]bucketRef, len(usages))
	for i, u := range usages {
		ref, err := mapBucketID(i, u.GetBucketId(), st.s.cfg.MaxEntries, st.s.cfg.MaxKeyBytes)
		if err != nil {
			return nil, err
		}
		refs[i] = ref
	}
	now := st.s.cfg.Now()
	var out []*rlqsv3.RateLimitQuotaResponse_BucketAction
	var jobs []*tracked
	seen := make(map[*tracked]bool, len(usages))
	for i, u := range usages {
		t := st.buckets[refs[i]]
		if t == nil {
			if t = st.track(now, refs[i], u.GetBucketId()); t == nil {
				out = append(out, action(u.GetBucketId(), assignment{kind: kindDeny, ttl: ceilSeconds(st.s.cfg.RefusedTTL)}))
				continue
			}
		}
		t.b.observe(now, satAdd(clampInt(u.GetNumRequestsAllowed()), clampInt(u.GetNumRequestsDenied())))
		if !seen[t] {
			seen[t] = true
			jobs = append(jobs, t)
		}
	}
	return append(out, st.steps(ctx, now, jobs)...), nil
}

// checkDomain holds the stream to the domain of its first report (and
// Config.Domain when set).
func (st *stream) checkDomain(d string) error {
	switch {
	case st.domain == "" && d == "":
		return api.Errorf(api.CodeInvalid, "domain is empty in the stream's first report")
	case st.domain == "" && st.s.cfg.Domain != "" && d != st.s.cfg.Domain:
		return api.Errorf(api.CodeInvalid, "domain %q is not served; this service serves %q", api.Clip(d), st.s.cfg.Domain)
	case st.domain == "":
		st.domain = d
	case d != "" && d != st.domain:
		return api.Errorf(api.CodeInvalid, "domain changed from %q to %q: open a new stream", api.Clip(st.domain), api.Clip(d))
	}
	return nil
}

// track starts tracking a bucket, or returns nil when the stream or the
// server tracks its maximum.
func (st *stream) track(now time.Time, ref bucketRef, id *rlqsv3.BucketId) *tracked {
	if len(st.buckets) >= st.s.cfg.MaxBucketsPerStream {
		return nil
	}
	if st.s.buckets.Add(1) > int64(st.s.cfg.MaxBuckets) {
		st.s.buckets.Add(-1)
		return nil
	}
	t := &tracked{id: &rlqsv3.BucketId{Bucket: make(map[string]string, len(id.GetBucket()))}}
	for k, v := range id.GetBucket() {
		t.id.Bucket[k] = v
	}
	t.b = bucket{limit: ref.limit, key: ref.key, since: now, lastBusy: now}
	st.buckets[ref] = t
	return t
}

// steps runs step for each job, at most Config.Parallel at once, and
// returns their actions in order; abandoned buckets are forgotten.
func (st *stream) steps(ctx context.Context, now time.Time, jobs []*tracked) []*rlqsv3.RateLimitQuotaResponse_BucketAction {
	res := make([]assignment, len(jobs))
	sem := make(chan struct{}, st.s.cfg.Parallel)
	var wg sync.WaitGroup
	for i, t := range jobs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			res[i] = st.step(ctx, now, &t.b)
		})
	}
	wg.Wait()
	var out []*rlqsv3.RateLimitQuotaResponse_BucketAction
	for i, a := range res {
		if a.kind == kindNone {
			continue
		}
		out = append(out, action(jobs[i].id, a))
		if a.kind == kindAbandon {
			delete(st.buckets, bucketRef{limit: jobs[i].b.limit, key: jobs[i].b.key})
			st.s.buckets.Add(-1)
		}
	}
	return out
}

// step refreshes one bucket at now, when due: it asks its owner for the
// allotment its demand needs, with what the proxy may still admit as
// Unspent, and fits the next assignment into what the owner then counts
// outstanding. kindNone means nothing to send: not due, or the owner
// could not answer (the proxy keeps its assignment until it expires).
func (st *stream) step(ctx context.Context, now time.Time, b *bucket) assignment {
	cfg := st.s.cfg
	p := params{margin: cfg.Margin, defaultTTL: cfg.DefaultTTL}
	switch {
	case now.Sub(b.lastBusy) >= cfg.AbandonAfter:
		return assignment{kind: kindAbandon}
	case !b.due(now, cfg.Margin, cfg.MinRefresh):
		return assignment{}
	}
	demand := min(b.measure(now), maxDemand)
	if b.fill == 0 {
		b.fill = time.Second // until the owner says the limit's rate
	}
	tgt := b.target(demand, b.limitResp())
	keep := b.keeps(now, p.margin) && !better(tgt, b.last.s, tgt)
	s := tgt
	if keep {
		s = b.last.s
	}
	// The first report comes with the first request: a demand of at least
	// one a second, so the owner's share is not nothing.
	req := api.AllotRequest{Limit: b.limit, Key: b.key, Holder: st.holder, Want: b.want(now, p, s, keep), Demand: max(demand, 1), Unspent: b.unspent(now), Seq: b.seq}
	b.lastAsked = now
	resp, err := st.s.d.Allot(ctx, req)
	sent := cfg.Now()
	if err != nil {
		if refused(err) {
			b.denied = sent.Add(cfg.RefusedTTL)
			return b.deny(sent, ceilSeconds(cfg.RefusedTTL), p.margin)
		}
		return assignment{}
	}
	b.seq = resp.Seq
	b.capacity, b.window = resp.Capacity, resp.Window
	if b.last.kind == kindNone {
		b.fill = fillFor(resp)
	}
	return b.fit(sent, now, satAdd(req.Unspent, resp.Tokens), resp, b.target(demand, resp), p)
}

// refused reports whether err says the bucket cannot be allotted at all
// (unknown limit, a limit without allotments, a bucket the caller may not
// use), rather than not now.
func refused(err error) bool {
	e, ok := errors.AsType[*api.Error](err)
	return ok && (e.Code == api.CodeInvalid || e.Code == api.CodeForbidden || e.Code == api.CodeNotFound)
}

// fillFor is the fill interval of a bucket of the limit resp describes:
// one second, or the whole seconds one token takes when the limit's rate
// is under one per second, so a single token per fill fits its rate.
func fillFor(resp api.AllotResponse) time.Duration {
	if resp.Capacity <= 0 || resp.Window <= 0 {
		return time.Second
	}
	perToken := time.Duration(float64(resp.Window) / float64(resp.Capacity))
	return min(max(ceilSeconds(perToken), time.Second), time.Hour)
}

// action is the bucket action for a, echoing id.
func action(id *rlqsv3.BucketId, a assignment) *rlqsv3.RateLimitQuotaResponse_BucketAction {
	out := &rlqsv3.RateLimitQuotaResponse_BucketAction{BucketId: id}
	var strat *typev3.RateLimitStrategy
	switch a.kind {
	case kindAbandon:
		out.BucketAction = &rlqsv3.RateLimitQuotaResponse_BucketAction_AbandonAction_{
			AbandonAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_AbandonAction{},
		}
		return out
	case kindDeny:
		strat = &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: typev3.RateLimitStrategy_DENY_ALL}}
	default:
		strat = &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_TokenBucket{TokenBucket: &typev3.TokenBucket{
			MaxTokens:     uint32(min(a.s.maxTokens, math.MaxUint32)),
			TokensPerFill: wrapperspb.UInt32(uint32(min(a.s.perFill, math.MaxUint32))),
			FillInterval:  durationpb.New(a.s.fill),
		}}}
	}
	out.BucketAction = &rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction_{
		QuotaAssignmentAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction{
			AssignmentTimeToLive: durationpb.New(a.ttl),
			RateLimitStrategy:    strat,
		},
	}
	return out
}

func clampInt(v uint64) int64 { return int64(min(v, math.MaxInt64)) }
