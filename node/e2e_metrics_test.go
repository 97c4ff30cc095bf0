package node_test

import (
	"net/http"
	"strings"
	"testing"
)

func TestMetricsCountDecisionsAndDenials(t *testing.T) {
	tn := startNode(t, nil)
	const key = "tenant:metrics-secret-4411"
	for range 7 { // six allowed, one denied
		tn.take(checkJSON{"export", key, 1})
	}
	if r := tn.do(http.MethodGet, "/v1/check?limit=export&key="+key, ""); r.status != http.StatusTooManyRequests {
		t.Fatalf("check = %d, want 429", r.status)
	}
	for range 8 {
		tn.acquire(`{"limit":"export-db","key":"` + key + `"}`)
	}
	if r := tn.post("/v1/leases", `{"limit":"export-db","key":"`+key+`"}`); r.status != http.StatusTooManyRequests {
		t.Fatalf("ninth lease = %d, want 429", r.status)
	}

	scrape := tn.metrics()
	for series, want := range map[string]float64{
		`weir_decisions_total{limit="export",outcome="allowed",source="owner"}`: 6,
		`weir_decisions_total{limit="export",outcome="denied",source="owner"}`:  2,
		`weir_denials_total{kind="policy",limit="export"}`:                      2,
		`weir_denials_total{kind="concurrency",limit="export-db"}`:              1,
		`weir_lease_events_total{event="granted",limit="export-db"}`:            8,
		`weir_lease_events_total{event="refused",limit="export-db"}`:            1,
		`weir_leases_held`:                                8,
		`weir_buckets`:                                    1,
		`weir_buckets_max`:                                10_000,
		`weir_limits_version`:                             3,
		`weir_limits_reload_failures_total`:               0,
		`weir_decision_duration_seconds_count{op="take"}`: 8,
	} {
		got, ok := metricValue(scrape, series)
		if !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, want)
		}
	}
	if strings.Contains(scrape, key) {
		t.Fatalf("/metrics contains the caller's key")
	}
	if _, ok := metricValue(scrape, `weir_denials_total{kind="fallback",limit="export"}`); ok {
		t.Errorf("a cluster of one counted a fallback denial")
	}
}
