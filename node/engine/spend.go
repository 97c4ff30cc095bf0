package engine

import (
	"context"

	"github.com/weir-rl/weir/allot"
	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/bucket"
)

// Where says which state a Spend debited.
type Where uint8

const (
	// Nowhere is a spend of nothing: a denial, or a step whose checks were
	// all shadow or open. Undoing it does nothing.
	Nowhere Where = iota
	// Owner is this node's owner store.
	Owner
	// Fallback is this node's store of local ceilings.
	Fallback
	// Peer is the owner at Spend.Peer, reached over the peer transport.
	Peer
	// Allotment is this node's allotments as a holder (package allot).
	Allotment
)

// Spend records what one atomic step of a take debited and where, so that
// undoing it gives back exactly that, as x/time/rate's Reservation records
// what it took and CancelAt returns that. It is a value: a take keeps one
// per step it decided and undoes them all when a later step is denied.
//
// Shadow checks are decided on their own and never undone, and an open
// limit's fallback spends nothing: neither appears in a Spend.
type Spend struct {
	// Where is the state debited.
	Where Where
	// Peer is the owner's peer address, for Where == Peer.
	Peer string
	// Debits are the debits as made, for Owner, Fallback and Allotment:
	// each check's key and cost and the limit applied, which for Fallback
	// is the local share in force at the step (not the share at the time
	// of the undo).
	Debits []bucket.Check
	// Sent are the checks as forwarded, for Peer: the owner resolves them
	// against its own limits again to give them back.
	Sent []api.Check
}

// Undo gives back what s debited: to this node's owner or fallback store
// (capped at capacity), or by asking the owner at s.Peer, best effort (an
// owner that cannot be reached keeps the debit, which errs on the side of
// admitting less).
func (e *Engine) Undo(ctx context.Context, s Spend) {
	switch s.Where {
	case Owner:
		e.refundOwned(s.Debits)
	case Allotment:
		for _, d := range s.Debits {
			k := allot.Key{Limit: d.Name, Key: d.Key}
			sh := e.purses.shard(k)
			sh.mu.Lock()
			sh.p.Refund(k, d.Cost)
			sh.mu.Unlock()
		}
	case Fallback:
		e.fallback.RefundAt(e.now(), s.Debits)
	case Peer:
		e.peers.Refund(ctx, s.Peer, s.Sent)
	}
}
