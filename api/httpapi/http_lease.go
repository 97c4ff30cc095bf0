package httpapi

import (
	"net/http"
	"net/url"
	"time"

	"github.com/weir-rl/weir/api"
)

type leaseJSON struct {
	ID           string `json:"id"`
	FencingToken uint64 `json:"fencing_token"`
	TTLMs        int64  `json:"ttl_ms"`
	// Source is set only when the request asked for evidence.
	Source string `json:"source,omitempty"`
}

// queuedWriteGrace is the time a queued lease acquire's response gets to be
// written after its wait.
const queuedWriteGrace = 30 * time.Second

type renewJSON struct {
	TTLMs int64 `json:"ttl_ms"`
}

// acquire serves POST /v1/leases: 201 with the lease, or 429 when no permit
// is free (after waiting up to wait_ms).
func (h *handler) acquire(w http.ResponseWriter, r *http.Request) {
	body, ok := h.readBody(w, r)
	if !ok {
		return
	}
	req, evidence, err := decodeAcquireRequest(body, h.lim)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if req.Wait > 0 {
		// The server's write timeout runs from the end of the headers; a
		// queued acquire may wait longer than it before its answer. Wait
		// is at most api.MaxLeaseWait, so the sum cannot overflow.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(min(req.Wait, api.MaxLeaseWait) + queuedWriteGrace))
	}
	resp, err := h.d.Acquire(r.Context(), req)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	api.SetLeaseHeaders(w.Header(), req.Limit, resp, h.cfg.LegacyHeaders)
	source := ""
	if evidence {
		source = resp.Source.String()
	}
	if !resp.Granted {
		api.WriteJSON(w, http.StatusTooManyRequests, denialBody{
			Error:        "concurrency_limit_exceeded",
			Limit:        req.Limit,
			RetryAfterMs: api.MillisUp(resp.RetryAfter),
			Source:       source,
		})
		return
	}
	w.Header().Set("Location", "/v1/leases/"+url.PathEscape(resp.ID))
	api.WriteJSON(w, http.StatusCreated, leaseJSON{ID: resp.ID, FencingToken: resp.FencingToken, TTLMs: api.MillisDown(resp.TTL), Source: source})
}

// renew serves POST /v1/leases/{id}/renew with an optional {"ttl_ms":N}:
// 200 with the new lifetime, 404 when the lease expired or is unknown.
func (h *handler) renew(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := api.ValidateLeaseID(id); err != nil {
		h.writeError(w, r, err)
		return
	}
	body, ok := h.readBody(w, r)
	if !ok {
		return
	}
	ttl, err := decodeRenewRequest(body)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	got, err := h.d.Renew(r.Context(), id, ttl)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, renewJSON{TTLMs: api.MillisDown(got)})
}

// release serves DELETE /v1/leases/{id}: 204, also when already released.
func (h *handler) release(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := api.ValidateLeaseID(id); err != nil {
		h.writeError(w, r, err)
		return
	}
	if err := h.d.Release(r.Context(), id); err != nil {
		h.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}
