package main

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"

	"github.com/weir-rl/weir/node"
)

// startHint explains a start failure that names the wrong thing. The node
// opens its peer port before the gossip port, and the peer port defaults
// to the gossip port + 1; a second node started with the same
// --gossip-addr fails on the first node's peer port, so the error names
// the peer port while the mistake is the gossip port. When the peer port
// was derived and is in use, startHint checks the gossip port itself and
// says which flag to change; "" when it has nothing to add.
func startHint(err error, cfg node.Config) string {
	if !errors.Is(err, syscall.EADDRINUSE) || cfg.PeerAddr != "" || !cfg.Clustered {
		return ""
	}
	gossip := net.JoinHostPort(cfg.Ring.BindAddr, strconv.Itoa(cfg.Ring.BindPort))
	peer := cfg.PeerListenAddr()
	if ln, lerr := net.Listen("tcp", gossip); lerr == nil {
		_ = ln.Close()
		return fmt.Sprintf("the peer port %s (the gossip port + 1) is in use by another program: set --peer-addr, or pick another --gossip-addr", peer)
	} else if !errors.Is(lerr, syscall.EADDRINUSE) {
		return ""
	}
	return fmt.Sprintf("the gossip port %s is in use (another weir on this host with the same --gossip-addr?): give each node its own --gossip-addr; its peer port is the next one (%s) unless --peer-addr says otherwise",
		gossip, peer)
}
