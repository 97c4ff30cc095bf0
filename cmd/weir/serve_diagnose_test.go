package main

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/weir-rl/weir/internal/nodetest"
	"github.com/weir-rl/weir/node"
)

// TestGossipPortClashNamesTheGossipPort: a second `weir serve` with the
// same --gossip-addr as a running node fails on that node's peer port
// (gossip + 1, opened first); the error says the gossip port is taken and
// which flag to change.
func TestGossipPortClashNamesTheGossipPort(t *testing.T) {
	p := freePortPair(t)
	cfg := node.LocalConfig()
	cfg.NodeName = "first"
	cfg.Clustered = true
	cfg.PeerAddr = ""
	cfg.Ring.BindAddr, cfg.Ring.BindPort = "127.0.0.1", p
	nodetest.Start(t, cfg, node.Deps{})
	gossip := "127.0.0.1:" + strconv.Itoa(p)
	code, _, stderr := runCmd("serve", "--gossip-addr", gossip, "--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--timing", "local", "--node-name", "second")
	want := fmt.Sprintf("the gossip port %s is in use (another weir on this host with the same --gossip-addr?)", gossip)
	if code != 1 || !strings.Contains(stderr, want) {
		t.Fatalf("second serve on gossip %s: exit %d, log:\n%s\nwant exit 1 and %q", gossip, code, stderr, want)
	}
}

// TestPeerPortClashNamesThePeerPort: when only the derived peer port is
// taken (by some other program), the hint names it and --peer-addr.
func TestPeerPortClashNamesThePeerPort(t *testing.T) {
	p := freePortPair(t)
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+1))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := node.DefaultConfig()
	cfg.PeerAddr = ""
	cfg.Ring.BindAddr, cfg.Ring.BindPort = "127.0.0.1", p
	err = fmt.Errorf("node: peer listen: %w", syscall.EADDRINUSE)
	if got := startHint(err, cfg); !strings.Contains(got, "the peer port 127.0.0.1:"+strconv.Itoa(p+1)+" (the gossip port + 1) is in use") {
		t.Errorf("hint %q", got)
	}
	cfg.PeerAddr = "127.0.0.1:" + strconv.Itoa(p+1)
	if got := startHint(err, cfg); got != "" {
		t.Errorf("with --peer-addr given the error names it already; hint %q", got)
	}
}
