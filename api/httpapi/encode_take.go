package httpapi

import (
	"net/http"
	"slices"
	"strconv"
	"sync"

	"github.com/weir-rl/weir/api"
)

// writeTake writes a 200 take answer. It encodes out by hand when it can
// do so byte for byte like encoding/json (appendTakeJSON), and through
// WriteJSON otherwise.
func writeTake(w http.ResponseWriter, out *takeResponseJSON) {
	bp := takeBufs.Get().(*[]byte)
	defer takeBufs.Put(bp)
	b, ok := appendTakeJSON((*bp)[:0], out)
	if !ok {
		// A copy of the answer, so that out, which the caller may keep
		// on its stack, does not escape on the common path. Field by
		// field: TestAppendTakeJSONIsMarshal compares this path with
		// WriteJSON of every field.
		api.WriteJSON(w, http.StatusOK, &takeResponseJSON{
			Allowed: out.Allowed, RetryAfterMs: out.RetryAfterMs, RulesVersion: out.RulesVersion,
			Results: slices.Clone(out.Results), RingEpoch: out.RingEpoch,
		})
		return
	}
	setJSONHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(b, '\n'))
	if cap(b) <= maxTakeBuf { // an answer of many checks is not kept
		*bp = b
	}
}

// maxTakeBuf is the largest answer buffer takeBufs keeps.
const maxTakeBuf = 16 << 10

// takeBufs holds the buffers take answers are encoded into: the
// ResponseWriter copies what it is given, so a buffer is free again once
// Write returns.
var takeBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// setJSONHeaders sets what WriteJSON sets, with the keys already in
// canonical form and one allocation for both values.
func setJSONHeaders(h http.Header) {
	v := []string{"application/json", "no-store"}
	h["Content-Type"] = v[0:1:1]
	h["Cache-Control"] = v[1:2:2]
}

// appendTakeJSON appends json.Marshal(out) to b without reflection. It
// reports false, leaving the caller to use encoding/json, when a result
// carries evidence or a string needs escaping; TestAppendTakeJSONIsMarshal
// keeps the two identical, field by field.
func appendTakeJSON(b []byte, out *takeResponseJSON) ([]byte, bool) {
	b = append(b, `{"allowed":`...)
	b = strconv.AppendBool(b, out.Allowed)
	b = append(b, `,"retry_after_ms":`...)
	b = strconv.AppendInt(b, out.RetryAfterMs, 10)
	b = append(b, `,"rules_version":`...)
	b = strconv.AppendInt(b, out.RulesVersion, 10)
	b = append(b, `,"results":`...)
	if out.Results == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range out.Results {
			r := &out.Results[i]
			if r.Evidence != nil || !plainJSON(r.Limit) || !plainJSON(r.Source) {
				return b, false
			}
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"limit":"`...)
			b = append(b, r.Limit...)
			b = append(b, `","allowed":`...)
			b = strconv.AppendBool(b, r.Allowed)
			b = append(b, `,"remaining":`...)
			b = strconv.AppendInt(b, r.Remaining, 10)
			b = append(b, `,"capacity":`...)
			b = strconv.AppendInt(b, r.Capacity, 10)
			b = append(b, `,"retry_after_ms":`...)
			b = strconv.AppendInt(b, r.RetryAfterMs, 10)
			b = append(b, `,"reset_after_ms":`...)
			b = strconv.AppendInt(b, r.ResetAfterMs, 10)
			b = append(b, `,"source":"`...)
			b = append(b, r.Source...)
			b = append(b, `"}`...)
		}
		b = append(b, ']')
	}
	if out.RingEpoch != 0 {
		b = append(b, `,"ring_epoch":`...)
		b = strconv.AppendUint(b, out.RingEpoch, 10)
	}
	return append(b, '}'), true
}

// plainJSON reports whether encoding/json writes s unchanged between
// quotes: printable ASCII other than '"', '\\' and the HTML characters it
// escapes ('<', '>', '&').
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}
