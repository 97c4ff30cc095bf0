package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// clusterView is the part of a node's GET /v1/cluster answer loadgen
// reads.
type clusterView struct {
	Node    string `json:"node"`
	Owner   string `json:"owner"`
	Members []struct {
		Name  string `json:"name"`
		State string `json:"state"`
	} `json:"members"`
}

// alive returns the number of members in state "alive".
func (v clusterView) alive() int {
	n := 0
	for _, m := range v.Members {
		if m.State == "alive" {
			n++
		}
	}
	return n
}

// clusterURL returns the /v1/cluster URL of a node's HTTP address (host:port
// or a base URL), asking for the owner of (limit, key) when limit is set.
func clusterURL(addr, limit, key string) string {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u := strings.TrimSuffix(addr, "/") + "/v1/cluster"
	if limit != "" {
		u += "?" + url.Values{"limit": {limit}, "key": {key}}.Encode()
	}
	return u
}

// fetchCluster GETs one node's view of the cluster.
func fetchCluster(ctx context.Context, client *http.Client, addr, limit, key string) (clusterView, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, clusterURL(addr, limit, key), nil)
	if err != nil {
		return clusterView{}, fmt.Errorf("loadgen: cluster: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return clusterView{}, fmt.Errorf("loadgen: cluster: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return clusterView{}, fmt.Errorf("loadgen: cluster: %s: %w", addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		return clusterView{}, fmt.Errorf("loadgen: cluster: %s: %s: %.200s", addr, resp.Status, body)
	}
	var v clusterView
	if err := json.Unmarshal(body, &v); err != nil {
		return clusterView{}, fmt.Errorf("loadgen: cluster: %s: %w", addr, err)
	}
	return v, nil
}

// waitCluster polls every node in addrs every poll until each one's view
// has exactly members members, all alive, or ctx ends. It returns the
// views that satisfied it, or an error naming the last view that did not.
func waitCluster(ctx context.Context, client *http.Client, addrs []string, members int, poll time.Duration) ([]clusterView, error) {
	tick := time.NewTicker(poll)
	defer tick.Stop()
	var lastErr error // what the last complete poll found wrong
	for {
		views := make([]clusterView, 0, len(addrs))
		var err error
		for _, a := range addrs {
			var v clusterView
			v, err = fetchCluster(ctx, client, a, "", "")
			if err == nil && (len(v.Members) != members || v.alive() != members) {
				err = fmt.Errorf("loadgen: cluster: %s (%s) sees %d members, %d alive, want %d alive",
					a, v.Node, len(v.Members), v.alive(), members)
			}
			if err != nil {
				break
			}
			views = append(views, v)
		}
		if err == nil {
			return views, nil
		}
		if ctx.Err() == nil || lastErr == nil {
			// A request cut by the deadline says less than the poll before.
			lastErr = err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (%w)", lastErr, ctx.Err())
		case <-tick.C:
		}
	}
}

// clusterWait implements `loadgen cluster-wait`.
func clusterWait(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadgen cluster-wait", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addrs := fs.String("addrs", "", "comma-separated node HTTP addresses (required)")
	members := fs.Int("members", 0, "members every node must see, all alive (required)")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return exitFlag(err)
	}
	var list []string
	for a := range strings.SplitSeq(*addrs, ",") {
		if a = strings.TrimSpace(a); a != "" {
			list = append(list, a)
		}
	}
	if len(list) == 0 || *members < 1 || *timeout <= 0 || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "loadgen cluster-wait: need -addrs, -members >= 1 and a positive -timeout, and no arguments")
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	client, done := shortClient()
	defer done()
	views, err := waitCluster(ctx, client, list, *members, 100*time.Millisecond)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	for i, v := range views {
		fmt.Fprintf(stdout, "%s (%s): %d members alive\n", list[i], v.Node, v.alive())
	}
	return 0
}

// owner implements `loadgen owner`: it prints the name of the member that
// owns (limit, key) in the view of the node at -addr.
func owner(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadgen owner", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8080", "node HTTP address")
	limit := fs.String("limit", "bench", "limit name")
	key := fs.String("key", "k0", "key")
	if err := fs.Parse(args); err != nil {
		return exitFlag(err)
	}
	if *limit == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "loadgen owner: need -limit, and no arguments")
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	client, done := shortClient()
	defer done()
	v, err := fetchCluster(ctx, client, *addr, *limit, *key)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if v.Owner == "" {
		fmt.Fprintf(stderr, "loadgen owner: %s names no owner for %s/%s\n", *addr, *limit, *key)
		return 1
	}
	fmt.Fprintln(stdout, v.Owner)
	return 0
}

// shortClient returns an HTTP client for a few control requests and the
// function that closes its connections.
func shortClient() (*http.Client, func()) {
	tr := &http.Transport{DisableKeepAlives: true}
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}, tr.CloseIdleConnections
}

// exitFlag maps a flag parsing error to an exit code: 0 for -h, else 2.
func exitFlag(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}
