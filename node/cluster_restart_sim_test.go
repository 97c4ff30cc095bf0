package node

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/weir-rl/weir/api"
)

// takeHot takes count tokens of "hot" key at n, one at a time, each of
// which must be admitted, and returns the last result.
func takeHot(t *testing.T, n *Node, key string, count int) api.Result {
	t.Helper()
	var last api.Result
	for range count {
		resp, err := n.Take(context.Background(), []api.Check{{Limit: "hot", Key: key, Cost: 1}})
		if err != nil || !resp.Allowed {
			t.Fatalf("take at %s = %+v, %v", n.cfg.NodeName, resp, err)
		}
		last = resp.Results[0]
	}
	return last
}

// killOwnerInDebt starts three members, spends 40 of the 60 tokens of a
// "hot" key owned by n3, kills n3 once its successor's replica shows the
// debt, and spends 4 more at the successor once it decides the key. It
// returns the key, the successor, and the tokens left there.
func killOwnerInDebt(t *testing.T, c *simCluster) (key string, succ *Node, left int64) {
	t.Helper()
	c.start(3)
	n1 := c.nodes["n1"]
	for i := 0; key == ""; i++ {
		if k := fmt.Sprintf("restart:%d", i); ownerOf(n1, "hot", k) == "n3" {
			key = k
		}
	}
	if r := takeHot(t, n1, key, 40); r.Source != api.SourceOwner || r.Remaining != 20 {
		t.Fatalf("40th take = %+v, want an owner decision with 20 left", r)
	}
	succ = c.nodes[successorOf(c.nodes["n3"], "hot", key)]
	waitFor(t, 5*time.Second, "the successor's replica to show 20 tokens left", func() bool {
		e, ok, _ := clusterOf(succ).Replica(time.Now(), "hot", key)
		return ok && e.Snapshot.Count == 20
	})
	c.kill("n3")
	c.net.Heal()
	waitFor(t, 10*time.Second, "the successor to decide n3's key", func() bool {
		resp, err := succ.Take(context.Background(), []api.Check{{Limit: "hot", Key: key, Cost: 1}})
		if err == nil && resp.Results[0].Source == api.SourceOwner {
			if resp.Results[0].Remaining > 19 {
				t.Fatalf("successor decided %+v: it did not start from the replica", resp.Results[0])
			}
			return true
		}
		return false
	})
	return key, succ, takeHot(t, succ, key, 4).Remaining
}

// restartedOwnerContinues checks the first take at n3, back as the key's
// owner, after the window in which it pulls a key it misses: it continues
// from the successor's debt (left) rather than from a full bucket.
func restartedOwnerContinues(t *testing.T, c *simCluster, n3 *Node, key string, left int64) {
	t.Helper()
	c.waitConverged(3)
	c.settled()
	r := takeHot(t, n3, key, 1)
	if r.Source != api.SourceOwner || r.Evidence.Run == "" || r.Remaining != left-1 {
		t.Fatalf("first take at the restarted owner = %+v, want an owner decision with %d left", r, left-1)
	}
}

// TestClusterRestartedOwnerGetsItsDebtBack: an owner is killed, its
// successor takes its key over and spends more of it, and the owner comes
// back on the same address while the successor's connection to that
// address still waits out the backoff of dials refused while it was down
// (forwards in flight at a crash make them). The successor's handoff must
// reach it all the same. jepsen's 3-kill found this (seed 302905: the
// restarted owner admitted its key's capacity again).
func TestClusterRestartedOwnerGetsItsDebtBack(t *testing.T) {
	c := newSimCluster(t)
	key, succ, left := killOwnerInDebt(t, c)
	addr := c.hosts["n3"] + ":7947"
	for dials := c.net.DialCount(addr); c.net.DialCount(addr) < dials+6; {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		clusterOf(succ).Reachable(ctx, addr)
		cancel()
	}
	n3 := c.add("n3", c.hosts["n3"], c.hosts["n1"], "")
	restartedOwnerContinues(t, c, n3, key, left)
}

// TestClusterFailedHandoffIsSentAgain: the restarted owner cannot be
// reached from the successor when the successor first hands the key back
// (their link is cut, gossip reaches both through n1), and can soon after.
// The successor sends the handoff again within the window, so the owner
// continues from the debt.
func TestClusterFailedHandoffIsSentAgain(t *testing.T) {
	c := newSimCluster(t)
	var logs lockedLog
	c.log = slog.New(slog.NewTextHandler(&logs, nil))
	c.configure = func(_ string, cfg *Config, _ *Deps) {
		cfg.Forward.HandoffDeadline = 300 * time.Millisecond // within the 2 s window
	}
	key, succ, left := killOwnerInDebt(t, c)
	c.net.Cut(c.hosts[succ.cfg.NodeName], c.hosts["n3"])
	n3 := c.add("n3", c.hosts["n3"], c.hosts["n1"], "")
	waitFor(t, 10*time.Second, "the successor's handoff to n3 to fail", func() bool {
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, `msg="handoff failed`) && strings.Contains(l, "to=n3") {
				return true
			}
		}
		return false
	})
	c.net.Heal()
	restartedOwnerContinues(t, c, n3, key, left)
}

// TestClusterHandoffAfterTheWindowStillLands: the restarted owner cannot
// be reached from the successor for longer than its pull window, so it
// starts the key full, as it must not wait for ever. Once the link heals,
// the successor's push, sent again all along, still lands: the owner
// keeps the fewer tokens, and continues from the debt rather than from
// what it started full.
func TestClusterHandoffAfterTheWindowStillLands(t *testing.T) {
	c := newSimCluster(t)
	var logs lockedLog
	c.log = slog.New(slog.NewTextHandler(&logs, nil))
	c.configure = func(_ string, cfg *Config, _ *Deps) {
		cfg.Forward.HandoffDeadline = 300 * time.Millisecond
	}
	key, succ, left := killOwnerInDebt(t, c)
	c.net.Cut(c.hosts[succ.cfg.NodeName], c.hosts["n3"])
	n3 := c.add("n3", c.hosts["n3"], c.hosts["n1"], "")
	lines := func(msg string) int {
		n := 0
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, `msg="`+msg) && strings.Contains(l, "to=n3") {
				n++
			}
		}
		return n
	}
	waitFor(t, 10*time.Second, "the successor's handoff to n3 to fail", func() bool { return lines("handoff failed") > 0 })
	c.waitConverged(3)
	c.settled() // n3's pull window has passed
	if r := takeHot(t, n3, key, 1); r.Source != api.SourceOwner || r.Remaining != 59 {
		t.Fatalf("first take at n3 after its window, cut off from the debt = %+v, want an owner decision from a full bucket (59 left)", r)
	}
	handed := lines("handed off")
	c.net.Heal()
	waitFor(t, 10*time.Second, "the successor's push to land after the heal", func() bool { return lines("handed off") > handed })
	if r := takeHot(t, n3, key, 1); r.Source != api.SourceOwner || r.Remaining != left-1 {
		t.Fatalf("take at n3 after the late push = %+v, want an owner decision with %d left (the debt)", r, left-1)
	}
}
