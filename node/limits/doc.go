// Package limits reads Weir's limits file (docs/architecture.md §4): the named
// rules callers refer to, with their algorithm, parameters and failure mode.
//
// # The file
//
// A limits file is one YAML document:
//
//	version: 3                 # required, integer >= 0; bump it on every change
//	limits:                    # the named limits; may be empty only when inline_limits is true
//	  - name: export           # required; 1..64 of [A-Za-z0-9._-]; unique (case-sensitive)
//	    kind: rate             # rate (default) | concurrency
//	    algorithm: token_bucket  # token_bucket (default) | gcra | sliding_window | fixed_window
//	    capacity: 6            # token_bucket: capacity >= 1 and rate, both required
//	    rate: 2/s
//	    on_owner_unreachable: local  # local (default) | open | closed
//	    shadow: false          # true: decide and count, but always allow
//	inline_limits: false       # true: callers may send a rate limit's fields with a check (ParseInline)
//
// Each algorithm takes exactly its own two fields, both required:
//
//	token_bucket    capacity (>= 1), rate
//	gcra            rate, burst (>= 1; bucket.Limit.Capacity)
//	sliding_window  limit (>= 1), window (a duration, 1ms..366d)
//	fixed_window    limit (>= 1), window (minute | hour | day | month, UTC calendar)
//
// A token_bucket limit may also take allotments (Allotments): a hot key's
// owner hands slices of its bucket, debited first, to the nodes and trusted
// clients that see the key's demand, which then decide its takes in memory.
//
//	allotments           optional, off (default) | auto
//	allotment_threshold  with auto: the demand at one node from which it asks
//	                     for an allotment, a rate; default 50/s
//	allotment_horizon    with auto: how much of a node's demand one allotment
//	                     covers, 1ms..10s; default 50ms
//	allotment_ttl        with auto: an allotment's life, 100ms..10m and at
//	                     least twice the horizon; default 2s
//
// Allotments do not apply to a shadow limit, to the other algorithms, or to
// inline limits.
//
// A concurrency limit (kind: concurrency) takes no algorithm and has:
//
//	permits        required, 1..MaxPermits: leases held at once per key
//	lease_ttl      required, 1ms..7d: lifetime of a lease when the caller asks for none
//	max_lease_ttl  optional, lease_ttl..7d: the longest lifetime a caller may ask for;
//	               default 10 x lease_ttl, capped at 7d
//	queue          optional { length: 0..1000000, max_wait: 0s..1h }; max_wait > 0
//	               exactly when length > 0; omitted means no queue
//	strict         optional bool, default false
//
// A rate is "N/period" (see ParseRate): "2/s", "100/m", "10/h", "1000/d",
// "5/10s". A duration is a Go duration ("30s", "1m30s", "250ms") or whole
// days ("7d", 24 hours each); a bare number is an error.
//
// # Strictness
//
// Parse rejects anything it does not understand rather than guess: unknown
// fields (with a suggestion for a likely typo), fields of another kind or
// algorithm (window on a token_bucket), fields given twice, values of the
// wrong YAML type (a quoted "6" for a capacity, a number for a duration),
// out-of-range values, more than one YAML document, and YAML merge keys.
// It reports every problem it finds, not just the first, each with its
// line: an invalid file yields a *FileError whose Error method prints one
// problem per line, as `weir validate` shows them:
//
//	limits.yaml: line 7: limit "export": "capacity" must be >= 1, got 0
//	limits.yaml: line 9: limit "export": field "window" does not apply to algorithm token_bucket (it takes "capacity", "rate")
//
// Every rate limit is also checked with bucket.Limit.Validate, so a file
// that parses is one the bucket store accepts.
//
// # Reloading
//
// A *File is immutable and safe for concurrent reads; Lookup is a map read.
// A Reloader holds the File in force behind an atomic.Pointer and swaps in a
// new one on Reload (the node calls it on SIGHUP) or, while Run runs, when
// the file changes on disk. An invalid new file is rejected with a logged
// reason and reported to the onReload callback (where the node counts it in
// a metric); the last valid file stays in force.
package limits
