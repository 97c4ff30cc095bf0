package gossip

import (
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// msgLeaving tags the leaving note: a memberlist user message that names
// its sender and says it is about to leave gracefully. announceLocked sends
// it over memberlist's reliable stream to every other member, beside the
// leaving flag it gossips in the metadata (metaLeaving).
//
// The flag alone is not enough. It travels by gossip, and the dead message
// memberlist's Leave queues about the leaver replaces any broadcast about
// the same member still in the queue, so on a loaded machine a peer can get
// the leave without the flag and count a graceful leave as a failure: the
// member then keeps its weight in the majority rule for ForgetAfter, and
// one real failure later the survivors are a minority. The note goes over
// a stream, whatever gossip loses, and the table accepts it before or after
// the leave (see table.apply).
const msgLeaving byte = 'L'

// maxNoteName bounds the member name a leaving note may carry; a longer
// note is ignored.
const maxNoteName = 512

// leavingNote is the leaving note of member name.
func leavingNote(name string) []byte { return append([]byte{msgLeaving}, name...) }

// parseLeavingNote returns the member named by a leaving note; ok is false
// for any other message. The name is copied out of b.
func parseLeavingNote(b []byte) (name string, ok bool) {
	if len(b) < 2 || b[0] != msgLeaving || len(b)-1 > maxNoteName {
		return "", false
	}
	return string(b[1:]), true
}

// sendLeavingNotes starts sending the leaving note to every other member
// the table holds alive or suspect, and returns a function that waits
// until every send has ended or until deadline. A send that outlasts the
// deadline ends by memberlist's TCP timeout; Close waits for it. r.life is
// held.
//
// The notes are addressed from the table, not from memberlist's Members:
// those are pointers to memberlist's own node records, which it rewrites
// (address, metadata) on every alive message, without a lock the caller can
// take. When a whole cluster stops at once, every member's leaving flag
// arrives while the others send their notes. A member memberlist has heard
// of and the table has not yet applied gets no note; the flag still
// reaches it by gossip.
func (r *Membership) sendLeavingNotes() (wait func(deadline time.Time)) {
	note := leavingNote(r.cfg.Name)
	ml := r.ml // Close clears r.ml; the sends keep this one
	var sends sync.WaitGroup
	for _, to := range r.noteTargets() {
		sends.Add(1)
		r.wg.Go(func() {
			defer sends.Done()
			if err := ml.SendReliable(to, note); err != nil {
				r.log.Warn("gossip: leaving note not sent", "to", to.Name, "err", err)
			}
		})
	}
	done := make(chan struct{})
	r.wg.Go(func() {
		sends.Wait()
		close(done)
	})
	return func(deadline time.Time) {
		t := time.NewTimer(max(time.Until(deadline), 0))
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			r.log.Warn("gossip: leaving notes still in flight at the announcement's deadline")
		}
	}
}

// noteTargets returns every other live member in the table, as memberlist
// nodes of their own (name and address only). A member whose address does
// not parse is left out and logged.
func (r *Membership) noteTargets() []*memberlist.Node {
	r.mu.Lock()
	members := r.tbl.list()
	r.mu.Unlock()
	var out []*memberlist.Node
	for _, m := range members {
		if m.Name == r.cfg.Name || !m.State.Live() {
			continue
		}
		n, err := nodeAt(m.Name, m.Addr)
		if err != nil {
			r.log.Warn("gossip: leaving note not sent", "to", m.Name, "err", err)
			continue
		}
		out = append(out, n)
	}
	return out
}

// nodeAt returns a memberlist node named name at addr ("ip:port"), enough
// for memberlist to address a message to it.
func nodeAt(name, addr string) (*memberlist.Node, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, fmt.Errorf("gossip: member %s: %w", name, err)
	}
	return &memberlist.Node{Name: name, Addr: ap.Addr().AsSlice(), Port: ap.Port()}, nil
}
