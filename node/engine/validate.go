package engine

import (
	"slices"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/lease"
	"github.com/weir-rl/weir/node/limits"
)

// resolved is a validated check with its limit looked up.
type resolved struct {
	check api.Check
	limit *limits.Limit
}

// validate looks every check up in f and rejects bad input before any state
// is touched, so a bad request changes nothing. The checks are resolved
// into buf when it has room.
func (e *Engine) validate(f *limits.File, checks []api.Check, buf []resolved) ([]resolved, error) {
	if len(checks) == 0 {
		return nil, api.Errorf(api.CodeInvalid, "checks: empty list")
	}
	out := slices.Grow(buf[:0], len(checks))[:len(checks)]
	for i, c := range checks {
		if c.Limit == "" {
			return nil, api.Errorf(api.CodeInvalid, "checks[%d]: empty limit name", i)
		}
		l, err := e.resolve(f, i, c)
		switch {
		case err != nil:
			return nil, err
		case l.Kind != limits.KindRate:
			return nil, api.Errorf(api.CodeInvalid, "checks[%d]: limit %q is a concurrency limit: acquire a lease instead", i, c.Limit)
		case c.Key == "":
			return nil, api.Errorf(api.CodeInvalid, "checks[%d]: empty key", i)
		case len(c.Key) > e.maxKey:
			return nil, api.Errorf(api.CodeInvalid, "checks[%d]: key longer than %d bytes", i, e.maxKey)
		case c.Cost < 0:
			return nil, api.Errorf(api.CodeInvalid, "checks[%d]: cost %d must not be negative", i, c.Cost)
		case c.Cost > l.Bucket.Capacity:
			return nil, api.Errorf(api.CodeInvalid, "checks[%d]: cost %d exceeds capacity %d of limit %q", i, c.Cost, l.Bucket.Capacity, c.Limit)
		}
		out[i] = resolved{check: c, limit: l}
	}
	return out, nil
}

// resolve finds the rate limit check i refers to under f: the file's limit
// of that name, or, for an inline check, the inline limit validated exactly
// like the file's. Every path that decides, refunds or counts a check
// resolves it here, at the node that received it and again at its owner.
func (e *Engine) resolve(f *limits.File, i int, c api.Check) (*limits.Limit, error) {
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

// validateAcquire rejects a bad acquire before any state is touched.
func (e *Engine) validateAcquire(f *limits.File, req api.AcquireRequest) (*limits.Limit, error) {
	l, ok := f.Lookup(req.Limit)
	switch {
	case !ok:
		return nil, api.Errorf(api.CodeInvalid, "unknown limit %q", req.Limit)
	case l.Kind != limits.KindConcurrency:
		return nil, api.Errorf(api.CodeInvalid, "limit %q is a rate limit: use take", req.Limit)
	case req.Key == "":
		return nil, api.Errorf(api.CodeInvalid, "empty key")
	case len(req.Key) > e.maxKey:
		return nil, api.Errorf(api.CodeInvalid, "key longer than %d bytes", e.maxKey)
	case req.TTL < 0 || req.Wait < 0:
		return nil, api.Errorf(api.CodeInvalid, "ttl and wait must not be negative")
	}
	return l, nil
}

// leaseLimit resolves the concurrency limit a lease id was issued under.
func leaseLimit(f *limits.File, id string) (*limits.Limit, string, error) {
	limit, key, ok := lease.ParseID(id)
	if !ok {
		return nil, "", api.Errorf(api.CodeNotFound, "lease not found: malformed id")
	}
	l, ok := f.Lookup(limit)
	if !ok || l.Kind != limits.KindConcurrency {
		return nil, "", api.Errorf(api.CodeNotFound, "lease not found: its limit no longer exists")
	}
	return l, key, nil
}
