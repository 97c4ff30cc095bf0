// Package ceiling holds the empty servers that Weir's HTTP and gRPC APIs
// are measured against: an HTTP handler that reads the body and writes a
// constant take answer, behind a server with only a header timeout, and a
// gRPC Take that allows without looking (GRPC). They are what the client,
// the transport, the kernel's loopback and the scheduler cost before any
// decision is made. The load generator serves them in a process of their
// own (`loadgen ceiling -kind http|grpc`, make bench's "÷ ceiling"), and
// node's BenchmarkHTTPServeVsCeiling and BenchmarkGRPCServeVsCeiling
// beside a node in one process, so both compare Weir with the same empty
// servers.
package ceiling

import (
	"io"
	"net/http"
	"time"
)

// Answer is what the ceiling answers every request with: the shape of a
// Weir take answer, so that a client decodes the same body it decodes
// from Weir. Only the body: Weir's answer also carries Cache-Control,
// which an empty handler does not write (and the RateLimit fields when a
// take asks for them, which the load generator's takes do not).
const Answer = `{"allowed":true,"retry_after_ms":0,"rules_version":1,"results":[{"limit":"bench","allowed":true,"remaining":999999999999,"capacity":1000000000000,"retry_after_ms":0,"reset_after_ms":0,"source":"owner"}]}`

// Handler drains the request and writes Answer.
func Handler(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, Answer)
}

// NewHTTPServer returns the ceiling's server: Handler with a header
// timeout and no other bound.
func NewHTTPServer() *http.Server {
	return &http.Server{Handler: http.HandlerFunc(Handler), ReadHeaderTimeout: 5 * time.Second}
}
