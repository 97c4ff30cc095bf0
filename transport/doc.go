// Package transport is Weir's node-to-node protocol: the peer gRPC service
// that a non-owner uses to forward a request to the owner of its key, and
// that an old owner uses to hand state to a new one. It is separate from the
// public weir.v1.Limiter service and listens on its own port.
//
// # Dependencies
//
// transport imports neither node, api nor ring (docs/architecture.md §2). It defines its
// own plain types (Request, Reply, HandoffEntry) and one interface, Handler,
// which package node implements to answer forwarded requests. It maps no
// keys to owners: callers pass the owner's address, and Reply.NotOwner tells
// them when the owner's ring disagreed.
//
// # Forwarding and batching
//
// Pool.Do enqueues a Request for a peer. A request to an idle peer is sent
// at once; while a batch to that peer is in flight, requests from concurrent
// callers collect and share the next Batch RPC, which leaves when the batch
// in flight is answered, when it holds Config.MaxBatch requests, or
// Config.Window (200µs by default) after its first request. Batches so grow
// with load and round-trip time, and an idle peer costs no batching delay.
// The rule is the pure step function Batcher (Add/Tick/Done with explicit
// times); Pool is the thin shell that reads the clock, arms one timer per
// peer and sends a batch whose window has passed in its own goroutine, so a
// slow batch never delays the next.
//
// Each request is one atomic step at the owner and gets its own Reply; a
// batch is a transport optimisation only, not a transaction. Every Do ends
// within its forward deadline (the caller's context deadline, or
// Config.Deadline, default 250ms, for a caller without one) with a Reply or
// an error. An error wrapping ErrDeadline means no answer came in time,
// which says nothing about whether the owner is down; any other means it
// could not be reached. A caller that gave up before its batch was sent is
// left out of it, so an abandoned forward is not spent at the owner.
//
// Each request carries its deadline to the owner as the time its sender
// has left (budget_ns), which the receiver counts from the batch's arrival
// on its own clock (Request.Deadline, Request.ExpiredAt): skew between
// hosts cannot move it, the request's time in transit does (later at the
// owner by that much). An owner that gets to a request after its deadline
// refuses it unspent (Reply.Expired); one that gets to it before may still
// spend for a caller that stopped waiting meanwhile (the ordinary ambiguity
// of a timed-out request, bounded by the transit time). The transit time
// includes any wait in the owner's socket: an owner stopped (SIGSTOP, a
// long GC or VM pause) reads its held forwards when it resumes, counts
// their budgets from then, and may spend them seconds after their senders
// gave up. That under-admits and never over-admits; jepsen's pause
// scenario allows for it (jepsen.HeldUntil).
//
// An acquire that may queue (Request.Wait > 0) is sent alone with a
// deadline extended by Wait, so that it cannot hold up the replies of a
// batch.
//
// # Time
//
// No field carries a timestamp. Durations on the wire (retry and reset
// figures, lease TTLs, handoff payloads) are relative, computed by the
// sender from its own monotonic clock, so clock skew between nodes cannot
// mint tokens (docs/architecture.md §7).
//
// # Authentication and encryption
//
// DeriveKeys turns the cluster secret (any passphrase, read with
// ReadSecretFile) into the memberlist gossip key and the seed of an
// Ed25519 key by HKDF-SHA256 with one label per key. SecretCredentials
// makes a self-signed certificate from that key deterministically, so
// every node holding the secret derives the same certificate; the peer
// channel is TLS 1.3 with both ends presenting it, and each end accepts
// only a peer presenting exactly that certificate (pinned), whose
// handshake signature proves it holds the derived key. A node without the
// secret cannot complete the handshake, so it can neither read nor inject
// peer traffic; nothing travels in the clear. FileCredentials are the
// alternative for operators with their own PKI: each end presents its
// certificate and accepts any peer chaining to the given CA. Without
// credentials (no secret) the channel is plaintext and unauthenticated.
//
// # Regenerating peerpb
//
// peer.proto is compiled by gen.sh (protoc 3.21.12, protoc-gen-go v1.36.12,
// protoc-gen-go-grpc v1.6.0); the output is reproducible byte for byte.
package transport

//go:generate sh gen.sh
