// Package ownership is the one definition of which ring member owns a
// bucket: the hash-tag rule (HashKey), the hash (xxhash64), and the
// partition table built by consistent hashing with bounded loads
// (buraksezer/consistent). Package ring builds its views with it, and the
// cluster-aware client (api/client) computes owners with it from the table
// a node publishes (weir.v1.Limiter GetRing, GET /v1/ring), so a client and
// a node holding the same table always name the same owner.
//
// It imports only the standard library, xxhash and consistent: no
// membership, no I/O, no clock. Tables are immutable values, safe for
// concurrent use.
package ownership
