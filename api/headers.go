package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// Rate-limit response headers. Formats (draft-ietf-httpapi-ratelimit-headers-10,
// Structured Field syntax; the policy name is the limit name):
//
//	RateLimit-Policy: "<limit>";q=<capacity>;w=<window seconds, rounded up>
//	RateLimit:        "<limit>";r=<remaining>;t=<seconds, see below>
//	Retry-After:      <seconds>                 (429 only)
//	X-RateLimit-Limit: <capacity>               (the legacy trio, when legacy is true)
//	X-RateLimit-Remaining: <remaining>
//	X-RateLimit-Reset: <t>                      (delta seconds, same number as t)
//
// t is, for a denied result, max(1, ceil(retry_after)) — the same number as
// Retry-After, the wait until the request's cost fits; for an allowed result,
// ceil(reset_after) — the wait until the bucket is full again. w is omitted
// when the decider reports no window. Concurrency limits advertise
// qu="concurrent-requests" and no w. A limit name outside printable ASCII
// has those bytes replaced by '_'; '"' and '\' are escaped.

// DenialSeconds is the whole-second wait sent with a denial (Retry-After,
// and t in the RateLimit field): retry rounded up, and at least 1 so that
// no client is told to retry at once.
func DenialSeconds(retry time.Duration) int64 {
	return max(1, secondsUp(retry))
}

// resetSeconds is the t parameter (and X-RateLimit-Reset) for a result.
func resetSeconds(r Result) int64 {
	if !r.Allowed {
		return DenialSeconds(r.RetryAfter)
	}
	return secondsUp(r.ResetAfter)
}

// SetResultHeaders sets on h the RateLimit-Policy and RateLimit fields
// (and the legacy trio when legacy is true) for one result of a rate limit,
// in the formats above; it sets no Retry-After. It is what POST /v1/take
// sends, when its body asks ("headers": true), for the result HeaderResult
// picks, and Envoy's service the same fields without the trio.
func SetResultHeaders(h http.Header, r Result, legacy bool) {
	t := resetSeconds(r)
	remaining := max(0, r.Remaining)
	// Every value is written into one buffer and cut out of one string,
	// and set under its canonical key without Header.Set's
	// canonicalisation: this runs on every take.
	var ends [5]int
	var buf [192]byte // on the stack; append moves a longer limit's values to the heap
	b := sfString(buf[:0], r.Limit)
	name := len(b)
	b = append(b, ";q="...)
	b = strconv.AppendInt(b, r.Capacity, 10)
	if w := secondsUp(r.Window); w > 0 {
		b = append(b, ";w="...)
		b = strconv.AppendInt(b, w, 10)
	}
	ends[0] = len(b)
	b = append(b, b[:name]...)
	b = append(b, ";r="...)
	b = strconv.AppendInt(b, remaining, 10)
	b = append(b, ";t="...)
	b = strconv.AppendInt(b, t, 10)
	ends[1] = len(b)
	n := 2
	if legacy {
		b = strconv.AppendInt(b, r.Capacity, 10)
		ends[2] = len(b)
		b = strconv.AppendInt(b, remaining, 10)
		ends[3] = len(b)
		b = strconv.AppendInt(b, t, 10)
		ends[4] = len(b)
		n = 5
	}
	str := string(b)
	vals := make([]string, n)
	for i, start := 0, 0; i < n; i++ {
		vals[i], start = str[start:ends[i]], ends[i]
	}
	h["Ratelimit-Policy"] = vals[0:1:1]
	h["Ratelimit"] = vals[1:2:2]
	if legacy {
		h["X-Ratelimit-Limit"] = vals[2:3:3]
		h["X-Ratelimit-Remaining"] = vals[3:4:4]
		h["X-Ratelimit-Reset"] = vals[4:5:5]
	}
}

// SetLeaseHeaders sets on h the headers of an answer about a concurrency
// limit: RateLimit-Policy with q the permits and qu="concurrent-requests"
// always, and for a refusal the RateLimit field (r=0), Retry-After and,
// when legacy is true, the legacy trio, all with DenialSeconds of the
// Decider's retry hint.
func SetLeaseHeaders(h http.Header, limit string, resp AcquireResponse, legacy bool) {
	name := sfString(make([]byte, 0, 64), limit)
	b := append([]byte(nil), name...)
	b = append(b, ";q="...)
	b = strconv.AppendInt(b, resp.Permits, 10)
	b = append(b, `;qu="concurrent-requests"`...)
	h.Set("RateLimit-Policy", string(b))
	if resp.Granted {
		return
	}
	t := DenialSeconds(resp.RetryAfter)
	b = append(b[:0], name...)
	b = append(b, ";r=0;t="...)
	b = strconv.AppendInt(b, t, 10)
	h.Set("RateLimit", string(b))
	h.Set("Retry-After", strconv.FormatInt(t, 10))
	if legacy {
		h.Set("X-RateLimit-Limit", strconv.FormatInt(resp.Permits, 10))
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Reset", strconv.FormatInt(t, 10))
	}
}

// sfString appends s as a Structured Field String (RFC 8941 §3.3.3): quoted,
// with '"' and '\' escaped. Bytes outside printable ASCII cannot appear in an
// sf-string and become '_' (limit names come from the operator's limits file,
// so this is a guard, not a feature).
func sfString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 || c > 0x7e:
			b = append(b, '_')
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// SetHeaders sets on h the rate-limit headers that the HTTP API sends for a
// decision (see the package doc): RateLimit-Policy and RateLimit for the
// result /v1/take picks (the first denied, else the least remaining), the
// legacy trio when legacy is true, and, when resp is a denial, Retry-After.
// It sets nothing for a response without results. Other transports in front
// of an application (api/middleware) use it so that their answers carry the
// same headers as Weir's own.
func SetHeaders(h http.Header, resp TakeResponse, legacy bool) {
	res, ok := HeaderResult(resp.Results)
	if !ok {
		return
	}
	if !resp.Allowed && res.Allowed {
		res.Allowed = false // a single-check take: the overall decision is its decision
		res.RetryAfter = max(res.RetryAfter, resp.RetryAfter)
	}
	SetResultHeaders(h, res, legacy)
	if !resp.Allowed {
		h.Set("Retry-After", strconv.FormatInt(DenialSeconds(max(resp.RetryAfter, res.RetryAfter)), 10))
	}
}

// WriteDenied writes the answer /v1/check gives a denial, with status
// (normally 429): SetHeaders, Content-Type application/json,
// Cache-Control no-store, and the body
// {"error":"rate_limit_exceeded","limit":"...","retry_after_ms":N}, which
// names the limit and never the key.
func WriteDenied(w http.ResponseWriter, status int, resp TakeResponse, legacy bool) {
	SetHeaders(w.Header(), resp, legacy)
	res, _ := HeaderResult(resp.Results)
	WriteJSON(w, status, deniedBody{
		Error:        "rate_limit_exceeded",
		Limit:        res.Limit,
		RetryAfterMs: msUp(max(resp.RetryAfter, res.RetryAfter)),
	})
}

// deniedBody is /v1/check's denial: it names the limit but never the key.
type deniedBody struct {
	Error        string `json:"error"`
	Limit        string `json:"limit"`
	RetryAfterMs int64  `json:"retry_after_ms"`
}

// HeaderResult picks the result whose rate-limit headers a take carries
// (when it asks for them, or through Envoy's service): the first denied
// one, else the allowed one with the least remaining (the first of
// equals). ok is false when there are no results. Every front end that
// answers with headers picks this way.
func HeaderResult(results []Result) (r Result, ok bool) {
	best := -1
	for i, res := range results {
		if !res.Allowed {
			return res, true
		}
		if best < 0 || res.Remaining < results[best].Remaining {
			best = i
		}
	}
	if best < 0 {
		return Result{}, false
	}
	return results[best], true
}

// WriteJSON writes v as JSON with status, as the HTTP API writes every
// answer: Content-Type application/json, Cache-Control no-store (an answer
// is a decision or about one, never cacheable) and a trailing newline. Only
// types that always encode should be given; should v fail to encode, the
// answer is 500 {"error":"internal_error"}.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // only our own types are marshalled; they always encode
		status, b = http.StatusInternalServerError, []byte(`{"error":"internal_error"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
