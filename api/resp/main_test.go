package resp_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weir-rl/weir/internal/leakcheck"
	"github.com/weir-rl/weir/internal/nodetest"
	"github.com/weir-rl/weir/node"
)

// The tests in this package that import node are end-to-end: one real node
// on loopback with its RESP endpoint on, talked to through go-redis and
// Debian's redis-cli, deciding on an injected clock. The package's own
// tests of the parser and dispatcher use a fake Decider.

func TestMain(m *testing.M) { leakcheck.Main(m) }

// epoch is where every fake clock starts.
var epoch = time.Date(2030, time.January, 2, 3, 4, 5, 0, time.UTC)

// fakeClock is a mutex-guarded time that only moves when a test advances it.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// testLimits is the limits file of most tests: the README's export limit,
// a lease limit, and inline limits on.
const testLimits = `version: 7
limits:
  - name: export
    capacity: 6
    rate: 2/s
  - name: search
    capacity: 3
    rate: 1/s
  - name: export-db
    kind: concurrency
    permits: 2
    lease_ttl: 30s
inline_limits: true
`

// respNode is a started node with its RESP endpoint and a fake clock.
type respNode struct {
	n     *node.Node
	clock *fakeClock
	addr  string // RESP address
}

// startNode starts a one-node cluster serving limits on a fake clock, with
// RESP on a free loopback port, stopped in t.Cleanup.
func startNode(t testing.TB, limits string, edit func(*node.Config)) *respNode {
	t.Helper()
	path := filepath.Join(t.TempDir(), "limits.yaml")
	if err := os.WriteFile(path, []byte(limits), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := node.LocalConfig()
	cfg.NodeName = "n1"
	cfg.SweepInterval = 0
	cfg.LimitsPath = path
	cfg.RESPAddr = "127.0.0.1:0"
	if edit != nil {
		edit(&cfg)
	}
	clock := &fakeClock{t: epoch}
	n := nodetest.Start(t, cfg, node.Deps{Clock: clock.Now})
	return &respNode{n: n, clock: clock, addr: n.RESPAddr()}
}

// client returns a go-redis client of rn, closed in t.Cleanup. edit may
// change its options (protocol, name).
func (rn *respNode) client(t testing.TB, edit func(*redis.Options)) *redis.Client {
	t.Helper()
	opt := &redis.Options{Addr: rn.addr, MaxRetries: -1, PoolSize: 64, ReadTimeout: 10 * time.Second}
	if edit != nil {
		edit(opt)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// ints runs a command that answers an array of integers.
func ints(t testing.TB, c *redis.Client, args ...any) []int64 {
	t.Helper()
	v, err := c.Do(context.Background(), args...).Int64Slice()
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return v
}
