package httpapi

import (
	"net/http"
	"strconv"

	"github.com/weir-rl/weir/api"
)

// hot serves GET /v1/cluster/hot?limit=&n=.
func (h *handler) hot(op api.Operator) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		n := api.DefaultHotN
		if s := q.Get("n"); s != "" {
			v, err := strconv.Atoi(s)
			if err != nil || v < 1 || v > api.MaxHotN {
				detail := "n must be an integer from 1 to " + strconv.Itoa(api.MaxHotN)
				api.WriteJSON(w, http.StatusBadRequest, errorBody{Error: "invalid_request", Detail: detail})
				return
			}
			n = v
		}
		limit := q.Get("limit")
		if len(limit) > h.cfg.MaxKeyBytes {
			api.WriteJSON(w, http.StatusBadRequest, errorBody{Error: "invalid_request", Detail: "limit name too long"})
			return
		}
		out, err := op.Hot(r.Context(), limit, n)
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		api.WriteJSON(w, http.StatusOK, out)
	}
}

// stats serves GET /v1/cluster/stats.
func (h *handler) stats(op api.Operator) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		out, err := op.Stats(r.Context())
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		api.WriteJSON(w, http.StatusOK, out)
	}
}
