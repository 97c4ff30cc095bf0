// Package hostile is the hostile-input suite: each test starts a real
// `weir serve` process and attacks it the way a hostile or broken caller
// would (10,000 idle connections, slowloris headers and bodies, a 1 MiB
// header, invalid UTF-8 and NUL in keys, a burst of distinct keys past the
// bucket cap, oversize gRPC messages, a stream that never reads its
// answers, connect/disconnect storms, a flood of bad tokens; and, from an
// adversarial probe of every API, Redis-protocol connections that never
// authenticate or never finish a command, tokens narrowed and revoked under
// open connections and streams, Envoy rules-mode refusals, the largest
// lease wait, lease ids computed from one's own, gossip packets without the
// secret, credential headers as keys and ambiguous JSON), while a canary
// caller keeps asking for decisions. Each case asserts that the
// canary is answered within its deadline throughout, that the node's
// resident memory stays under a stated bound (read from /proc), that its
// goroutines and open files return to where they were, and that rejected
// requests changed nothing.
//
// `go test ./hostile` (part of make test) runs the short form, well under
// a minute; `make hostile` (WEIR_HOSTILE=long) runs the full sizes. The
// package holds only tests.
package hostile
