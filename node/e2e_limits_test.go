package node_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-rl/weir/node"
)

const limitsV1 = `version: 1
limits:
  - name: old
    algorithm: token_bucket
    capacity: 3
    rate: 1/h
`

const limitsBroken = `version: 2
limits:
  - name: old
    algorithm: token_bucket
    capacity: -3
    rate: 1/h
`

const limitsV5 = `version: 5
limits:
  - name: old
    algorithm: token_bucket
    capacity: 3
    rate: 1/h
  - name: new
    algorithm: token_bucket
    capacity: 4
    rate: 1/h
`

func TestLimitsReload(t *testing.T) {
	path := writeLimits(t, limitsV1)
	tn := startNode(t, func(c *node.Config) { c.LimitsPath = path })
	if got := tn.take(checkJSON{"old", "k", 1}); !got.Allowed || got.RulesVersion != 1 || got.Results[0].Remaining != 2 {
		t.Fatalf("take under v1 = %+v", got)
	}
	if r := tn.post("/v1/take", takeBody(checkJSON{"new", "k", 1})); r.status != http.StatusBadRequest {
		t.Fatalf("take on a limit not yet defined = %d, want 400", r.status)
	}

	// A broken file: the watcher rejects it once (identical content is not
	// read again), then SIGHUP's reload rejects it once more.
	replaceFile(t, path, limitsBroken)
	waitFor(t, "the watcher to reject the broken file", 10*time.Second, func() bool {
		return tn.metric("weir_limits_reload_failures_total") >= 1
	})
	err := tn.n.ReloadLimits()
	if err == nil {
		t.Fatal("ReloadLimits of a broken file = nil, want an error")
	}
	if !strings.Contains(err.Error(), "line 5") {
		t.Errorf("reload error %q does not name line 5", err)
	}
	scrape := tn.metrics()
	for series, want := range map[string]float64{
		"weir_limits_reload_failures_total": 2,
		"weir_limits_reloads_total":         0,
		"weir_limits_version":               1,
	} {
		if got, _ := metricValue(scrape, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if v := tn.n.Limits().Version; v != 1 {
		t.Fatalf("Limits().Version = %d after a rejected reload, want 1", v)
	}
	// The old limit is still in force, with its state.
	if got := tn.take(checkJSON{"old", "k", 1}); !got.Allowed || got.RulesVersion != 1 || got.Results[0].Remaining != 1 {
		t.Fatalf("take after a rejected reload = %+v, want allowed under v1 with remaining 1", got)
	}

	// A valid change with a new version: picked up by the watcher, then
	// again by an explicit reload.
	replaceFile(t, path, limitsV5)
	waitFor(t, "the watcher to load version 5", 10*time.Second, func() bool {
		return tn.metric("weir_limits_version") == 5
	})
	if v := tn.metric("weir_limits_reloads_total"); v != 1 {
		t.Fatalf("weir_limits_reloads_total = %v, want 1", v)
	}
	if err := tn.n.ReloadLimits(); err != nil {
		t.Fatalf("ReloadLimits of a valid file: %v", err)
	}
	if v := tn.metric("weir_limits_reloads_total"); v != 2 {
		t.Fatalf("weir_limits_reloads_total = %v after an explicit reload, want 2", v)
	}
	got := tn.take(checkJSON{"new", "k", 1})
	if !got.Allowed || got.RulesVersion != 5 || got.Results[0].Capacity != 4 || got.Results[0].Remaining != 3 {
		t.Fatalf("take on the new limit = %+v, want allowed under v5, 3 of 4 left", got)
	}
	if got := tn.take(checkJSON{"old", "k", 1}); got.RulesVersion != 5 {
		t.Fatalf("rules_version = %d, want 5", got.RulesVersion)
	}
	if v := tn.metric("weir_limits_reload_failures_total"); v != 2 {
		t.Fatalf("reload failures = %v, want still 2", v)
	}
}

func TestReloadWithoutLimitsFileFails(t *testing.T) {
	tn := startNode(t, nil)
	if err := tn.n.ReloadLimits(); err == nil {
		t.Fatal("ReloadLimits with the embedded default = nil, want an error")
	}
	if got := tn.n.Limits().Source; got != "embedded default" {
		t.Fatalf("Limits().Source = %q, want %q", got, "embedded default")
	}
}

func TestNewRejectsBrokenLimitsFile(t *testing.T) {
	path := writeLimits(t, limitsBroken)
	_, err := node.New(node.LocalConfig(), node.Deps{})
	if err != nil {
		t.Fatalf("New with the default: %v", err)
	}
	cfg := node.LocalConfig()
	cfg.LimitsPath = path
	if _, err := node.New(cfg, node.Deps{}); err == nil || !strings.Contains(err.Error(), "line 5") {
		t.Fatalf("New with a broken file: %v, want an error naming line 5", err)
	}
}

func TestShadowLimitAllowsAndCounts(t *testing.T) {
	path := writeLimits(t, `version: 7
limits:
  - name: dark
    algorithm: token_bucket
    capacity: 2
    rate: 1/h
    shadow: true
`)
	tn := startNode(t, func(c *node.Config) { c.LimitsPath = path })
	for i := range 5 {
		got := tn.take(checkJSON{"dark", "k", 1})
		if !got.Allowed || !got.Results[0].Allowed || got.RetryAfterMs != 0 {
			t.Fatalf("shadow take %d = %+v, want allowed", i+1, got)
		}
		if want := max(int64(1-i), 0); got.Results[0].Remaining != want {
			t.Fatalf("shadow take %d remaining = %d, want %d", i+1, got.Results[0].Remaining, want)
		}
	}
	if r := tn.do(http.MethodGet, "/v1/check?limit=dark&key=k", ""); r.status != http.StatusOK {
		t.Fatalf("forward-auth on an over-capacity shadow limit = %d, want 200", r.status)
	}
	scrape := tn.metrics()
	for series, want := range map[string]float64{
		`weir_decisions_total{limit="dark",outcome="shadow_denied",source="owner"}`: 4,
		`weir_decisions_total{limit="dark",outcome="allowed",source="owner"}`:       6,
	} {
		if got, _ := metricValue(scrape, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if _, ok := metricValue(scrape, `weir_denials_total{kind="policy",limit="dark"}`); ok {
		t.Errorf("a shadow limit counted a policy denial")
	}
}

func TestConcurrentTakesAdmitExactlyCapacity(t *testing.T) {
	path := writeLimits(t, `version: 1
limits:
  - name: burst
    algorithm: token_bucket
    capacity: 100
    rate: 1/h
`)
	tn := startNode(t, func(c *node.Config) { c.LimitsPath = path })
	body := takeBody(checkJSON{"burst", "one-key", 1})
	var allowed, denied, failed atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 1000 {
		wg.Go(func() {
			<-start
			req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, tn.base+"/v1/take", strings.NewReader(body))
			if err != nil {
				failed.Add(1)
				return
			}
			resp, err := tn.hc.Do(req)
			if err != nil {
				failed.Add(1)
				return
			}
			defer resp.Body.Close()
			s, err := readAll(resp)
			switch {
			case err != nil || resp.StatusCode != http.StatusOK:
				failed.Add(1)
			case strings.HasPrefix(s, `{"allowed":true`):
				allowed.Add(1)
			case strings.HasPrefix(s, `{"allowed":false`):
				denied.Add(1)
			default:
				failed.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	if allowed.Load() != 100 || denied.Load() != 900 || failed.Load() != 0 {
		t.Fatalf("allowed %d, denied %d, failed %d; want 100, 900, 0", allowed.Load(), denied.Load(), failed.Load())
	}
	if v := tn.metric(`weir_decisions_total{limit="burst",outcome="allowed",source="owner"}`); v != 100 {
		t.Fatalf("allowed decisions metric = %v, want 100", v)
	}
}
