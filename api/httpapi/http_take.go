package httpapi

import (
	"net/http"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/internal/tracing"
)

// evidenceOf returns ev's wire form, nil when no bucket decided.
func evidenceOf(ev api.Evidence) *evidenceJSON {
	if ev.Run == "" {
		return nil
	}
	return &evidenceJSON{Decider: ev.Decider(), DecidedAtNs: ev.DecidedAt.UnixNano(), Instance: ev.Instance()}
}

// resultJSON is one Result on the wire, fields in the order of docs/architecture.md §5.1.
type resultJSON struct {
	Limit        string `json:"limit"`
	Allowed      bool   `json:"allowed"`
	Remaining    int64  `json:"remaining"`
	Capacity     int64  `json:"capacity"`
	RetryAfterMs int64  `json:"retry_after_ms"`
	ResetAfterMs int64  `json:"reset_after_ms"`
	Source       string `json:"source"`
	// Evidence is sent only when the request asks for it and a bucket
	// decided.
	Evidence *evidenceJSON `json:"evidence,omitempty"`
}

// evidenceJSON is an Evidence on the wire.
type evidenceJSON struct {
	Decider     string `json:"decider"`
	DecidedAtNs int64  `json:"decided_at_ns"`
	Instance    string `json:"instance"`
}

type takeResponseJSON struct {
	Allowed      bool         `json:"allowed"`
	RetryAfterMs int64        `json:"retry_after_ms"`
	RulesVersion int64        `json:"rules_version"`
	Results      []resultJSON `json:"results"`
	RingEpoch    uint64       `json:"ring_epoch,omitempty"` // zero (omitted) for a node that is not clustered
}

func toResultJSON(r api.Result) resultJSON {
	return resultJSON{
		Limit:        r.Limit,
		Allowed:      r.Allowed,
		Remaining:    r.Remaining,
		Capacity:     r.Capacity,
		RetryAfterMs: api.MillisUp(r.RetryAfter),
		ResetAfterMs: api.MillisUp(r.ResetAfter),
		Source:       r.Source.String(),
	}
}

// take serves POST /v1/take: 200 whenever a decision was made, allowed or
// not; with the rate-limit headers of the most constraining check when the
// body asks for them ("headers":true).
func (h *handler) take(w http.ResponseWriter, r *http.Request) {
	body, ok := h.readBody(w, r)
	if !ok {
		return
	}
	checks, opts, err := decodeTakeRequest(body, h.lim)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	resp, err := h.d.Take(tracing.FromHTTP(r.Context(), r.Header), checks)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if opts.headers {
		if res, ok := api.HeaderResult(resp.Results); ok {
			api.SetResultHeaders(w.Header(), res, h.cfg.LegacyHeaders)
		}
	}
	var one [1]resultJSON // the common single check, kept off the heap
	results := one[:]
	if len(resp.Results) != len(one) {
		results = make([]resultJSON, len(resp.Results))
	}
	out := takeResponseJSON{
		Allowed:      resp.Allowed,
		RetryAfterMs: api.MillisUp(resp.RetryAfter),
		RulesVersion: resp.RulesVersion,
		Results:      results,
		RingEpoch:    resp.RingEpoch,
	}
	for i, res := range resp.Results {
		out.Results[i] = toResultJSON(res)
		if opts.evidence {
			out.Results[i].Evidence = evidenceOf(res.Evidence)
		}
	}
	writeTake(w, &out)
}

// check serves GET /v1/check for forward-auth proxies: 200 allowed, 429
// (or the deny_status asked for) denied, both with rate-limit headers; 503
// when the limit fails closed.
func (h *handler) check(w http.ResponseWriter, r *http.Request) {
	q, err := decodeCheckQuery(r.URL.RawQuery, r.Header, h.lim)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	c := q.Check
	resp, err := h.d.Take(tracing.FromHTTP(r.Context(), r.Header), []api.Check{c})
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if len(resp.Results) == 0 {
		h.logger.Error("api: decider returned no result for a check", "limit", c.Limit)
		api.WriteJSON(w, http.StatusInternalServerError, errorBody{Error: "internal_error"})
		return
	}
	res := resp.Results[0]
	if res.Limit == "" {
		res.Limit = c.Limit
	}
	res.Allowed = resp.Allowed // one check: the overall decision is its decision
	resp.Results = []api.Result{res}
	if !res.Allowed {
		api.WriteDenied(w, q.denyStatus, resp, h.cfg.LegacyHeaders)
		return
	}
	api.SetHeaders(w.Header(), resp, h.cfg.LegacyHeaders)
	api.WriteJSON(w, http.StatusOK, toResultJSON(res))
}
