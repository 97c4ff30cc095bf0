package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// The node metrics a cell reads before and after its measured phase
// (node/cluster_run.go): every forwarded batch observes its size, so the
// histogram's sum is the requests forwarded and its count the batches.
const (
	metricBatchSum      = "weir_forward_batch_size_sum"
	metricBatchCount    = "weir_forward_batch_size_count"
	metricForwardErrors = "weir_forward_errors_total"
)

// forwardStats is the forwarding nodes have done since they started, summed
// over the nodes scraped.
type forwardStats struct {
	Requests float64 // requests forwarded to an owner (batch size sum)
	Batches  float64 // batches sent (batch size count)
	Errors   float64 // forwards that did not reach the owner in time
}

// sub returns s - o, the forwarding between two scrapes.
func (s forwardStats) sub(o forwardStats) forwardStats {
	return forwardStats{Requests: s.Requests - o.Requests, Batches: s.Batches - o.Batches, Errors: s.Errors - o.Errors}
}

// metricsURL turns a node's HTTP address (host:port or a base URL) into the
// URL of its /metrics.
func metricsURL(addr string) string {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	return strings.TrimSuffix(addr, "/") + "/metrics"
}

// scrapeForward fetches every URL (a node's /metrics) and sums their
// forwarding counters. A node without forwarding metrics (a cluster of one
// without gossip) counts as zero.
func scrapeForward(ctx context.Context, client *http.Client, urls []string) (forwardStats, error) {
	var total forwardStats
	for _, u := range urls {
		m, err := scrapeMetrics(ctx, client, u, metricBatchSum, metricBatchCount, metricForwardErrors)
		if err != nil {
			return forwardStats{}, err
		}
		total.Requests += m[metricBatchSum]
		total.Batches += m[metricBatchCount]
		total.Errors += m[metricForwardErrors]
	}
	return total, nil
}

// scrapeMetrics GETs one Prometheus text exposition and returns, for each
// of names, the sum of its samples over all label sets.
func scrapeMetrics(ctx context.Context, client *http.Client, url string, names ...string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("loadgen: metrics: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("loadgen: metrics: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("loadgen: metrics: GET %s: %s", url, resp.Status)
	}
	m, err := parseMetrics(io.LimitReader(resp.Body, 16<<20), names...)
	if err != nil {
		return nil, fmt.Errorf("loadgen: metrics: %s: %w", url, err)
	}
	return m, nil
}

// parseMetrics reads the Prometheus text format (version 0.0.4) and
// returns, for each of names, the sum of its samples over all label sets;
// a name with no sample is absent. Comment lines are skipped; a sample
// line is `name[{labels}] value [timestamp]`, where label values are
// quoted strings that may hold spaces, braces and escaped quotes.
func parseMetrics(r io.Reader, names ...string) (map[string]float64, error) {
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == '#' {
			continue
		}
		name, value, err := splitSample(s)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if !want[name] {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil || math.IsNaN(v) {
			return nil, fmt.Errorf("line %d: bad value %q for %s", line, value, name)
		}
		out[name] += v
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// splitSample splits a sample line into the metric name and the value
// field, skipping the label set and any timestamp.
func splitSample(s string) (name, value string, err error) {
	i := strings.IndexAny(s, "{ \t")
	if i <= 0 {
		return "", "", errors.New("no value")
	}
	name, rest := s[:i], s[i:]
	if rest[0] == '{' {
		end, err := labelsEnd(rest)
		if err != nil {
			return "", "", err
		}
		rest = rest[end:]
	}
	f := strings.Fields(rest)
	if len(f) < 1 || len(f) > 2 {
		return "", "", fmt.Errorf("want a value and an optional timestamp after %s", name)
	}
	return name, f[0], nil
}

// labelsEnd returns the index just after the '}' that closes the label set
// s starts with, skipping braces inside quoted label values.
func labelsEnd(s string) (int, error) {
	inQuote := false
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case inQuote && c == '\\':
			i++ // the escaped character
		case c == '"':
			inQuote = !inQuote
		case !inQuote && c == '}':
			return i + 1, nil
		}
	}
	return 0, errors.New("unterminated label set")
}
