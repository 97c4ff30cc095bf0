package limits

import (
	"go.yaml.in/yaml/v3"

	"github.com/weir-rl/weir/bucket"
)

// bucketLimit reads the fields of a rate limit with algorithm alg.
func (p *parser) bucketLimit(alg bucket.Algorithm, fs fieldSet, line int, label string) bucket.Limit {
	b := bucket.Limit{Algorithm: alg}
	need := func(name string) (field, bool) {
		v, ok := fs.m[name]
		if !ok {
			p.errorf(line, "%s%s needs %q", label, alg, name)
		}
		return v, ok
	}
	count := func(name string) int64 {
		v, ok := need(name)
		if !ok {
			return 0
		}
		n, ok := p.int(v.val, label, name)
		switch {
		case !ok:
		case n < 1:
			p.errorf(v.val.Line, "%s%q must be >= 1, got %d", label, name, n)
		case n > bucket.MaxCapacity:
			p.errorf(v.val.Line, "%s%q must be at most %d, got %d", label, name, int64(bucket.MaxCapacity), n)
		}
		return n
	}
	rate := func() bucket.Rate {
		v, ok := need("rate")
		if !ok {
			return bucket.Rate{}
		}
		s, ok := p.str(v.val, label, "rate")
		if !ok {
			return bucket.Rate{}
		}
		r, err := parseRate(s)
		if err != nil {
			p.errorf(v.val.Line, "%s%v", label, err)
		}
		return r
	}
	switch alg {
	case bucket.TokenBucket:
		b.Capacity = count("capacity")
		b.Rate = rate()
	case bucket.GCRA:
		b.Rate = rate()
		b.Capacity = count("burst")
	case bucket.SlidingWindow:
		b.Capacity = count("limit")
		if v, ok := need("window"); ok {
			if d, ok := p.duration(v.val, label, "window"); ok {
				if d < MinPeriod || d > MaxPeriod {
					p.errorf(v.val.Line, "%s\"window\" must be between %v and %s, got %s", label, MinPeriod, fmtDuration(MaxPeriod), fmtDuration(d))
				}
				b.Window = d
			}
		}
	case bucket.FixedWindow:
		b.Capacity = count("limit")
		if v, ok := need("window"); ok {
			if s, ok := p.str(v.val, label, "window"); ok {
				c, err := bucket.ParseCalendar(s)
				if err != nil {
					p.errorf(v.val.Line, "%sfixed_window \"window\" is a calendar unit: minute, hour, day or month (UTC), got %q; for a rolling window use sliding_window", label, clip(s))
				}
				b.Calendar = c
			}
		}
	}
	return b
}

// concurrency reads the fields of a concurrency limit into l.
func (p *parser) concurrency(l *Limit, fs fieldSet, line int, label string) {
	if v, ok := fs.m["permits"]; !ok {
		p.errorf(line, `%sconcurrency limit needs "permits"`, label)
	} else if n, ok := p.int(v.val, label, "permits"); ok {
		if n < 1 || n > MaxPermits {
			p.errorf(v.val.Line, `%s"permits" must be between 1 and %d, got %d`, label, MaxPermits, n)
		}
		l.Permits = n
	}
	ttlOK := false
	if v, ok := fs.m["lease_ttl"]; !ok {
		p.errorf(line, `%sconcurrency limit needs "lease_ttl"`, label)
	} else if d, ok := p.duration(v.val, label, "lease_ttl"); ok {
		if d < MinLeaseTTL || d > MaxLeaseTTLLimit {
			p.errorf(v.val.Line, `%s"lease_ttl" must be between %v and %s, got %s`, label, MinLeaseTTL, fmtDuration(MaxLeaseTTLLimit), fmtDuration(d))
		} else {
			ttlOK = true
		}
		l.LeaseTTL = d
	}
	if v, ok := fs.m["max_lease_ttl"]; ok {
		if d, ok := p.duration(v.val, label, "max_lease_ttl"); ok {
			switch {
			case d > MaxLeaseTTLLimit:
				p.errorf(v.val.Line, `%s"max_lease_ttl" must be at most %s, got %s`, label, fmtDuration(MaxLeaseTTLLimit), fmtDuration(d))
			case ttlOK && d < l.LeaseTTL:
				p.errorf(v.val.Line, `%s"max_lease_ttl" (%s) must be >= "lease_ttl" (%s)`, label, fmtDuration(d), fmtDuration(l.LeaseTTL))
			}
			l.MaxLeaseTTL = d
		}
	} else if ttlOK {
		l.MaxLeaseTTL = min(DefaultMaxLeaseTTLFactor*l.LeaseTTL, MaxLeaseTTLLimit)
	}
	if v, ok := fs.m["queue"]; ok {
		l.Queue = p.queue(v.key.Line, v.val, label)
	}
	if v, ok := fs.m["strict"]; ok {
		l.Strict, _ = p.bool(v.val, label, "strict")
	}
}

// queue reads a concurrency limit's queue mapping, whose key is on line.
// A null queue is no queue.
func (p *parser) queue(line int, n *yaml.Node, label string) Queue {
	var q Queue
	if isNull(n) {
		return q
	}
	if n.Kind != yaml.MappingNode {
		p.errorf(n.Line, `%s"queue" must be a mapping like { length: 16, max_wait: 5s }, got %s`, label, describe(n))
		return q
	}
	fs := p.fields(n, label+"queue: ", queueFields)
	lenOK := false
	if v, ok := fs.m["length"]; ok {
		if x, ok := p.int(v.val, label, "queue.length"); ok {
			if x < 0 || x > MaxQueueLength {
				p.errorf(v.val.Line, `%s"queue.length" must be between 0 and %d, got %d`, label, MaxQueueLength, x)
			} else {
				q.Length = int(x)
				lenOK = true
			}
		}
	} else {
		p.errorf(line, `%s"queue" needs "length"`, label)
	}
	waitLine := line
	waitOK := false
	if v, ok := fs.m["max_wait"]; ok {
		waitLine = v.val.Line
		if d, ok := p.duration(v.val, label, "queue.max_wait"); ok {
			if d < 0 || d > MaxQueueWait {
				p.errorf(v.val.Line, `%s"queue.max_wait" must be between 0s and %v, got %s`, label, MaxQueueWait, fmtDuration(d))
			} else {
				q.MaxWait = d
				waitOK = true
			}
		}
	}
	if _, hasWait := fs.m["max_wait"]; lenOK && (waitOK || !hasWait) {
		switch {
		case q.Length > 0 && q.MaxWait == 0:
			p.errorf(waitLine, `%s"queue.max_wait" must be > 0 when "queue.length" is %d`, label, q.Length)
		case q.Length == 0 && q.MaxWait > 0:
			p.errorf(waitLine, `%s"queue.max_wait" is set but "queue.length" is 0, so no acquire can wait`, label)
		}
	}
	return q
}

// allotments reads a token_bucket limit's allotment fields: allotments
// (off or auto), and, with auto only, allotment_threshold (a rate),
// allotment_horizon and allotment_ttl (durations), each with its default.
func (p *parser) allotments(fs fieldSet, label string, shadow bool) Allotments {
	a := Allotments{Threshold: DefaultAllotmentThreshold, Horizon: DefaultAllotmentHorizon, TTL: DefaultAllotmentTTL}
	if v, ok := fs.m["allotments"]; ok {
		if s, ok := p.str(v.val, label, "allotments"); ok {
			switch s {
			case "auto":
				a.Auto = true
			case "off":
			default:
				p.errorf(v.val.Line, "%s\"allotments\" must be off or auto, got %q", label, clip(s))
			}
		}
	}
	for _, name := range allotFields[1:] {
		if v, ok := fs.m[name]; ok && !a.Auto {
			p.errorf(v.key.Line, "%s%q needs allotments: auto", label, name)
		}
	}
	if !a.Auto {
		return Allotments{}
	}
	if shadow {
		p.errorf(fs.m["allotments"].key.Line, "%sallotments do not apply to a shadow limit (it always allows)", label)
	}
	if v, ok := fs.m["allotment_threshold"]; ok {
		if s, ok := p.str(v.val, label, "allotment_threshold"); ok {
			r, err := parseRate(s)
			if err != nil {
				p.errorf(v.val.Line, "%s%v", label, err)
			} else {
				a.Threshold = float64(r.N) / r.Per.Seconds()
			}
		}
	}
	before := len(p.errs)
	if v, ok := fs.m["allotment_horizon"]; ok {
		if d, ok := p.duration(v.val, label, "allotment_horizon"); ok {
			if d < MinAllotmentHorizon || d > MaxAllotmentHorizon {
				p.errorf(v.val.Line, "%s\"allotment_horizon\" must be in [%v, %v], got %v", label, MinAllotmentHorizon, MaxAllotmentHorizon, d)
			}
			a.Horizon = d
		}
	}
	if v, ok := fs.m["allotment_ttl"]; ok {
		if d, ok := p.duration(v.val, label, "allotment_ttl"); ok {
			if d < MinAllotmentTTL || d > MaxAllotmentTTL {
				p.errorf(v.val.Line, "%s\"allotment_ttl\" must be in [%v, %v], got %v", label, MinAllotmentTTL, MaxAllotmentTTL, d)
			}
			a.TTL = d
		}
	}
	if len(p.errs) == before && a.TTL < 2*a.Horizon {
		p.errorf(fs.m["allotments"].key.Line, "%sallotment_ttl (%v) must be at least twice allotment_horizon (%v)", label, a.TTL, a.Horizon)
	}
	return a
}
