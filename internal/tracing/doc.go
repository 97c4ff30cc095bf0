// Package tracing is Weir's OpenTelemetry instrumentation: a thin layer over
// the OpenTelemetry SDK that starts the three spans of a decision (the
// decision where a request arrives, its forward to the key's owner, and the
// owner's step), carries W3C trace context from callers (HTTP traceparent
// header, gRPC metadata) and across the peer forward, and exports over
// OTLP/gRPC.
//
// The contract:
//
//   - Off costs nothing. The zero Tracer (and New with no endpoint) is the
//     null object: every method returns its input context and a zero Span,
//     whose methods do nothing, without touching the SDK or allocating.
//   - Sampling is parent-based with a ratio for root spans (Config), and a
//     span is started only when it can be sampled: with ratio 0, a request
//     whose caller did not send a sampled traceparent skips the SDK
//     entirely, so tracing on at 0 % costs a context lookup per decision.
//   - The forward carries its span's traceparent in the peer request itself
//     (one per request of a batch), and only when that span is sampled; an
//     owner starts its span only for a request that carries one. A batch
//     RPC has no span of its own: its requests' owner spans record the
//     batch size.
//   - Spans never carry keys (tenant data): limit names, op, outcome,
//     source, node and peer addresses only, like the metrics.
//
// A Tracer is safe for concurrent use. New starts nothing; Start opens the
// exporter and its batch processor's goroutine, Shutdown flushes and stops
// them.
package tracing
