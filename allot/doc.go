// Package allot keeps allotments: slices of a token bucket that its owner
// debits at once and hands to a holder (another node, or a client trusted
// with its own budget), which then decides the bucket's takes in its own
// memory, without asking the owner each time. It is a pure core: time is
// an argument, nothing runs by itself, and no type is safe for concurrent
// use; node/engine and the Go client own the locks, the goroutines and the
// network.
//
// # Never more than the bucket allows
//
// The owner debits an allotment's tokens from its bucket when it grants
// them, and records the holding (Ledger): holder, outstanding tokens,
// expiry. While holdings are outstanding, the owner's bucket refills only
// up to its capacity minus their tokens, so tokens a holder still has are
// never refilled behind its back. With L the bucket's level and O the
// holdings' outstanding tokens, L + O never exceeds the capacity B, and
// over any window [a, b] the takes of the owner and of every holder
// together are at most L(a) + O(a) + r·(b − a) ≤ B + r·(b − a): exactly
// the bucket's own bound, whenever the holders spend their tokens.
//
// That holds because the owner materializes the bucket (settles its
// refill under the capacity in force) at every instant O changes — a
// grant, a refresh that reports tokens spent, a return, and the expiry of
// a holding (at its Expires, before any later step) — so a capacity that
// rises never claims the refill of time it was lower.
//
// A holder stops using an allotment at its own deadline, TTL after it
// asked (Purse.GrantedAt), which comes before the owner's (TTL after it
// granted), so the owner can drop an expired holding without the holder
// still spending it. Tokens a holder never returns are simply lost: the
// safe side.
//
// # Holder side
//
// A Purse meters each key's demand (Meter), asks for an allotment when it
// reaches a threshold (AskAt: demand × horizon tokens, bounded by a share
// of capacity), decides takes from it (TakeAt, TakeAllAt), refreshes it
// before it runs dry, keeps an owner's denial until its retry-after so a
// key over its limit costs the owner nothing per request, and hands back
// what is idle (IdleAt, Return).
//
// # Owner side
//
// A Ledger records holdings per bucket and splits what the bucket has by
// demand (Share: Doorman's proportional share, with the owner's own
// demand counted), so holders converge to their share within a refresh
// and none starves another for longer. Holdings cross nodes as Entries,
// relative to the exporter's now, and merge conservatively.
package allot
