package engine

import (
	"sync"

	"github.com/weir-rl/weir/node/limits"
)

// maxInlineCache bounds the validated inline limits an engine remembers.
const maxInlineCache = 4096

// inlineMetricName is the limit label under which every inline limit is
// counted: inline names are the callers' choice, and a label per name
// would let callers grow the metrics without bound.
const inlineMetricName = "inline"

// inlineKey identifies an inline limit: its name and its parameters.
type inlineKey struct {
	name string
	in   limits.Inline
}

// inlineCache remembers inline limits that passed limits.ParseInline, so
// a caller that sends the same parameters on every request (CL.THROTTLE
// does) pays for their validation once. Invalid ones are not remembered.
// It holds at most maxInlineCache entries and is emptied when full. It is
// safe for concurrent use; mu guards m.
type inlineCache struct {
	mu sync.RWMutex
	m  map[inlineKey]*limits.Limit
}

// parse returns the validated limit for (name, in), from the cache when
// it can.
func (c *inlineCache) parse(name string, in limits.Inline) (*limits.Limit, error) {
	k := inlineKey{name, in}
	c.mu.RLock()
	l, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return l, nil
	}
	parsed, err := limits.ParseInline(name, in)
	if err != nil {
		return nil, err
	}
	l = &parsed
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxInlineCache {
		c.m = make(map[inlineKey]*limits.Limit)
	}
	c.m[k] = l
	c.mu.Unlock()
	return l, nil
}

// metricName is the limit label l is counted under.
func metricName(l *limits.Limit) string {
	if l.Inline {
		return inlineMetricName
	}
	return l.Name
}
