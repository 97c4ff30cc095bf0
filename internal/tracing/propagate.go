package tracing

import (
	"context"
	"encoding/hex"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"
)

// Header is the W3C trace context header (and gRPC metadata key).
const Header = "traceparent"

// stateHeader is the W3C tracestate header.
const stateHeader = "tracestate"

var w3c propagation.TraceContext

// FromHTTP returns ctx with the caller's W3C trace context from h
// (traceparent, tracestate) as the remote parent. Without a traceparent
// header it returns ctx itself and allocates nothing; a malformed one is
// ignored.
func FromHTTP(ctx context.Context, h http.Header) context.Context {
	if len(h[http.CanonicalHeaderKey(Header)]) == 0 {
		return ctx
	}
	return w3c.Extract(ctx, propagation.HeaderCarrier(h))
}

// FromGRPC returns ctx with the caller's W3C trace context from its
// incoming gRPC metadata (traceparent, tracestate) as the remote parent.
// Without traceparent metadata it returns ctx itself; a malformed one is
// ignored.
func FromGRPC(ctx context.Context) context.Context {
	tp := metadata.ValueFromIncomingContext(ctx, Header)
	if len(tp) == 0 {
		return ctx
	}
	c := mdCarrier{parent: tp[0]}
	if ts := metadata.ValueFromIncomingContext(ctx, stateHeader); len(ts) > 0 {
		c.state = ts[0]
	}
	return w3c.Extract(ctx, c)
}

// mdCarrier is the two trace context values read from gRPC metadata.
type mdCarrier struct{ parent, state string }

func (c mdCarrier) Get(key string) string {
	switch key {
	case Header:
		return c.parent
	case stateHeader:
		return c.state
	}
	return ""
}

func (mdCarrier) Set(string, string) {}

func (mdCarrier) Keys() []string { return []string{Header, stateHeader} }

// FormatParent returns sc as a W3C traceparent value (version 00).
func FormatParent(sc trace.SpanContext) string {
	var b [55]byte
	copy(b[:3], "00-")
	tid, sid := sc.TraceID(), sc.SpanID()
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{byte(sc.TraceFlags())})
	return string(b[:])
}

// ParseParent parses a W3C traceparent value into a remote span context;
// ok is false when it is malformed or names an invalid trace or span.
func ParseParent(traceparent string) (trace.SpanContext, bool) {
	sc := trace.SpanContextFromContext(w3c.Extract(context.Background(), mdCarrier{parent: traceparent}))
	return sc, sc.IsValid()
}
