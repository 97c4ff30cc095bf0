package api

import "time"

// AllotRequest asks a bucket's owner for an allotment: a slice of the
// bucket's tokens, debited at once, that the holder decides takes from in
// its own memory until the allotment expires.
type AllotRequest struct {
	Limit, Key string
	// Holder names the holder's allotments: a node's name, or a client's
	// id (one per process). A refresh replaces the holding it had.
	Holder string
	// Want is how many more tokens the holder asks for, at least 1.
	Want int64
	// Demand is the holder's rate of takes on the key, in tokens per
	// second: the weight of its share when holders compete.
	Demand float64
	// Unspent is what is left of the allotment the holder has as it asks:
	// an upper bound, since it may keep spending while the call runs.
	Unspent int64
	// Seq is the Seq of the last answer the holder got for the key, 0 when
	// it holds nothing. The owner trusts Unspent only when Seq matches the
	// holding it recorded: an ask that crossed a lost answer (the holder
	// gave up waiting, the owner granted anyway) never shrinks what the
	// owner counts as outstanding.
	Seq uint64
}

// AllotResponse is an owner's answer to an AllotRequest.
type AllotResponse struct {
	// Tokens come on top of the holder's unspent tokens. Zero with
	// RetryAfter zero means its share is nothing for now: it sends its
	// takes to the owner.
	Tokens int64
	// TTL is the whole allotment's life, counted from when the holder
	// sent the request.
	TTL time.Duration
	// RetryAfter, when positive, means the bucket is empty: every take is
	// denied until then, and the holder keeps that denial.
	RetryAfter time.Duration
	// Capacity and Window are the limit's (RateLimit-Policy q= and w=).
	Capacity int64
	Window   time.Duration
	// Seq names this version of the holder's allotment: it goes with the
	// next ask and with the return.
	Seq uint64
}

// ReturnRequest gives back what is left of Holder's allotment of
// (Limit, Key); the holder stops using it before it sends this. Seq is the
// Seq of the last answer the holder got: a return that does not match the
// owner's holding (it crossed a later grant) changes nothing, and the
// allotment expires by itself.
type ReturnRequest struct {
	Limit, Key, Holder string
	Unspent            int64
	Seq                uint64
}

// ValidateAllot runs the input checks of an AllotRequest (and, with want
// 1 and demand 0, of a ReturnRequest): a limit, key and holder of 1 to
// maxKeyBytes bytes of valid UTF-8, Want at least 1, Demand and Unspent
// not negative, Demand finite. A failure is an *Error with CodeInvalid.
func ValidateAllot(limit, key, holder string, want int64, demand float64, unspent int64, maxKeyBytes int) error {
	for _, f := range [...]struct{ name, v string }{{"limit", limit}, {"key", key}, {"holder", holder}} {
		if err := ValidateField(f.name, f.v, maxKeyBytes); err != nil {
			return err
		}
	}
	switch {
	case want < 1:
		return Errorf(CodeInvalid, "want %d must be at least 1", want)
	case !(demand >= 0) || demand > 1e12:
		return Errorf(CodeInvalid, "demand must be a rate from 0 to 1e12 per second")
	case unspent < 0:
		return Errorf(CodeInvalid, "unspent %d must not be negative", unspent)
	}
	return nil
}
