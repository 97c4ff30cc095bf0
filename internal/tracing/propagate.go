package tracing

import (
	"context"
	"encoding/hex"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/tap"
)

// Header is the W3C trace context header (and gRPC metadata key).
const Header = "traceparent"

// canonicalHeader is Header as net/http keys it.
const canonicalHeader = "Traceparent"

// stateHeader is the W3C tracestate header.
const stateHeader = "tracestate"

var w3c propagation.TraceContext

// FromHTTP returns ctx with the caller's W3C trace context from h
// (traceparent, tracestate) as the remote parent. Without a traceparent
// header it returns ctx itself and allocates nothing; a malformed one is
// ignored.
func FromHTTP(ctx context.Context, h http.Header) context.Context {
	if len(h[canonicalHeader]) == 0 {
		return ctx
	}
	return w3c.Extract(ctx, propagation.HeaderCarrier(h))
}

// GRPCServerOptions are the options that make a gRPC server accept its
// callers' W3C trace context (traceparent, tracestate metadata) as the
// parent of what it decides, for every service and method (weir.v1.Limiter
// and Envoy's rate limit service alike); none when tracing is off. The
// context is read in a tap handle, from the header map gRPC already
// decoded: one map lookup for a call without traceparent.
func (t *Tracer) GRPCServerOptions() []grpc.ServerOption {
	if t.tr == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.InTapHandle(fromGRPC)}
}

// fromGRPC returns ctx with the caller's W3C trace context from its
// header metadata md as the remote parent. Without traceparent metadata it
// returns ctx itself; a malformed one is ignored. It never fails.
func fromGRPC(ctx context.Context, info *tap.Info) (context.Context, error) {
	tp := info.Header[Header] // gRPC lower-cases header names
	if len(tp) == 0 {
		return ctx, nil
	}
	c := mdCarrier{parent: tp[0]}
	if ts := info.Header[stateHeader]; len(ts) > 0 {
		c.state = ts[0]
	}
	return w3c.Extract(ctx, c), nil
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
