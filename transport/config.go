package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// Limits on Config fields, checked by Validate.
const (
	maxWindow          = 100 * time.Millisecond
	maxMaxBatch        = 4096
	maxDeadline        = time.Minute
	maxHandoffDeadline = 10 * time.Minute
)

// Config configures a Pool. Build it with DefaultConfig or LocalConfig and
// change fields; Validate checks it without changing it.
type Config struct {
	// Self is this node's name, sent as the from of every call so the
	// owner can tell who forwarded. Default "" (anonymous).
	Self string
	// Window is the longest a forward waits to join a batch. A forward to
	// an idle peer (nothing in flight) is sent at once; while a batch to
	// the peer is in flight, forwards collect and leave together when it
	// is answered, at MaxBatch, or Window after the first of them (see
	// Batcher). Default 200µs; range 0 to 100ms; 0 disables batching.
	Window time.Duration
	// MaxBatch is the size cap: a batch that reaches it is sent at once.
	// Default 128; range 1 to 4096.
	MaxBatch int
	// Deadline bounds one forward whose caller's context has no deadline,
	// from Do's call to the reply; a caller's own deadline replaces it
	// (see Pool.Do). A request with Wait > 0 gets Deadline + Wait.
	// Default 250ms; range (0, 1m]. (It was 50ms: on a loaded two-core
	// host a settled four-node cluster at half its capacity then answered
	// tens of callers a minute limiter_overloaded for stalls of 50–250ms.)
	Deadline time.Duration
	// SettleDeadline replaces Deadline for a forward the sender marks as
	// made while the ring settles (node/cluster does so within its
	// handoff window after a membership change, when a key's state may
	// be moving between owners: a pull before the owner decides is
	// bounded work, not overload). Not used by Pool itself: the sender
	// sets it as the context's deadline (see Settle). Default 750ms, inside
	// a forward-auth proxy's usual 1s (the shipped nginx check's); range
	// [0, 1m]; below Deadline (0 included) it acts as Deadline.
	SettleDeadline time.Duration
	// HandoffDeadline bounds one Handoff RPC (one chunk of entries).
	// Default 5s; range (0, 10m].
	HandoffDeadline time.Duration
	// Credentials secure every connection (mutually authenticated TLS
	// 1.3); nil dials in plaintext, which only a Server without
	// Credentials accepts.
	Credentials *Credentials
	// Dialer opens connections to peers; nil dials TCP. Tests pass an
	// in-memory or simulated network's dialer.
	Dialer func(ctx context.Context, addr string) (net.Conn, error)
	// Observer receives per-batch and per-forward events; nil ignores them.
	Observer Observer
}

// Observer is told about forwards, for metrics. The node implements it with
// Prometheus. Its methods are called from many goroutines at once and must
// not block.
type Observer interface {
	// BatchSent is called once per Batch RPC, just before it is sent,
	// with the number of requests in it.
	BatchSent(peer string, size int)
	// Forwarded is called once per Do that reached a peer's queue, with
	// the time from Do's call to its return and the error it returned
	// (nil for a reply).
	Forwarded(peer string, d time.Duration, err error)
}

// DefaultConfig returns the production defaults: a 200µs window, batches of
// at most 128, a 250ms forward deadline (750ms while the ring settles) and a
// 5s handoff deadline.
func DefaultConfig() Config {
	return Config{
		Window:          200 * time.Microsecond,
		MaxBatch:        128,
		Deadline:        250 * time.Millisecond,
		SettleDeadline:  750 * time.Millisecond,
		HandoffDeadline: 5 * time.Second,
	}
}

// LocalConfig returns DefaultConfig with a 1s forward deadline, for tests
// on one machine where the race detector and a loaded CPU can stretch a
// loopback round trip far beyond 250ms.
func LocalConfig() Config {
	c := DefaultConfig()
	c.Deadline = time.Second
	return c
}

// Settle returns the bound of a forward made while the ring settles for a
// caller without a deadline: SettleDeadline, or Deadline when that is
// longer.
func (c Config) Settle() time.Duration { return max(c.SettleDeadline, c.Deadline) }

// Validate reports the first field out of range. It changes nothing.
func (c Config) Validate() error {
	switch {
	case c.Window < 0 || c.Window > maxWindow:
		return fmt.Errorf("transport: window %v out of range [0, %v]", c.Window, maxWindow)
	case c.MaxBatch < 1 || c.MaxBatch > maxMaxBatch:
		return fmt.Errorf("transport: max batch %d out of range [1, %d]", c.MaxBatch, maxMaxBatch)
	case c.Deadline <= 0 || c.Deadline > maxDeadline:
		return fmt.Errorf("transport: deadline %v out of range (0, %v]", c.Deadline, maxDeadline)
	case c.SettleDeadline < 0 || c.SettleDeadline > maxDeadline:
		return fmt.Errorf("transport: settle deadline %v out of range [0, %v]", c.SettleDeadline, maxDeadline)
	case c.HandoffDeadline <= 0 || c.HandoffDeadline > maxHandoffDeadline:
		return fmt.Errorf("transport: handoff deadline %v out of range (0, %v]", c.HandoffDeadline, maxHandoffDeadline)
	}
	return nil
}

// Errors returned by Pool.
var (
	// ErrClosed is returned by a Pool after Close.
	ErrClosed = errors.New("transport: pool closed")
	// ErrDropped is returned to forwards queued for a peer that Drop
	// removed before they were sent.
	ErrDropped = errors.New("transport: peer dropped")
	// ErrInvalidOp is returned by Do for a Request whose Op is not defined.
	ErrInvalidOp = errors.New("transport: invalid op")
	// ErrDeadline is wrapped by Do's error when the forward's deadline
	// passed before the owner answered: the owner may be slow, not gone.
	// It wraps context.DeadlineExceeded.
	ErrDeadline = fmt.Errorf("transport: no reply within the forward deadline: %w", context.DeadlineExceeded)
)
