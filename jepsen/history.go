package jepsen

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
)

// Outcome is what a client learned about one request.
type Outcome string

const (
	// Allowed is a definite admission: HTTP 200 with "allowed": true.
	Allowed Outcome = "allowed"
	// Denied is a definite refusal: HTTP 200 with "allowed": false.
	Denied Outcome = "denied"
	// Failed is a definite error that spent nothing: a 4xx or 503 answer,
	// or a connection the server never accepted.
	Failed Outcome = "error"
	// Timeout is indeterminate: the request may or may not have been
	// decided (deadline passed, connection reset after sending).
	Timeout Outcome = "timeout"
)

// Op is one recorded request. Call and Return are nanoseconds since the
// run's base on the runner's monotonic clock.
type Op struct {
	ID     int64   `json:"id"`
	Client int     `json:"client"`
	Node   string  `json:"node"` // the node asked
	Limit  string  `json:"limit"`
	Key    string  `json:"key"`
	Cost   int64   `json:"cost"`
	Call   int64   `json:"call_ns"`
	Return int64   `json:"return_ns"`
	Result Outcome `json:"result"`
	Source string  `json:"source,omitempty"` // owner | fallback, for decisions
	Status int     `json:"status,omitempty"` // HTTP status, 0 when none
	Err    string  `json:"err,omitempty"`
	// Evidence a take's decision carries (HTTP 200 answers): the node
	// whose bucket decided, its decision clock in Unix ns, the bucket
	// instance (an opaque id that changes whenever the bucket's state is
	// replaced or changed other than by a take: created by a handoff,
	// merged, refunded, or the node restarted), and the bucket's answer.
	// The linearizability checker replays each instance's decisions.
	Decider      string `json:"decider,omitempty"`
	DecidedAt    int64  `json:"decided_at_ns,omitempty"`
	Instance     string `json:"instance,omitempty"`
	Remaining    int64  `json:"remaining,omitempty"`
	ResetAfterMs int64  `json:"reset_after_ms,omitempty"`
	// Kind is empty for a take; lease ops are KindAcquire, KindRenew and
	// KindRelease, with the lease's fields below (Limit, Key and Client
	// are set as for a take; Cost is 0).
	Kind    string `json:"kind,omitempty"`
	LeaseID string `json:"lease_id,omitempty"` // granted, renewed or released lease
	Fencing uint64 `json:"fencing,omitempty"`  // the grant's fencing token
	TTLms   int64  `json:"ttl_ms,omitempty"`   // lifetime granted by an acquire or a renew
}

// The lease op kinds. An acquire's Result is Allowed when granted (201),
// Denied when refused (429); a renew's is Allowed (200) or Denied (404,
// expired or unknown); a release's is Allowed (204); an abandon's is
// Allowed. Failed and Timeout mean what they mean for a take.
const (
	KindAcquire = "acquire"
	KindRenew   = "renew"
	KindRelease = "release"
	// KindAbandon records a holder that dies holding a lease: it never
	// renews or releases it (Call = Return = the moment it gave up), so the
	// owner must reclaim the permit when the lease expires.
	KindAbandon = "abandon"
)

// TakeOps returns the ops of ops that are takes (Kind empty), in order.
func TakeOps(ops []Op) []Op {
	out := make([]Op, 0, len(ops))
	for _, o := range ops {
		if o.Kind == "" {
			out = append(out, o)
		}
	}
	return out
}

// LeaseOps returns the ops of ops that are lease ops, in order.
func LeaseOps(ops []Op) []Op {
	var out []Op
	for _, o := range ops {
		if o.Kind != "" {
			out = append(out, o)
		}
	}
	return out
}

// Determinate reports whether the outcome is known: allowed, denied or a
// definite error.
func (o Op) Determinate() bool { return o.Result != Timeout }

// Event is a nemesis or harness event on the same time base as the ops.
type Event struct {
	At     int64  `json:"at_ns"`
	Kind   string `json:"kind"` // inject | heal | converged | phase
	Detail string `json:"detail"`
}

// WriteJSONL writes ops one JSON object a line.
func WriteJSONL(w io.Writer, ops []Op) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for i := range ops {
		if err := enc.Encode(&ops[i]); err != nil {
			return fmt.Errorf("jepsen: write history: %w", err)
		}
	}
	return bw.Flush()
}

// ReadJSONL reads a history written by WriteJSONL.
func ReadJSONL(r io.Reader) ([]Op, error) {
	var ops []Op
	dec := json.NewDecoder(r)
	for {
		var o Op
		err := dec.Decode(&o)
		if err == io.EOF {
			return ops, nil
		}
		if err != nil {
			return ops, fmt.Errorf("jepsen: read history: %w", err)
		}
		ops = append(ops, o)
	}
}
