// Package auth is the caller policy of Weir's public API: who may ask for
// what. It parses the tokens file and answers, for one presented
// credential, one scope and one resource (a limit and a key), whether the
// call may go ahead, with a typed Answer that says why not.
//
// The package is pure: no I/O but Load, no clock, no goroutines, no
// transport. The HTTP middleware and gRPC interceptors in package api, and
// any other endpoint (a RESP AUTH command, say), call Policy.Authenticate
// once per credential and Token.Authorize once per resource; the node
// reloads the file and publishes each new Policy.
//
// # The tokens file
//
//	version: 1
//	tokens:
//	  - name: acme-checkout          # unique; appears in logs, never the token
//	    sha256: 5e8848...            # weir token hash: SHA-256 of the token, hex
//	    scopes: [decide]             # decide | admin | read, at least one
//	    limits: [export, search]     # optional: only these limits
//	    key_prefix: "tenant:acme:"   # optional: only keys starting with this
//	    max_buckets: 50000           # optional, with key_prefix only: live buckets of the
//	                                 # prefix per owner node; default DefaultMaxBuckets
//	  - name: ops
//	    sha256: 2c26b4...
//	    scopes: [admin, read]
//
// Tokens are stored only as SHA-256 hashes, so the file reveals no
// credential; a token should carry at least 128 bits of randomness (weir
// token new makes one with 256), which is why an unsalted fast hash is
// enough. The file is decoded strictly: an unknown field, a duplicate key,
// a malformed hash, an unknown scope, a duplicate name or hash is an error
// naming its line, and the whole file is rejected.
//
// # Scopes
//
//   - decide: take, check, and lease acquire, renew and release.
//   - admin: forget a member and other cluster changes.
//   - read: cluster status, and /metrics when the node protects it.
//   - allot: hold allotments (a slice of a bucket's tokens, decided in the
//     caller's own process, as the Go client does with Options.Allot). It
//     is for services trusted with their own budget; no token has it
//     unless the file gives it.
//
// Scopes do not imply one another: an admin token cannot take unless it
// also has decide. Limits and key_prefix restrict decide and allot calls
// (every check of a take must pass; one that does not makes the whole take
// Forbidden and nothing is spent); they do not restrict admin or read.
// max_buckets (Token.MaxBuckets) bounds the memory of a prefix: the caller
// policy passes it with each take, and the owner refuses a new bucket for
// the prefix past it (package bucket, TakeTenantAt).
//
// # Answers
//
// Unauthenticated (HTTP 401, gRPC Unauthenticated): no credential, or one
// that matches no token. Forbidden (HTTP 403, gRPC PermissionDenied): a
// known token without the scope, or a resource outside its limits or key
// prefix. Each refusal has a Reason, a fixed word fit for a metric label.
package auth
