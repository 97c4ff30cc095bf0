// Package envoyconf reads envoyproxy/ratelimit's configuration files as they
// are and matches request descriptors against them exactly as that service
// does, so that a team running Envoy with envoyproxy/ratelimit can point
// Envoy at Weir and keep its rules. It is pure: Parse takes bytes, Match
// takes a domain and entries; the node reads the directory and serves the
// answers.
//
// # Files
//
// One YAML file per domain, in envoyproxy/ratelimit's format:
//
//	domain: messaging
//	descriptors:
//	  - key: message_type
//	    value: marketing
//	    descriptors:
//	      - key: to_number
//	        rate_limit: {unit: day, requests_per_unit: 5}
//	  - key: to_number
//	    rate_limit: {unit: day, requests_per_unit: 100, name: per_number}
//	    shadow_mode: false
//
// Every field of envoyproxy/ratelimit is accepted: key (required), value
// (optional, '*' matches any run of characters), rate_limit {unit
// (second, minute, hour, day, week, month, year; any case),
// requests_per_unit, unlimited, name, replaces [{name}]}, descriptors,
// shadow_mode, detailed_metric, value_to_metric, share_threshold and
// metadata. quota_mode is refused (Weir has no quota mode). Parse checks
// what envoyproxy/ratelimit checks (an empty key, a duplicate key/value at
// one level, a unit with unlimited or a missing one without, an empty or
// self-naming replaces, share_threshold without a wildcard, an empty
// domain, a domain in two files) and also what it lets through (an unknown
// field anywhere, a wrong type, requests_per_unit outside uint32), and
// reports every problem with its file and line.
//
// One field is Weir's own, inside rate_limit, and envoyproxy/ratelimit would
// refuse it:
//
//	weir: {algorithm: token_bucket, burst: 20, on_owner_unreachable: closed}
//
// algorithm is fixed_window (the default: envoyproxy/ratelimit's counter
// per period of the unit counted from the Unix epoch; month is 30 days and
// year 365, as there), token_bucket or gcra (requests_per_unit per unit,
// capacity burst, default requests_per_unit), or sliding_window (at most
// requests_per_unit in any window of one unit). on_owner_unreachable is
// the limit's failure policy (local, the default, open or closed).
//
// # Matching
//
// Match is envoyproxy/ratelimit's GetLimit: the entries of a descriptor are
// walked level by level from the domain's descriptor list; at each level the
// entry matches its key and value exactly, else the first wildcard value (in
// file order) that matches it, else its key alone (a configured key without
// value: every value gets its own bucket). A rule applies only when the
// last entry lands on a descriptor with a rate_limit: a descriptor with
// more entries than the configuration has levels, or fewer, matches nothing
// (and envoyproxy/ratelimit answers OK for it). The bucket of a match is
// every entry's key and value, except that an entry matched by a wildcard
// with share_threshold uses the wildcard instead of its value, so all its
// values share one bucket.
package envoyconf
