package node

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/transport"
)

// offsetClock is an injected decision clock: the wall time shifted by an
// offset a test advances, so hours pass between two lives of a node.
type offsetClock struct{ off atomic.Int64 }

func (c *offsetClock) now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *offsetClock) advance(d time.Duration) { c.off.Add(int64(d)) }
func statePath(dir string) string              { return filepath.Join(dir, StateFileName) }
func take1(n *Node, limit, key string) (bool, error) {
	resp, err := n.Take(context.Background(), []api.Check{{Limit: limit, Key: key, Cost: 1}})
	return resp.Allowed, err
}

// startLocal starts a cluster of one with simLimits, dir as its state dir
// and clock as its decision clock, logging to log (nil: discard).
func startLocal(t *testing.T, dir string, clock *offsetClock, log *slog.Logger) *Node {
	t.Helper()
	file := filepath.Join(t.TempDir(), "limits.yaml")
	if err := os.WriteFile(file, []byte(simLimits), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := LocalConfig()
	cfg.NodeName = "solo"
	cfg.LimitsPath = file
	cfg.StateDir = dir
	n, err := New(cfg, Deps{Logger: log, Clock: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Shutdown(context.Background()) })
	return n
}

// spend takes count tokens of (limit, key) at n, failing t unless each is
// admitted.
func spend(t *testing.T, n *Node, limit, key string, count int) {
	t.Helper()
	for i := range count {
		if ok, err := take1(n, limit, key); !ok || err != nil {
			t.Fatalf("take %d of %s/%s: allowed %v, err %v", i+1, limit, key, ok, err)
		}
	}
}

// A node stopped gracefully and started again with the same state dir
// keeps its debits and its leases; time that passes in between refills the
// buckets and expires the leases, and the file is gone once applied.
func TestStateDirRestartKeepsDebitsAndLeases(t *testing.T) {
	dir := t.TempDir()
	clock := &offsetClock{}
	n := startLocal(t, dir, clock, nil)
	spend(t, n, "hot", "spent", 60) // capacity 60, 1/h
	for range 6 {                   // permits 6, lease_ttl 2s
		if g, err := n.Acquire(context.Background(), api.AcquireRequest{Limit: "db", Key: "k", Holder: "h"}); err != nil || !g.Granted {
			t.Fatalf("acquire: %+v, %v", g, err)
		}
	}
	if err := n.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(statePath(dir)); err != nil {
		t.Fatalf("no state file after a graceful shutdown: %v", err)
	}

	clock.advance(time.Second) // less than the leases' 2s, and no token's refill
	n = startLocal(t, dir, clock, nil)
	if _, err := os.Stat(statePath(dir)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("state file still there after it was applied: %v", err)
	}
	if ok, err := take1(n, "hot", "spent"); ok || err != nil {
		t.Fatalf("spent key after the restart: allowed %v, err %v; want denied", ok, err)
	}
	if g, err := n.Acquire(context.Background(), api.AcquireRequest{Limit: "db", Key: "k", Holder: "h"}); err != nil || g.Granted {
		t.Fatalf("a seventh permit after the restart: %+v, %v; want refused", g, err)
	}
	// An hour refills exactly one token; the leases are past expiry.
	clock.advance(time.Hour)
	if ok, _ := take1(n, "hot", "spent"); !ok {
		t.Fatal("an hour later: the refilled token was denied")
	}
	if ok, _ := take1(n, "hot", "spent"); ok {
		t.Fatal("an hour later: a second token admitted, one refilled")
	}
	if g, err := n.Acquire(context.Background(), api.AcquireRequest{Limit: "db", Key: "k", Holder: "h"}); err != nil || !g.Granted {
		t.Fatalf("acquire after the leases expired: %+v, %v", g, err)
	}
}

// Leases already past expiry when the node starts again are dropped.
func TestStateDirDropsExpiredLeases(t *testing.T) {
	dir := t.TempDir()
	clock := &offsetClock{}
	n := startLocal(t, dir, clock, nil)
	for range 6 {
		if g, err := n.Acquire(context.Background(), api.AcquireRequest{Limit: "db", Key: "k", Holder: "h"}); err != nil || !g.Granted {
			t.Fatalf("acquire: %+v, %v", g, err)
		}
	}
	if err := n.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	clock.advance(3 * time.Second) // past lease_ttl 2s
	n = startLocal(t, dir, clock, nil)
	if g, err := n.Acquire(context.Background(), api.AcquireRequest{Limit: "db", Key: "k", Holder: "h"}); err != nil || !g.Granted {
		t.Fatalf("acquire after expiry across the restart: %+v, %v", g, err)
	}
}

// A corrupt, truncated or foreign state file is refused with an error log
// naming it, and nothing of it is applied: the spent key starts full.
func TestStateDirRefusesBadFile(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func([]byte) []byte
		want  string
	}{
		{"truncated", func(b []byte) []byte { return b[:len(b)-5] }, "truncated"},
		{"corrupt", func(b []byte) []byte { b[len(b)/2] ^= 1; return b }, "checksum"},
		{"foreign", func(b []byte) []byte { return append([]byte("PK\x03\x04"), b[4:]...) }, "magic"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			clock := &offsetClock{}
			n := startLocal(t, dir, clock, nil)
			spend(t, n, "hot", "spent", 60)
			if err := n.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(statePath(dir))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(statePath(dir), tc.spoil(b), 0o600); err != nil {
				t.Fatal(err)
			}
			var log lockedLog
			n = startLocal(t, dir, clock, slog.New(slog.NewTextHandler(&log, nil)))
			line := ""
			for l := range strings.SplitSeq(log.String(), "\n") {
				if strings.Contains(l, "state file refused") {
					line = l
				}
			}
			if !strings.Contains(line, "level=ERROR") || !strings.Contains(line, tc.want) || !strings.Contains(line, dir) {
				t.Fatalf("no error line naming the file and %q; log:\n%s", tc.want, log.String())
			}
			// Nothing applied: the key is full (60 admitted).
			spend(t, n, "hot", "spent", 60)
		})
	}
}

// TestStateDirWholeClusterRestart: three members, each with its own state
// dir, spend a slow bucket; all are stopped (graceful: at once, as a scale
// to zero does, or one at a time, each leave handing its keys to the
// members still up while they hold a majority), and a new cluster is
// started on the same state dirs a minute later. The spent key is still denied at every
// member; an hour later exactly one token has refilled.
func TestStateDirWholeClusterRestart(t *testing.T) {
	for _, atOnce := range []bool{true, false} {
		name := "one-at-a-time"
		if atOnce {
			name = "at-once"
		}
		t.Run(name, func(t *testing.T) { wholeClusterRestart(t, atOnce) })
	}
}

func wholeClusterRestart(t *testing.T, atOnce bool) {
	dirs := map[string]string{}
	for _, name := range []string{"n1", "n2", "n3"} {
		dirs[name] = t.TempDir()
	}
	clock := &offsetClock{}
	configure := func(name string, cfg *Config, deps *Deps) {
		cfg.StateDir = dirs[name]
		deps.Clock = clock.now
	}
	c := newSimCluster(t)
	c.configure = configure
	c.start(3)
	const key = "spent"
	all := []*Node{c.nodes["n1"], c.nodes["n2"], c.nodes["n3"]}
	if owner, fallback := takeMany(t, all, "hot", key, 70); owner != 60 || fallback != 0 {
		t.Fatalf("first life: %d admitted by owner, %d by fallback; want 60 and 0", owner, fallback)
	}
	stopNodes(t, all, atOnce)
	holders := filesHolding(t, dirs, "hot", key)
	t.Logf("the spent key is in the state files of %v", holders)
	if len(holders) == 0 {
		t.Fatal("no member saved the spent key")
	}

	clock.advance(time.Minute)
	c = newSimCluster(t)
	c.configure = configure
	c.start(3)
	n1 := c.nodes["n1"]
	owner := c.nodes[ownerOf(n1, "hot", key)]
	// The member that restored the key hands it to its owner on the ring
	// change (or the owner pulls it): wait for the owner to hold it.
	waitFor(t, 15*time.Second, "the owner to hold the restored bucket", func() bool { return owner.eng.HasBucket("hot", key) })
	all = []*Node{n1, c.nodes["n2"], c.nodes["n3"]}
	if o, f := takeMany(t, all, "hot", key, 9); o+f != 0 {
		t.Fatalf("after the restart: %d admitted by owner, %d by fallback; want 0", o, f)
	}
	if o, f := takeMany(t, all, "hot", "fresh", 3); o != 3 {
		t.Fatalf("a fresh key after the restart: %d admitted by owner, %d by fallback; want 3 by owner", o, f)
	}
	clock.advance(time.Hour)
	if o, f := takeMany(t, all, "hot", key, 9); o+f != 1 {
		t.Fatalf("an hour later: %d admitted by owner, %d by fallback; want 1 in all", o, f)
	}
	for name, d := range dirs {
		if _, err := os.Stat(statePath(d)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: state file still there after it was applied: %v", name, err)
		}
	}
}

// stopNodes shuts the nodes down gracefully, all at once or in order, and
// fails t unless every Shutdown returns nil.
func stopNodes(t *testing.T, nodes []*Node, atOnce bool) {
	t.Helper()
	var wg sync.WaitGroup
	for _, n := range nodes {
		stop := func() {
			if err := n.Shutdown(context.Background()); err != nil {
				t.Errorf("shutdown of %s: %v", n.cfg.NodeName, err)
			}
		}
		if atOnce {
			wg.Go(stop)
		} else {
			stop()
		}
	}
	wg.Wait()
}

// filesHolding names the members whose state file holds a bucket in debt
// for (limit, key).
func filesHolding(t *testing.T, dirs map[string]string, limit, key string) []string {
	t.Helper()
	var out []string
	for _, name := range []string{"n1", "n2", "n3"} {
		b, err := os.ReadFile(statePath(dirs[name]))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		st, _, err := transport.DecodeStateFile(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, e := range st.Buckets {
			if e.Name == limit && e.Key == key {
				out = append(out, name)
			}
		}
	}
	return out
}
