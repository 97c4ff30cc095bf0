package engine

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/node/limits"
)

// numSources is the number of api.Source values: owner, fallback,
// allotment.
const numSources = int(api.SourceAllotment) + 1

// Decision outcomes as indexes into limitCounters.decisions.
const (
	outcomeAllowed = iota
	outcomeDenied
	outcomeShadowDenied
	numOutcomes
)

// outcomeName is the outcome label value of an index.
func outcomeName(o int) string {
	switch o {
	case outcomeAllowed:
		return "allowed"
	case outcomeDenied:
		return "denied"
	}
	return "shadow_denied"
}

// limitCounters are one limit's decision and denial counters on the take
// path. Looking a child up by label values hashes the values and takes the
// vector's lock on every request; these are looked up once per limit and
// limits file. Each child is still created on its first use, so /metrics
// shows exactly the series it showed before.
type limitCounters struct {
	decisions [numOutcomes][numSources]func() prometheus.Counter // by outcome, then api.Source
	policy    func() prometheus.Counter                          // weir_denials_total{kind="policy"}
	fallback  func() prometheus.Counter                          // weir_denials_total{kind="fallback"}
}

func newLimitCounters(m *metrics, name string) *limitCounters {
	lc := &limitCounters{
		policy:   sync.OnceValue(func() prometheus.Counter { return m.denials.WithLabelValues(name, denialPolicy) }),
		fallback: sync.OnceValue(func() prometheus.Counter { return m.denials.WithLabelValues(name, denialFallback) }),
	}
	for o := range lc.decisions {
		for s := range lc.decisions[o] {
			src := api.Source(s).String()
			lc.decisions[o][s] = sync.OnceValue(func() prometheus.Counter {
				return m.decisions.WithLabelValues(name, outcomeName(o), src)
			})
		}
	}
	return lc
}

// counterCache holds the limitCounters of every limit of one limits file,
// keyed by the file's own *Limit values. It is immutable once built.
type counterCache struct {
	file   *limits.File
	by     map[*limits.Limit]*limitCounters
	inline *limitCounters // every inline limit's, under one label
}

// hotCounters finds the counters of a limit of the file in force. A
// reload builds a new cache on the first request that sees the new file;
// requests still finishing under an older file get counters of their own,
// uncached, so two files never take turns in the cache. Safe for
// concurrent use.
type hotCounters struct {
	m       *metrics
	current func() *limits.File // the file in force
	cache   atomic.Pointer[counterCache]
}

// of returns l's counters; l must come from f.
func (h *hotCounters) of(f *limits.File, l *limits.Limit) *limitCounters {
	c := h.cache.Load()
	if c == nil || c.file != f {
		if f != h.current() {
			return newLimitCounters(h.m, metricName(l))
		}
		c = &counterCache{file: f, by: make(map[*limits.Limit]*limitCounters, len(f.Limits)), inline: newLimitCounters(h.m, inlineMetricName)}
		for i := range f.Limits {
			fl := &f.Limits[i]
			c.by[fl] = newLimitCounters(h.m, fl.Name)
		}
		h.cache.Store(c)
	}
	if l.Inline {
		return c.inline
	}
	if lc, ok := c.by[l]; ok {
		return lc
	}
	return newLimitCounters(h.m, metricName(l))
}
