// Package authz enforces the caller policy of package auth (the tokens
// file: scopes, and a confinement to limits and a key prefix) on every
// front end, independently of its protocol.
//
// Authentication happens at the edge of each front end, before a request
// is read: the front end extracts the presented credential (httpapi's
// RequireTokens from X-Weir-Token or Authorization: Bearer, grpcapi's
// AuthInterceptors from metadata, the Redis protocol from AUTH), turns it
// into the caller's *auth.Token with Config.Credential, refuses a missing
// or unknown one (CodeUnauthenticated), and passes the token on in the
// request's context with WithCaller.
//
// Authorisation happens in the wrappers Decider and Operator, which a node
// hands to its front ends in place of itself: every check of a take, every
// lease and every admin or operator call is authorised against the
// caller's token before the wrapped Decider or Operator is called, so a
// refused call (CodeForbidden) spends and changes nothing. A refusal is
// counted by Config.OnFailure with its reason.
//
// With no policy in force (no tokens file) every call is allowed, as
// without authentication.
package authz
