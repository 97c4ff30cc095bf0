package engine

import (
	"cmp"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/topk"
)

// HotList is one limit's heaviest keys on this node: the cost each asked,
// admitted or denied, and the floor bounding every key left out.
type HotList struct {
	Limit   string
	Summary topk.Summary
}

// Hot returns, for limit (every limit when empty), the n heaviest keys
// asked of this node, limits in name order. Requests are counted where they
// arrive, so the lists of all nodes cover disjoint traffic and merge with
// topk.Merge.
func (e *Engine) Hot(limit string, n int) []HotList {
	lists := e.hot.summaries(limit, min(n, hotShards*hotShardCap))
	out := make([]HotList, len(lists))
	for i, l := range lists {
		out[i] = HotList{Limit: l.limit, Summary: l.sum}
	}
	return out
}

// Totals sums the checks this node answered since it started: allowed,
// denied (shadow denials were answered allowed) and decided from local
// ceilings.
func (e *Engine) Totals() (allowed, denied, fallback uint64) {
	return decisionTotals(e.m.decisions)
}

// Buckets is the number of live owner buckets.
func (e *Engine) Buckets() int { return e.store.Len() }

// LeasesHeld is the number of leases in the owner table.
func (e *Engine) LeasesHeld() int { return int(e.leases.held()) }

// Queued is the number of acquires parked in the owner table's queue of
// (limit, key).
func (e *Engine) Queued(limit, key string) int {
	e.leases.mu.Lock()
	defer e.leases.mu.Unlock()
	return e.leases.table.Queued(limit, key)
}

// decisionTotals sums weir_decisions_total into checks answered allowed,
// denied and decided from fallback.
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

// Holding is one holding this node records as its key's owner: Holder's
// Tokens outstanding, usable for ExpiresIn more at most.
type Holding struct {
	Limit, Key, Holder string
	Tokens             int64
	ExpiresIn          time.Duration
}

// Allotments returns the n largest holdings this node records as an owner,
// of limit (every limit when empty), largest first, ties by limit, key
// and holder.
func (e *Engine) Allotments(limit string, n int) []Holding {
	if n <= 0 {
		return nil
	}
	now := e.now()
	var out []Holding
	e.ledger.mu.Lock()
	for _, k := range e.ledger.l.Keys() {
		if limit != "" && k.Limit != limit {
			continue
		}
		for _, h := range e.ledger.l.Holdings(k) {
			out = append(out, Holding{Limit: k.Limit, Key: k.Key, Holder: h.Holder, Tokens: h.Tokens, ExpiresIn: max(h.Expires.Sub(now), 0)})
		}
	}
	e.ledger.mu.Unlock()
	slices.SortFunc(out, func(a, b Holding) int {
		return cmp.Or(cmp.Compare(b.Tokens, a.Tokens), cmp.Compare(a.Limit, b.Limit), cmp.Compare(a.Key, b.Key), cmp.Compare(a.Holder, b.Holder))
	})
	return out[:min(n, len(out))]
}
