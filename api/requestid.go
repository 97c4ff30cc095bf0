package api

import "context"

// MaxRequestIDBytes bounds a take's request id (weir.v1.TakeRequest
// request_id).
const MaxRequestIDBytes = 32

// requestIDKey is the context key of a take's request id.
type requestIDKey struct{}

// WithRequestID returns ctx carrying a take's request id, which the
// transports set from the caller's request and a Decider reads with
// RequestID: the owner deciding the take answers a repeated id with its
// first decision (deduplication). An empty id is no id.
func WithRequestID(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID returns the request id WithRequestID put in ctx, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// WithoutRequestID returns ctx with no request id, for a part of a take
// that must not be deduplicated.
func WithoutRequestID(ctx context.Context) context.Context {
	return context.WithValue(ctx, requestIDKey{}, "")
}
