package httpapi

import "github.com/weir-rl/weir/api"

// wireInline is an inline limit in a JSON take: the limits file's field
// names.
type wireInline struct {
	Algorithm string `json:"algorithm"`
	Capacity  int64  `json:"capacity"`
	Burst     int64  `json:"burst"`
	Limit     int64  `json:"limit"`
	Rate      string `json:"rate"`
	Window    string `json:"window"`
}

// inlineOf converts a JSON inline limit; nil stays nil.
func (w *wireInline) inlineOf() *api.InlineLimit {
	if w == nil {
		return nil
	}
	return &api.InlineLimit{Algorithm: w.Algorithm, Capacity: w.Capacity, Burst: w.Burst, Limit: w.Limit, Rate: w.Rate, Window: w.Window}
}
