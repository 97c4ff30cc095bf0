package jepsen

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Nodes is a cluster under test as a scenario drives it: N weir nodes,
// numbered from 1, that can be started, killed, paused and cut off from
// each other. Cluster (processes in network namespaces) and Compose (the
// deploy/ docker compose cluster) implement it. Methods are safe for
// concurrent use.
type Nodes interface {
	// N is the number of nodes.
	N() int
	// URL is node i's public HTTP base URL, reachable from the runner.
	URL(i int) string
	// Start starts node i (again, after Kill or Stop).
	Start(i int) error
	// Kill stops node i without warning (SIGKILL) and waits for it.
	Kill(i int) error
	// Stop asks node i to leave gracefully (SIGTERM) and waits up to
	// timeout.
	Stop(i int, timeout time.Duration) error
	// Pause freezes node i; Resume thaws it.
	Pause(i int) error
	Resume(i int) error
	// Upgrade makes node i's next Start run the new binary instead of
	// the old one (a rolling upgrade); an error when the backend has one
	// binary only.
	Upgrade(i int) error
	// SetClockOffset sets the decision clock offset node i gets at its
	// next Start; an error when the backend cannot.
	SetClockOffset(i int, d time.Duration) error
	// Block silently drops all traffic between node i and each of peers,
	// both ways, leaving the runner's path to i untouched.
	Block(ctx context.Context, i int, peers []int) error
	// Deafen silently drops what node i receives from each of from, and
	// nothing it sends: a one-way cut.
	Deafen(ctx context.Context, i int, from []int) error
	// Loss drops each packet between node i and each of peers with
	// probability p, both ways.
	Loss(ctx context.Context, i int, peers []int, p float64) error
	// Heal removes every rule Block, Deafen and Loss added at node i.
	Heal(ctx context.Context, i int) error
	// Close stops every node and releases what the backend holds.
	Close()
}

// Member is one member in a node's /v1/cluster answer.
type Member struct {
	Name  string `json:"name"`
	Addr  string `json:"addr"`
	State string `json:"state"`
}

// Info is a node's /v1/cluster answer.
type Info struct {
	Node    string   `json:"node"`
	Epoch   uint64   `json:"epoch"`
	Members []Member `json:"members"`
	Owner   string   `json:"owner"`
}

// Prober asks the nodes of a Nodes about their views over HTTP.
type Prober struct {
	Nodes Nodes
	// Name maps a node number to the name the nodes use for it.
	Name func(i int) string
	http *http.Client
}

// NewProber returns a Prober for ns whose node i is called name(i).
func NewProber(ns Nodes, name func(int) string) *Prober {
	return &Prober{Nodes: ns, Name: name, http: &http.Client{Timeout: time.Second, Transport: &http.Transport{
		MaxIdleConnsPerHost: 4, IdleConnTimeout: 5 * time.Second,
	}}}
}

// Close drops the idle connections.
func (p *Prober) Close() { p.http.CloseIdleConnections() }

// Info asks node i for its view; with limit and key set, also their owner.
func (p *Prober) Info(ctx context.Context, i int, limit, key string) (Info, error) {
	u := p.Nodes.URL(i) + "/v1/cluster"
	if limit != "" {
		u += "?limit=" + url.QueryEscape(limit) + "&key=" + url.QueryEscape(key)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return Info{}, fmt.Errorf("jepsen: %w", err)
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return Info{}, fmt.Errorf("jepsen: %s: %w", p.Name(i), err)
	}
	defer resp.Body.Close()
	var in Info
	if resp.StatusCode != http.StatusOK {
		return in, fmt.Errorf("jepsen: %s: /v1/cluster status %d", p.Name(i), resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&in); err != nil {
		return in, fmt.Errorf("jepsen: %s: %w", p.Name(i), err)
	}
	return in, nil
}

// Converged reports whether every node in nodes answers, lists exactly the
// members named want, all alive, and names the same owner for every sample
// (limit, key). It returns a reason when not.
func (p *Prober) Converged(ctx context.Context, nodes []int, want []string, samples []BucketID) (bool, string) {
	owners := make(map[BucketID]string)
	for _, i := range nodes {
		in, err := p.Info(ctx, i, "", "")
		if err != nil {
			return false, err.Error()
		}
		var alive []string
		for _, m := range in.Members {
			if m.State == "alive" {
				alive = append(alive, m.Name)
			}
		}
		slices.Sort(alive)
		if len(in.Members) != len(want) || !slices.Equal(alive, want) {
			return false, fmt.Sprintf("%s sees %v alive of %d members", p.Name(i), alive, len(in.Members))
		}
		for _, s := range samples {
			in, err := p.Info(ctx, i, s.Limit, s.Key)
			if err != nil {
				return false, err.Error()
			}
			if o, ok := owners[s]; ok && o != in.Owner {
				return false, fmt.Sprintf("owner of %s/%s: %s says %s, others %s", s.Limit, s.Key, p.Name(i), in.Owner, o)
			}
			owners[s] = in.Owner
		}
	}
	return true, ""
}

// WaitConverged polls Converged every 100ms until it holds or ctx ends; it
// returns how long that took and the last reason on failure.
func (p *Prober) WaitConverged(ctx context.Context, nodes []int, want []string, samples []BucketID) (time.Duration, error) {
	start := time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		ok, why := p.Converged(qctx, nodes, want, samples)
		cancel()
		if ok {
			return time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return time.Since(start), fmt.Errorf("jepsen: not converged after %v: %s", time.Since(start).Round(time.Millisecond), why)
		case <-tick.C:
		}
	}
}

// Metrics returns node i's Prometheus metrics whose names start with
// prefix, each summed over its label sets.
func (p *Prober) Metrics(ctx context.Context, i int, prefix string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.Nodes.URL(i)+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("jepsen: %w", err)
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("jepsen: %s: %w", p.Name(i), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("jepsen: %s: /metrics status %d", p.Name(i), resp.StatusCode)
	}
	out := make(map[string]float64)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		name, rest, _ := strings.Cut(line, " ")
		if j := strings.IndexByte(name, '{'); j >= 0 {
			name, rest = name[:j], line[strings.LastIndexByte(line, ' ')+1:]
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64); err == nil {
			out[name] += v
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("jepsen: %s: /metrics: %w", p.Name(i), err)
	}
	return out, nil
}
