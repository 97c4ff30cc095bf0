package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"
)

// guberNode is one `gubernator` server the suite started, every port on
// loopback.
type guberNode struct {
	*proc
	grpcAddr, httpAddr, gossipAddr string
}

// guberEnv is the environment of node name of a Gubernator cluster: its
// gRPC, HTTP and memberlist addresses, and the memberlist address of the
// cluster's first node (its own for the first). Peers are found by
// Gubernator's own memberlist discovery, seeded with that known node, as
// its docker-compose example does. Traces are not exported
// (OTEL_TRACES_EXPORTER=none: there is no collector to send them to, and
// Weir's nodes export none either); everything else is Gubernator's
// default (batching on, 500 µs batch wait, 50,000-entry cache per node).
func guberEnv(name, grpcAddr, httpAddr, gossipAddr, join string) []string {
	return []string{
		"GUBER_INSTANCE_ID=" + name,
		"GUBER_GRPC_ADDRESS=" + grpcAddr,
		"GUBER_HTTP_ADDRESS=" + httpAddr,
		"GUBER_ADVERTISE_ADDRESS=" + grpcAddr,
		"GUBER_PEER_DISCOVERY_TYPE=member-list",
		"GUBER_MEMBERLIST_NODE_NAME=" + name,
		"GUBER_MEMBERLIST_ADDRESS=" + gossipAddr,
		"GUBER_MEMBERLIST_BIND_ADDRESS=" + gossipAddr,
		"GUBER_MEMBERLIST_KNOWN_NODES=" + join,
		"GUBER_LOG_LEVEL=warn",
		"OTEL_TRACES_EXPORTER=none",
	}
}

// startGubernatorTrio starts three Gubernator nodes named g1..g3 from bin,
// the second and third joining the first, adds them to env and waits until
// each one's health check reports three healthy peers. Node i listens on
// 127.0.0.i: Gubernator's memberlist discovery keys its peers by IP
// address, so nodes that share one are taken for one peer.
func startGubernatorTrio(ctx context.Context, bin, dir string, env *suiteEnv) ([]*guberNode, error) {
	var nodes []*guberNode
	for i := range 3 {
		join := ""
		if i > 0 {
			join = nodes[0].gossipAddr
		}
		// A node that loses a picked port before binding it starts again
		// on fresh ones, as startWeir does.
		n, err := retryPortTaken(func() (*guberNode, error) { return startGuberNode(ctx, bin, dir, i, join) })
		if err != nil {
			return nil, err
		}
		env.gubernator = append(env.gubernator, n)
		nodes = append(nodes, n)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := waitGubernator(wctx, &http.Client{Timeout: 2 * time.Second}, nodes, 3); err != nil {
		return nil, err
	}
	return nodes, nil
}

// startGuberNode starts node i (g1, g2, g3) on 127.0.0.(i+1) with ports
// picked now, joining join ("": itself, the first node), and waits for
// its gRPC and HTTP ports. A node that fails is stopped.
func startGuberNode(ctx context.Context, bin, dir string, i int, join string) (*guberNode, error) {
	var a [3]string
	for j := range a {
		addr, err := freeAddrOn("127.0.0." + itoa(i+1))
		if err != nil {
			return nil, err
		}
		a[j] = addr
	}
	n := &guberNode{grpcAddr: a[0], httpAddr: a[1], gossipAddr: a[2]}
	if join == "" {
		join = n.gossipAddr
	}
	name := "g" + itoa(i+1)
	p, err := startProc(dir, "gubernator-"+name, bin, guberEnv(name, n.grpcAddr, n.httpAddr, n.gossipAddr, join))
	if err != nil {
		return nil, err
	}
	n.proc = p
	if err := waitListening(ctx, p, 20*time.Second, n.grpcAddr, n.httpAddr); err != nil {
		return nil, err
	}
	return n, nil
}

// guberHealth is the part of GET /v1/HealthCheck that is read.
type guberHealth struct {
	Status    string `json:"status"`
	PeerCount int    `json:"peer_count"`
	Message   string `json:"message"`
}

// waitGubernator polls each node's health check every 100 ms until every
// node is "healthy" with peers peers, or ctx ends.
func waitGubernator(ctx context.Context, hc *http.Client, nodes []*guberNode, peers int) error {
	last := "no answer yet"
	for {
		ready := true
		for _, n := range nodes {
			if !n.alive() {
				return fmt.Errorf("loadgen: %s ended (%w):\n%s", n.name, n.err, n.logTail())
			}
			h, err := guberHealthOf(ctx, hc, n.httpAddr)
			if err != nil || h.Status != "healthy" || h.PeerCount != peers {
				ready, last = false, fmt.Sprintf("%s: %+v %v", n.name, h, err)
				break
			}
		}
		if ready {
			return nil
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("loadgen: the 3-node Gubernator cluster did not form (%s): %w", last, ctx.Err())
		case <-t.C:
		}
	}
}

// guberHealthOf reads one node's health check.
func guberHealthOf(ctx context.Context, hc *http.Client, httpAddr string) (guberHealth, error) {
	var h guberHealth
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+httpAddr+"/v1/HealthCheck", nil)
	if err != nil {
		return h, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return h, err
	}
	defer drainClose(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return h, fmt.Errorf("health check: http %d", resp.StatusCode)
	}
	err = json.NewDecoder(resp.Body).Decode(&h)
	return h, err
}

// gubernatorSpecs lists Gubernator's three nodes over HTTP and over gRPC,
// callers spread over the nodes in turn (caller i on node i mod 3): a
// node that does not own a key forwards it to the owner, batched, as
// Gubernator does for any client.
func gubernatorSpecs(cfg suiteConfig, g []*guberNode, lim guberLimit, maxC int) []suiteSpec {
	procs := []*proc{g[0].proc, g[1].proc, g[2].proc}
	pids := []int{g[0].pid(), g[1].pid(), g[2].pid()}
	var grpcs, https []string
	for _, n := range g {
		grpcs, https = append(grpcs, n.grpcAddr), append(https, n.httpAddr)
	}
	return []suiteSpec{
		{
			info:    targetInfo{Name: "gubernator3-http", Group: "gubernator 3 nodes", Ceiling: "ceiling-http", VsRedis: true},
			servers: procs, pids: pids,
			open: func(context.Context, workload) (target, error) { return newGuberHTTPTarget(https, maxC, lim) },
		},
		{
			info:    targetInfo{Name: "gubernator3-grpc", Group: "gubernator 3 nodes", Ceiling: "ceiling-grpc", VsRedis: true},
			servers: procs, pids: pids,
			open: func(context.Context, workload) (target, error) { return newGuberGRPCTarget(grpcs, lim) },
		},
	}
}

// gubernatorWhyNot says why bin cannot run, or "" when it is an
// executable file.
func gubernatorWhyNot(bin string) string {
	if bin == "" {
		return "no -gubernator binary given"
	}
	st, err := os.Stat(bin)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "`" + bin + "` is not built: `make gubernator` builds it (bench/gubernator.sh), and `make bench` tries to"
	case err != nil:
		return err.Error()
	case st.IsDir() || st.Mode()&0o111 == 0:
		return "`" + bin + "` is not an executable file"
	}
	return ""
}

// gubernatorVersion is the one line bench/gubernator.sh wrote beside bin
// saying what it built, or "unknown".
func gubernatorVersion(bin string) string {
	b, err := os.ReadFile(bin + ".version")
	if err != nil {
		return "unknown (no " + bin + ".version)"
	}
	return strings.TrimSpace(string(b))
}

// gubernatorTargets are the names of the Gubernator targets.
var gubernatorTargets = []string{"gubernator3-http", "gubernator3-grpc"}

// startGubernator starts Gubernator's three nodes into env when a
// Gubernator target is selected and cfg.GubernatorBin can run; otherwise
// it records in env why they are not run. A cluster that fails to form
// stops the suite: a binary that is there must work.
func startGubernator(ctx context.Context, cfg suiteConfig, dir string, env *suiteEnv) error {
	wanted := len(cfg.Targets) == 0 || slices.ContainsFunc(gubernatorTargets, func(t string) bool {
		return slices.Contains(cfg.Targets, t)
	})
	if !wanted {
		return nil
	}
	if env.guberWhyNot = gubernatorWhyNot(cfg.GubernatorBin); env.guberWhyNot != "" {
		return nil
	}
	_, err := startGubernatorTrio(ctx, cfg.GubernatorBin, dir, env)
	return err
}
