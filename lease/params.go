package lease

import (
	"errors"
	"fmt"
	"io"
	"time"
)

// Sentinel errors. Callers compare with errors.Is; the messages carry the
// package prefix. A refusal (no permit, full queue) is not an error: it is an
// Outcome with Status Refused.
var (
	// ErrInvalid wraps every rejected argument: bad Params or Config, an
	// empty limit or key, a negative TTL or wait, a malformed Handoff.
	ErrInvalid = errors.New("lease: invalid argument")
	// ErrNotFound is returned by Renew for a lease that expired, was
	// released, was exported away, or never existed.
	ErrNotFound = errors.New("lease: not found")
	// ErrOverloaded is returned by Acquire when the table is at its
	// Config.MaxLeases (for a grant) or Config.MaxWaiters (for a park). The
	// node answers it with its failure policy, not with a 429.
	ErrOverloaded = errors.New("lease: table full")
)

// MaxFencing is the largest fencing floor that RaiseFencing, Import and
// Config.FirstFencing accept. Capping floors at 2^63 leaves 2^63 grants of
// headroom, so the counter cannot wrap and the Table never has to check.
const MaxFencing uint64 = 1 << 63

// MaxNameBytes bounds len(limit)+len(key) of a request, so that a lease id
// (which embeds both) stays bounded and ParseID can reject long garbage
// before decoding it.
const MaxNameBytes = 4096

// Params are the rules of one concurrency limit, the `kind: concurrency`
// entry of the limits file. The node passes them on every Acquire and Renew;
// the Table remembers the latest Params of each (limit, key) so that permits
// freed by Release or Expire are handed to parked waiters under those rules.
//
// The zero value is invalid (Permits and DefaultTTL must be set).
type Params struct {
	// Permits is how many leases of one (limit, key) may be held at once.
	// Range >= 1. When Permits shrinks, leases already held stay until they
	// are released or expire; no new lease is granted until fewer than
	// Permits are held.
	Permits int64
	// DefaultTTL is the lease lifetime used when the caller asks for none
	// (the limit's lease_ttl). Range > 0.
	DefaultTTL time.Duration
	// MaxTTL caps the lifetime a caller may ask for, on Acquire and Renew.
	// Zero means DefaultTTL; otherwise range >= DefaultTTL.
	MaxTTL time.Duration
	// QueueLength is how many callers of one (limit, key) may be parked
	// waiting for a permit (queue.length). Zero disables queueing: a busy
	// key refuses at once. Range >= 0.
	QueueLength int
	// MaxWait is the queue's age limit (queue.max_wait): a parked caller is
	// dropped after min(its own wait, MaxWait). Must be > 0 when
	// QueueLength > 0; range >= 0.
	MaxWait time.Duration
}

// Validate reports whether p is usable, as an error wrapping ErrInvalid. It
// changes nothing.
func (p Params) Validate() error {
	switch {
	case p.Permits < 1:
		return fmt.Errorf("%w: permits %d, want >= 1", ErrInvalid, p.Permits)
	case p.DefaultTTL <= 0:
		return fmt.Errorf("%w: lease ttl %v, want > 0", ErrInvalid, p.DefaultTTL)
	case p.MaxTTL != 0 && p.MaxTTL < p.DefaultTTL:
		return fmt.Errorf("%w: max ttl %v below lease ttl %v", ErrInvalid, p.MaxTTL, p.DefaultTTL)
	case p.QueueLength < 0:
		return fmt.Errorf("%w: queue length %d, want >= 0", ErrInvalid, p.QueueLength)
	case p.MaxWait < 0:
		return fmt.Errorf("%w: queue max wait %v, want >= 0", ErrInvalid, p.MaxWait)
	case p.QueueLength > 0 && p.MaxWait == 0:
		return fmt.Errorf("%w: queue length %d needs a max wait > 0", ErrInvalid, p.QueueLength)
	}
	return nil
}

// TTL returns the lifetime a lease gets when the caller asks for ttl: zero
// means DefaultTTL, and anything above MaxTTL (or DefaultTTL when MaxTTL is
// zero) is clamped down to it. ttl must not be negative.
func (p Params) TTL(ttl time.Duration) time.Duration {
	if ttl == 0 {
		ttl = p.DefaultTTL
	}
	maxTTL := p.MaxTTL
	if maxTTL == 0 {
		maxTTL = p.DefaultTTL
	}
	return min(ttl, maxTTL)
}

// Wait returns how long a caller asking to wait up to wait may stay parked:
// min(wait, MaxWait), or zero when the limit has no queue.
func (p Params) Wait(wait time.Duration) time.Duration {
	if p.QueueLength == 0 || wait <= 0 {
		return 0
	}
	return min(wait, p.MaxWait)
}

// Config sizes one Table. Get one from DefaultConfig or LocalConfig and
// change fields; the zero Config is invalid.
type Config struct {
	// MaxLeases caps the leases held in the table across all keys, so that
	// callers inventing keys cannot exhaust memory (docs/architecture.md §8.3). At
	// the cap Acquire returns ErrOverloaded instead of granting. Grants to
	// already parked waiters and imported leases are not refused, so the
	// table may exceed the cap by at most MaxWaiters plus what Import adds.
	// Default 1<<20; range >= 1.
	MaxLeases int
	// MaxWaiters caps the parked waiters across all keys. At the cap an
	// Acquire that would park returns ErrOverloaded. Default 1<<16;
	// range >= 0 (zero disables queueing everywhere).
	MaxWaiters int
	// FirstFencing is the first fencing token the table issues. A node may
	// seed it from the wall clock (for example microseconds since the
	// epoch) so that a restarted owner, which lost its counter, still
	// issues tokens above those it issued before it crashed. Default 1;
	// range [1, MaxFencing].
	FirstFencing uint64
	// Rand is where the random part of lease ids (NonceBytes per lease)
	// comes from; nil is crypto/rand.Reader, which production uses: ids
	// must be unguessable, since knowing one lets a caller renew or release
	// that lease. Tests pass a seeded source. A read from it must not fail
	// (crypto/rand's never does); a failing read panics.
	Rand io.Reader
}

// DefaultConfig returns the production sizes: a million leases and 65536
// parked waiters per node, fencing tokens from 1.
func DefaultConfig() Config {
	return Config{MaxLeases: 1 << 20, MaxWaiters: 1 << 16, FirstFencing: 1}
}

// LocalConfig returns small sizes for tests and single-machine clusters.
func LocalConfig() Config {
	return Config{MaxLeases: 1024, MaxWaiters: 256, FirstFencing: 1}
}

// Validate reports whether c is usable, as an error wrapping ErrInvalid. It
// changes nothing.
func (c Config) Validate() error {
	switch {
	case c.MaxLeases < 1:
		return fmt.Errorf("%w: max leases %d, want >= 1", ErrInvalid, c.MaxLeases)
	case c.MaxWaiters < 0:
		return fmt.Errorf("%w: max waiters %d, want >= 0", ErrInvalid, c.MaxWaiters)
	case c.FirstFencing < 1 || c.FirstFencing > MaxFencing:
		return fmt.Errorf("%w: first fencing token %d, want in [1, 2^63]", ErrInvalid, c.FirstFencing)
	}
	return nil
}
