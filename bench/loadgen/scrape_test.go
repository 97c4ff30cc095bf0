package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const exposition = `# HELP weir_forward_batch_size Requests per forwarded batch.
# TYPE weir_forward_batch_size histogram
weir_forward_batch_size_bucket{le="1"} 3
weir_forward_batch_size_bucket{le="+Inf"} 7
weir_forward_batch_size_sum 19
weir_forward_batch_size_count 7
# TYPE weir_forward_errors_total counter
weir_forward_errors_total{peer="127.0.0.1:1"} 2
weir_forward_errors_total{peer="a b}c\"d"} 3 1700000000000
weir_forward_errors_total_extra 100

weir_requests_total{limit="x",code="ok"} +Inf
`

func TestParseMetrics(t *testing.T) {
	m, err := parseMetrics(strings.NewReader(exposition), metricBatchSum, metricBatchCount, metricForwardErrors, "absent")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{metricBatchSum: 19, metricBatchCount: 7, metricForwardErrors: 5}
	if len(m) != len(want) {
		t.Fatalf("parsed %v, want %v (a name with no sample is absent)", m, want)
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v (summed over label sets)", k, m[k], v)
		}
	}
	for _, bad := range []string{
		"weir_forward_batch_size_sum\n",                  // no value
		"weir_forward_batch_size_sum x\n",                // not a number
		"weir_forward_batch_size_sum NaN\n",              // not a count
		"weir_forward_batch_size_sum 1 2 3\n",            // too many fields
		`weir_forward_errors_total{peer="a} 1` + "\n",    // unterminated quote
		"weir_forward_errors_total{peer=\"a\"\n",         // unterminated label set
		"{le=\"1\"} 3\n",                                 // no name
		"weir_forward_batch_size_count{} \n",             // label set, no value
		"weir_forward_batch_size_sum 1\nweir_x{a=\"\"\n", // an unrelated bad line still fails
	} {
		if _, err := parseMetrics(strings.NewReader(bad), metricBatchSum, metricBatchCount, metricForwardErrors); err == nil {
			t.Errorf("parseMetrics(%q) accepted", bad)
		}
	}
}

func TestMetricsURL(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:8080":         "http://127.0.0.1:8080/metrics",
		"http://127.0.0.1:8080/": "http://127.0.0.1:8080/metrics",
		"https://n1:1":           "https://n1:1/metrics",
	} {
		if got := metricsURL(in); got != want {
			t.Errorf("metricsURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// counterServer serves forwarding counters that grow by 10 forwarded
// requests in 4 batches and 1 error on every scrape.
func counterServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		i := n.Add(1)
		fmt.Fprintf(w, "%s %d\n%s %d\n%s{peer=\"x\"} %d\n", metricBatchSum, 10*i, metricBatchCount, 4*i, metricForwardErrors, i)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestScrapeForward(t *testing.T) {
	a, _ := counterServer(t)
	b, _ := counterServer(t)
	empty := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "# a node without forwarding metrics")
	}))
	defer empty.Close()
	ctx := context.Background()
	urls := []string{metricsURL(a.URL), metricsURL(b.URL), metricsURL(empty.URL)}
	got, err := scrapeForward(ctx, a.Client(), urls)
	if err != nil || got != (forwardStats{Requests: 20, Batches: 8, Errors: 2}) {
		t.Fatalf("scrapeForward = %+v, %v, want 20 forwarded in 8 batches, 2 errors", got, err)
	}
	if _, err := scrapeForward(ctx, a.Client(), []string{a.URL + "/nope"}); err == nil {
		t.Error("a 404 /metrics: accepted")
	}
	if _, err := scrapeForward(ctx, a.Client(), []string{"http://127.0.0.1:0/metrics"}); err == nil {
		t.Error("an unreachable node: accepted")
	}
}

// TestRunCellScrapes: a cell reads the counters once at the start of its
// measured phase and once after it, and reports the difference.
func TestRunCellScrapes(t *testing.T) {
	a, n := counterServer(t)
	res, err := runCell(context.Background(), &fakeTarget{keys: map[int]int{}}, cellConfig{
		Concurrency: 2, Requests: 100, Keys: 1, MetricsURLs: []string{metricsURL(a.URL)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n.Load() != 2 || !res.Scraped || res.MetricsError != "" {
		t.Fatalf("%d scrapes, scraped %v (%q), want 2 and true", n.Load(), res.Scraped, res.MetricsError)
	}
	if res.Forwarded != 10 || res.ForwardBatches != 4 || res.ForwardErrors != 1 || res.meanBatch() != 2.5 || res.forwardsPerDecision() != 0.1 {
		t.Fatalf("forwarded %v in %v batches (mean %v, %v per decision), %v errors; want 10, 4, 2.5, 0.1, 1",
			res.Forwarded, res.ForwardBatches, res.meanBatch(), res.forwardsPerDecision(), res.ForwardErrors)
	}

	// A node that cannot be read: the cell still runs and says why.
	res, err = runCell(context.Background(), &fakeTarget{keys: map[int]int{}}, cellConfig{
		Concurrency: 1, Requests: 10, Keys: 1, Timeout: time.Second, MetricsURLs: []string{a.URL + "/nope"},
	})
	if err != nil || res.Scraped || res.MetricsError == "" || res.Decisions != 10 {
		t.Fatalf("unreadable metrics: %+v, %v", res, err)
	}
}

// TestScrapeInProcessNode reads a real node's /metrics: a node that has
// forwarded nothing reports zeros, not an error.
func TestScrapeInProcessNode(t *testing.T) {
	n := startNode(t)
	got, err := scrape(context.Background(), []string{metricsURL(n.HTTPAddr())})
	if err != nil || got != (forwardStats{}) {
		t.Fatalf("scrape = %+v, %v, want zeros", got, err)
	}
}
