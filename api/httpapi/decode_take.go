package httpapi

import "github.com/weir-rl/weir/api"

// decodeTakeFast decodes the common shape of a POST /v1/take body without
// reflection: one object with "checks" (a non-empty array of objects with
// "limit", "key" and an optional "cost") and the optional "evidence" and
// "headers" booleans, in any order, with JSON whitespace anywhere between
// tokens.
//
// It accepts a body only when encoding/json, with the checks of
// decodeTakeRequestJSON, would decode it to the same checks without an
// error, and declines (ok false) everything else: escapes, bytes outside
// printable ASCII, duplicate or unknown field names (also those that
// differ only in case, which encoding/json would match), a cost that is
// not a plain positive integer of at most 18 digits, null, a missing limit
// or key, too many checks, an over-long field, trailing data. A declined
// body goes to decodeTakeRequestJSON, which gives the error or the
// answer, so every error message comes from one place.
func decodeTakeFast(body []byte, lim inputLimits) (checks []api.Check, opts takeOptions, ok bool) {
	p := fastParser{b: body}
	if !p.byte('{') {
		return nil, takeOptions{}, false
	}
	var seenChecks, seenEvidence, seenHeaders bool
	for first := true; ; first = false {
		if p.byte('}') {
			break
		}
		if !first && !p.byte(',') {
			return nil, takeOptions{}, false
		}
		name, ok := p.raw()
		if !ok || !p.byte(':') {
			return nil, takeOptions{}, false
		}
		switch string(name) { // compared without a copy
		case "checks":
			if seenChecks {
				return nil, takeOptions{}, false
			}
			seenChecks = true
			if checks, ok = p.checks(lim); !ok {
				return nil, takeOptions{}, false
			}
		case "evidence":
			if !p.flag(&seenEvidence, &opts.evidence) {
				return nil, takeOptions{}, false
			}
		case "headers":
			if !p.flag(&seenHeaders, &opts.headers) {
				return nil, takeOptions{}, false
			}
		default:
			return nil, takeOptions{}, false
		}
	}
	p.ws()
	if !seenChecks || p.i != len(p.b) {
		return nil, takeOptions{}, false
	}
	return checks, opts, true
}

// fastParser reads a JSON body from b[i:]. Every method skips leading
// whitespace and reports false, consuming nothing useful, on anything
// outside the shape decodeTakeFast accepts.
type fastParser struct {
	b []byte
	i int
}

// ws skips JSON whitespace.
func (p *fastParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// byte consumes c if it is the next token.
func (p *fastParser) byte(c byte) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// raw reads a non-empty string of printable ASCII without escapes and
// returns its bytes, which alias the body.
func (p *fastParser) raw() ([]byte, bool) {
	if !p.byte('"') {
		return nil, false
	}
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			if p.i == start {
				return nil, false
			}
			s := p.b[start:p.i]
			p.i++
			return s, true
		case c < 0x20 || c > 0x7e || c == '\\':
			return nil, false
		}
		p.i++
	}
	return nil, false
}

// posInt reads a positive integer of 1 to 18 digits without a sign,
// fraction or exponent (so it cannot overflow an int64).
func (p *fastParser) posInt() (int64, bool) {
	p.ws()
	start := p.i
	var n int64
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		n = n*10 + int64(p.b[p.i]-'0')
		p.i++
	}
	digits := p.i - start
	if digits == 0 || digits > 18 || p.b[start] == '0' {
		return 0, false
	}
	if p.i < len(p.b) {
		switch p.b[p.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	return n, true
}

// flag reads an option's boolean into v, once: false when the option was
// seen before (a duplicate, which decodeTakeRequestJSON refuses with the
// error) or its value is not true or false.
func (p *fastParser) flag(seen, v *bool) bool {
	if *seen {
		return false
	}
	*seen = true
	var ok bool
	*v, ok = p.boolean()
	return ok
}

// boolean reads true or false.
func (p *fastParser) boolean() (bool, bool) {
	p.ws()
	rest := p.b[p.i:]
	switch {
	case len(rest) >= 4 && string(rest[:4]) == "true":
		p.i += 4
		return true, true
	case len(rest) >= 5 && string(rest[:5]) == "false":
		p.i += 5
		return false, true
	}
	return false, false
}

// checks reads a non-empty array of check objects, at most lim.maxChecks
// of them, each with a limit and a key within lim.maxKeyBytes.
func (p *fastParser) checks(lim inputLimits) ([]api.Check, bool) {
	if !p.byte('[') {
		return nil, false
	}
	out := make([]api.Check, 0, 1)
	for first := true; ; first = false {
		if !first && p.byte(']') {
			return out, true
		}
		if !first && !p.byte(',') {
			return nil, false
		}
		if len(out) == lim.maxChecks {
			return nil, false
		}
		c, ok := p.check(lim)
		if !ok {
			return nil, false
		}
		out = append(out, c)
	}
}

// check reads one {"limit","key"[,"cost"]} object in any order.
func (p *fastParser) check(lim inputLimits) (api.Check, bool) {
	if !p.byte('{') {
		return api.Check{}, false
	}
	c := api.Check{Cost: 1}
	var seenCost bool
	for first := true; ; first = false {
		if !first && p.byte('}') {
			break
		}
		if !first && !p.byte(',') {
			return api.Check{}, false
		}
		name, ok := p.raw()
		if !ok || !p.byte(':') {
			return api.Check{}, false
		}
		switch string(name) { // compared without a copy
		case "limit", "key":
			raw, ok := p.raw()
			if !ok || len(raw) > lim.maxKeyBytes {
				return api.Check{}, false
			}
			v := string(raw)
			dst := &c.Limit
			if name[0] == 'k' {
				dst = &c.Key
			}
			if *dst != "" {
				return api.Check{}, false // given twice
			}
			*dst = v
		case "cost":
			if seenCost {
				return api.Check{}, false
			}
			seenCost = true
			if c.Cost, ok = p.posInt(); !ok {
				return api.Check{}, false
			}
		default:
			return api.Check{}, false
		}
	}
	if c.Limit == "" || c.Key == "" {
		return api.Check{}, false
	}
	return c, true
}
