package gossip

// Leaving: a member that announces its leave is marked Leaving, then
// forgotten without being retried, even when its gossip is lost or the
// whole cluster leaves at once.

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/weir-rl/weir/ring"
)

func TestLeaveForgottenAndNotRetried(t *testing.T) {
	c := newCluster(t, 3, nil)
	waitFor(t, "convergence", func() bool { return converged(c.rings...) })
	// n0 is everyone's seed: it must not be dialed again after it left.
	leaver := c.rings[0]
	addr := fmt.Sprintf("%s:%d", hostOf(0), gossipPort)
	if err := leaver.Leave(time.Second); err != nil {
		t.Fatal(err)
	}
	if err := leaver.Leave(time.Second); err != nil {
		t.Fatalf("second Leave: %v", err)
	}
	leaver.Close()
	rest := c.rings[1:]
	took := waitFor(t, "leave seen", func() bool {
		for _, r := range rest {
			v := r.View()
			if _, ok := v.Member("n0"); ok || len(v.Members) != 2 || !v.Majority {
				return false
			}
		}
		return true
	})
	t.Logf("graceful leave forgotten in %v", took)
	for _, r := range rest {
		r.mu.Lock()
		_, ok := r.tbl.left[addr]
		r.mu.Unlock()
		if !ok {
			t.Fatalf("%s did not record the leave of %s", r.cfg.Name, addr)
		}
	}
	// A rejoin round that picked its targets before the leave was
	// recorded may still be dialing: let every such round finish (one more
	// round each) before counting.
	before := []uint64{rest[0].rounds.Load(), rest[1].rounds.Load()}
	waitFor(t, "in-flight rejoin rounds", func() bool {
		return rest[0].rounds.Load() >= before[0]+1 && rest[1].rounds.Load() >= before[1]+1
	})
	dials := c.net.DialCount(addr)
	rounds := []uint64{rest[0].rounds.Load(), rest[1].rounds.Load()}
	waitFor(t, "three rejoin rounds", func() bool {
		return rest[0].rounds.Load() >= rounds[0]+3 && rest[1].rounds.Load() >= rounds[1]+3
	})
	if d := c.net.DialCount(addr); d != dials {
		t.Fatalf("the member that left was dialed %d more times", d-dials)
	}
	if _, ok := rest[0].View().Member("n0"); ok {
		t.Fatal("left member came back")
	}
}

// TestAnnounceLeaveMarksTheMemberLeaving: a member that announces its
// leave stays alive and keeps its keys in every peer's view, marked
// Leaving in a new view (so peers know state is about to move); its Leave
// then removes it as before.
func TestAnnounceLeaveMarksTheMemberLeaving(t *testing.T) {
	c := newCluster(t, 3, nil)
	waitFor(t, "convergence", func() bool { return converged(c.rings...) })
	leaver, rest := c.rings[2], c.rings[:2]
	before := []uint64{rest[0].View().Epoch, rest[1].View().Epoch}
	if err := leaver.AnnounceLeave(time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "leaving seen", func() bool {
		for _, r := range rest {
			if m, ok := r.View().Member("n2"); !ok || !m.Leaving {
				return false
			}
		}
		return true
	})
	for i, r := range rest {
		v := r.View()
		if m, _ := v.Member("n2"); m.State != ring.Alive || v.Live != 3 || v.Epoch <= before[i] {
			t.Fatalf("%s: n2 %v, %d live, epoch %d (was %d); want alive, 3 live, a new view", r.cfg.Name, m.State, v.Live, v.Epoch, before[i])
		}
	}
	if err := leaver.AnnounceLeave(time.Second); err != nil {
		t.Fatalf("second AnnounceLeave: %v", err)
	}
	if err := leaver.Leave(time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "leave seen", func() bool {
		for _, r := range rest {
			if _, ok := r.View().Member("n2"); ok {
				return false
			}
		}
		return true
	})
}

// TestLeaveWithGossipLostIsALeave: a member that leaves while every gossip
// packet is lost (its leaving flag and memberlist's leave message with it)
// still leaves: the leaving note goes over a stream, so its peers record
// a leave, not a failure, when they find it gone. Without the note they
// mark it dead, and it keeps its weight in the majority rule for
// ForgetAfter.
func TestLeaveWithGossipLostIsALeave(t *testing.T) {
	c := newCluster(t, 3, nil)
	waitFor(t, "convergence", func() bool { return converged(c.rings...) })
	leaver, rest := c.rings[2], c.rings[:2]
	c.net.Loss(1)
	if err := leaver.Leave(time.Second); err != nil {
		t.Logf("leave: %v", err) // its broadcasts were lost: not acknowledged
	}
	leaver.Close()
	c.net.Loss(0)
	addr := fmt.Sprintf("%s:%d", hostOf(2), gossipPort)
	waitFor(t, "the leave recorded by both peers", func() bool {
		for _, r := range rest {
			if m, ok := r.View().Member("n2"); ok {
				if m.State == ring.Dead {
					t.Fatalf("%s marked the member that left dead", r.cfg.Name)
				}
				return false
			}
			r.mu.Lock()
			_, left := r.tbl.left[addr]
			r.mu.Unlock()
			if !left {
				return false
			}
		}
		return true
	})
}

// TestAnnounceLeaveAllAtOnce: every member announces its leave at the same
// moment, as when a whole cluster is stopped together. Each member's
// metadata update reaches the others while they send their own leaving
// notes, so under -race this holds that the notes are addressed from this
// package's own copy of the members, not from memberlist's live node
// records (which memberlist rewrites on every update); and every member
// ends up marked Leaving in every other's view.
func TestAnnounceLeaveAllAtOnce(t *testing.T) {
	c := newCluster(t, 4, nil)
	waitFor(t, "convergence", func() bool { return converged(c.rings...) })
	var wg sync.WaitGroup
	for _, r := range c.rings {
		wg.Go(func() {
			if err := r.AnnounceLeave(time.Second); err != nil {
				t.Errorf("%s: AnnounceLeave: %v", r.cfg.Name, err)
			}
		})
	}
	wg.Wait()
	waitFor(t, "every member seen leaving by every other", func() bool {
		for _, r := range c.rings {
			for _, m := range r.View().Members {
				if m.Name != r.cfg.Name && !m.Leaving {
					return false
				}
			}
		}
		return true
	})
}
