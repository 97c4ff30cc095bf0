package main

import (
	"context"
	"log/slog"
)

// dedupHandler drops an attribute that repeats, key and value, one the
// logger already carries: serve names its logger's node, and parts of the
// node that are also used as libraries name it again (the gossip
// component, the "serving" line), which printed node=vm node=vm. An
// attribute with the same key and another value is kept: it says
// something new. Attributes inside a group are passed through unchanged.
// It is safe for concurrent use when the handler it wraps is.
type dedupHandler struct {
	next    slog.Handler
	carried []slog.Attr // the logger's attributes so far, outside any group
	grouped bool        // WithGroup was called: stop comparing
}

// newDedupHandler wraps next.
func newDedupHandler(next slog.Handler) slog.Handler { return &dedupHandler{next: next} }

// Enabled implements slog.Handler.
func (h *dedupHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

// carries reports whether a, key and value, is already carried.
func (h *dedupHandler) carries(a slog.Attr) bool {
	if h.grouped {
		return false
	}
	for _, c := range h.carried {
		if c.Key == a.Key && c.Value.Equal(a.Value) {
			return true
		}
	}
	return false
}

// Handle implements slog.Handler.
func (h *dedupHandler) Handle(ctx context.Context, r slog.Record) error {
	if len(h.carried) == 0 || h.grouped {
		return h.next.Handle(ctx, r)
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if !h.carries(a) {
			out.AddAttrs(a)
		}
		return true
	})
	return h.next.Handle(ctx, out)
}

// WithAttrs implements slog.Handler.
func (h *dedupHandler) WithAttrs(as []slog.Attr) slog.Handler {
	if h.grouped {
		return &dedupHandler{next: h.next.WithAttrs(as), grouped: true}
	}
	keep := make([]slog.Attr, 0, len(as))
	for _, a := range as {
		if !h.carries(a) {
			keep = append(keep, a)
		}
	}
	carried := append(append([]slog.Attr(nil), h.carried...), keep...)
	return &dedupHandler{next: h.next.WithAttrs(keep), carried: carried}
}

// WithGroup implements slog.Handler.
func (h *dedupHandler) WithGroup(name string) slog.Handler {
	return &dedupHandler{next: h.next.WithGroup(name), carried: h.carried, grouped: true}
}
