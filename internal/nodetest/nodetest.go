// Package nodetest starts in-process nodes for the tests of other
// packages: node.New, Start, and a cleanup that shuts the node down. It is
// for tests only.
package nodetest

import (
	"context"
	"testing"
	"time"

	"github.com/weir-rl/weir/node"
)

// shutdownWithin bounds the shutdown at the end of a test.
const shutdownWithin = 10 * time.Second

// Start builds a node from cfg and deps and starts it, failing tb when
// either fails. When tb's test ends the node shuts down within 10 s, and
// a failed shutdown fails the test.
func Start(tb testing.TB, cfg node.Config, deps node.Deps) *node.Node {
	tb.Helper()
	n, err := node.New(cfg, deps)
	if err != nil {
		tb.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownWithin)
		defer cancel()
		if err := n.Shutdown(ctx); err != nil {
			tb.Errorf("node %q: Shutdown: %v", cfg.NodeName, err)
		}
	})
	return n
}
