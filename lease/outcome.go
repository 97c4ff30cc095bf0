package lease

import (
	"fmt"
	"time"
)

// Request asks the Table for one permit of (Limit, Key).
type Request struct {
	// Limit and Key name the (limit, key) whose permits are shared. Both
	// must be non-empty and together at most MaxNameBytes long.
	Limit, Key string
	// Holder is free text for logs and status (who holds the lease). It is
	// carried in Grant and Snapshot, never interpreted.
	Holder string
	// TTL is the lifetime asked for: zero means Params.DefaultTTL, and it
	// is clamped to Params.MaxTTL (see Params.TTL). Must not be negative.
	TTL time.Duration
	// Wait is how long the caller may stay parked when no permit is free:
	// zero means refuse at once; it is clamped to Params.MaxWait (see
	// Params.Wait). Must not be negative.
	Wait time.Duration
}

func (r Request) validate() error {
	switch {
	case r.Limit == "" || r.Key == "":
		return fmt.Errorf("%w: empty limit or key", ErrInvalid)
	case len(r.Limit)+len(r.Key) > MaxNameBytes:
		return fmt.Errorf("%w: limit and key longer than %d bytes", ErrInvalid, MaxNameBytes)
	case r.TTL < 0:
		return fmt.Errorf("%w: negative ttl %v", ErrInvalid, r.TTL)
	case r.Wait < 0:
		return fmt.Errorf("%w: negative wait %v", ErrInvalid, r.Wait)
	}
	return nil
}

// Grant describes one lease: as granted, renewed, or expired.
type Grant struct {
	// ID is the opaque lease id. It is unique, it routes to the owner by
	// itself (ParseID recovers Limit and Key), and it is what Renew and
	// Release take.
	ID string
	// Limit and Key are the (limit, key) the lease counts against.
	Limit, Key string
	// Holder is the Request's Holder.
	Holder string
	// Fencing is the lease's fencing token. Tokens strictly increase per
	// (limit, key) across grants, releases, expiries, and handoffs that
	// carry the old owner's floor (Import, RaiseFencing). A renewal keeps
	// the token. Storage guarded by a lease should reject writes carrying a
	// token lower than one it has seen.
	Fencing uint64
	// Expires is the instant the lease stops counting, on the owner's clock:
	// it is valid for now < Expires.
	Expires time.Time
	// TTL is the lifetime the lease was granted or last renewed with.
	TTL time.Duration
	// Waiter is the ticket of the parked Acquire this grant satisfies, or
	// zero for a grant made directly by Acquire (and for expired leases).
	Waiter uint64
}

// Status is what Acquire did.
type Status uint8

const (
	// Refused means no permit was granted and the caller was not parked.
	// It is the zero Status, so an Outcome left unset denies.
	Refused Status = iota
	// Granted means Outcome.Grant holds a new lease.
	Granted
	// Queued means the caller is parked under Outcome.Waiter; a later
	// Events.Granted or Events.Dropped names the ticket.
	Queued
)

// String returns "refused", "granted" or "queued".
func (s Status) String() string {
	switch s {
	case Granted:
		return "granted"
	case Queued:
		return "queued"
	default:
		return "refused"
	}
}

// Reason says why Acquire refused.
type Reason uint8

const (
	// ReasonNone is the Reason of an Outcome that was not refused.
	ReasonNone Reason = iota
	// ReasonBusy means every permit is held and the caller did not ask to
	// wait, or the limit has no queue.
	ReasonBusy
	// ReasonQueueFull means every permit is held and the key's queue already
	// holds Params.QueueLength waiters: rejected at once.
	ReasonQueueFull
)

// String returns "", "busy" or "queue_full".
func (r Reason) String() string {
	switch r {
	case ReasonBusy:
		return "busy"
	case ReasonQueueFull:
		return "queue_full"
	default:
		return ""
	}
}

// Outcome is the answer to one Acquire. It is returned by value: it is
// small, and a pointer would cost an allocation per decision.
type Outcome struct {
	// Status is granted, queued or refused.
	Status Status
	// Grant is the new lease when Status is Granted.
	Grant Grant
	// Waiter is the caller's ticket when Status is Queued (never zero then).
	Waiter uint64
	// Deadline is, when Status is Queued, the instant at which the waiter
	// is dropped if no permit has reached it.
	Deadline time.Time
	// Reason says why, when Status is Refused.
	Reason Reason
	// RetryAfter is, when Status is Refused, the time until the earliest
	// expiry among the key's leases: no permit can free by expiry sooner
	// (a release can). It is a hint, never zero when refused.
	RetryAfter time.Duration
	// Held is the number of leases of the key after the decision, for the
	// remaining-permits figure of a response.
	Held int64
}

// Events are the side effects of a step: what happened because time moved
// on to the step's now, and what a freed permit caused. Every step that
// takes a now returns them, also when it returns an error, and the node must
// act on all of them: wake Granted and Dropped waiters, count Expired.
// Slices are nil when empty, so a quiet step allocates nothing.
type Events struct {
	// Expired are the leases that ran out, in expiry order, with the
	// Expires they had.
	Expired []Grant
	// Granted are new leases handed to parked waiters (Grant.Waiter set),
	// in the order they were made, which is FIFO per key.
	Granted []Grant
	// Dropped are tickets of parked waiters that left the queue without a
	// permit: their wait or the queue's MaxWait ran out, or (from Export)
	// their key was handed to another node.
	Dropped []uint64
}

// Empty reports whether e holds nothing.
func (e Events) Empty() bool {
	return len(e.Expired) == 0 && len(e.Granted) == 0 && len(e.Dropped) == 0
}
