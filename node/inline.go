package node

import (
	"sync"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/node/limits"
	"github.com/weir-rl/weir/transport"
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

// resolve finds the rate limit check i refers to under f: the file's limit
// of that name, or, for an inline check, the inline limit validated exactly
// like the file's. Every path that decides, refunds or counts a check
// resolves it here, at the node that received it and again at its owner.
func (e *engine) resolve(f *limits.File, i int, c api.Check) (*limits.Limit, error) {
	if c.Inline == nil {
		l, ok := f.Lookup(c.Limit)
		if !ok {
			return nil, api.Errorf(api.CodeInvalid, "checks[%d]: unknown limit %q", i, c.Limit)
		}
		return l, nil
	}
	if !f.InlineLimits {
		return nil, api.Errorf(api.CodeInvalid, "checks[%d]: inline limits are disabled: the limits file sets inline_limits: false", i)
	}
	if _, ok := f.Lookup(c.Limit); ok {
		return nil, api.Errorf(api.CodeInvalid, "checks[%d]: limit %q is defined in the limits file: send it without inline parameters", i, c.Limit)
	}
	l, err := e.inline.parse(c.Limit, limits.Inline(*c.Inline))
	if err != nil {
		return nil, api.Errorf(api.CodeInvalid, "checks[%d]: inline limit: %v", i, err)
	}
	return l, nil
}

// metricName is the limit label l is counted under.
func metricName(l *limits.Limit) string {
	if l.Inline {
		return inlineMetricName
	}
	return l.Name
}

// inlineToTransport and inlineFromTransport carry a check's inline limit
// to and from its owner.
func inlineToTransport(in *api.InlineLimit) *transport.Inline {
	if in == nil {
		return nil
	}
	t := transport.Inline(*in)
	return &t
}

func inlineFromTransport(in *transport.Inline) *api.InlineLimit {
	if in == nil {
		return nil
	}
	a := api.InlineLimit(*in)
	return &a
}
