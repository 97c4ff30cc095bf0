package deploytest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

const (
	promDir       = "../prometheus"
	dashboardPath = "../grafana/weir-dashboard.json"
	rulesPath     = "../prometheus/rules/weir.rules.yml"
)

// TestPromtoolChecksShippedFiles runs promtool on the shipped configs and
// rules, and the rules' unit tests (each alert fires past its threshold).
func TestPromtoolChecksShippedFiles(t *testing.T) {
	promtool := needTool(t, "promtool")
	for _, args := range [][]string{
		{"check", "config", filepath.Join(promDir, "prometheus.yml")},
		{"check", "config", filepath.Join(promDir, "prometheus-compose.yml")},
		{"check", "rules", rulesPath},
		{"test", "rules", filepath.Join(promDir, "rules", "weir.rules.test.yml")},
	} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// alertQuery splits an alert expression written `QUERY OP THRESHOLD` (the
// convention of weir.rules.yml) into QUERY. The comparison is the loosest
// binding operator in the expression, so QUERY is its whole left side; an
// expression with and/or/unless, where that would not hold, is refused.
var alertThreshold = regexp.MustCompile(`(?s)^(.*\S)\s*(>|<|>=|<=|==|!=)\s*(bool\s+)?-?[0-9.]+(e[+-]?[0-9]+)?\s*$`)

func alertQuery(expr string) (string, error) {
	if regexp.MustCompile(`\b(and|or|unless)\b`).MatchString(expr) {
		return "", fmt.Errorf("uses and/or/unless: write it as QUERY OP THRESHOLD")
	}
	m := alertThreshold.FindStringSubmatch(expr)
	if m == nil {
		return "", fmt.Errorf("does not end in a comparison with a number")
	}
	return m[1], nil
}

// shippedAlerts returns alert name → expression from weir.rules.yml.
func shippedAlerts(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(rulesPath)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			for _, a := range []string{"summary", "description", "runbook"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("alert %s has no %s", r.Alert, a)
				}
			}
			out[r.Alert] = strings.TrimSpace(r.Expr)
		}
	}
	return out
}

// dashboardQueries returns "panel / refId" → expression for every target
// of the dashboard, with Grafana's variables replaced by what they mean
// when every node is selected.
func dashboardQueries(t *testing.T) map[string]string {
	t.Helper()
	d := loadDashboard(t)
	out := map[string]string{}
	for _, p := range d.allPanels() {
		for _, tg := range p.Targets {
			e := strings.NewReplacer(`$__rate_interval`, `15s`, `$instance`, `.*`).Replace(tg.Expr)
			out[p.Title+" / "+tg.RefID] = e
		}
	}
	for _, v := range d.Templating.List {
		if q, ok := strings.CutPrefix(v.Definition, "label_values("); ok {
			metric, _, _ := strings.Cut(q, ",")
			out["variable "+v.Name] = strings.TrimSpace(metric)
		}
	}
	return out
}

// prom is a Prometheus process and its HTTP API.
type prom struct {
	base string
	hc   *http.Client
}

// startPrometheus runs Debian's prometheus scraping targets every 500 ms,
// with the shipped rules, from a config derived from the shipped one (its
// scrape job with static targets in place of DNS discovery).
func startPrometheus(t *testing.T, targets []string) *prom {
	t.Helper()
	bin := needTool(t, "prometheus")
	b, err := os.ReadFile(filepath.Join(promDir, "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	rules, err := filepath.Abs(rulesPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg["global"] = map[string]any{"scrape_interval": "500ms", "evaluation_interval": "500ms"}
	cfg["rule_files"] = []string{rules}
	jobs := cfg["scrape_configs"].([]any)
	job := jobs[0].(map[string]any)
	delete(job, "dns_sd_configs")
	job["static_configs"] = []any{map[string]any{"targets": targets}}
	job["scrape_timeout"] = "400ms"
	cfg["scrape_configs"] = []any{job}
	dir := t.TempDir()
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	cmd := exec.Command(bin, "--config.file="+path, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		_ = logf.Close()
		if t.Failed() {
			if log, err := os.ReadFile(logf.Name()); err == nil {
				t.Logf("prometheus log:\n%s", log)
			}
		}
	})
	p := &prom{base: "http://" + addr, hc: &http.Client{Timeout: 5 * time.Second}}
	t.Cleanup(p.hc.CloseIdleConnections)
	waitFor(t, 20*time.Second, "prometheus ready", func() bool {
		select {
		case <-exited:
			t.Fatalf("prometheus exited (log in %s)", logf.Name())
		default:
		}
		resp, err := p.hc.Get(p.base + "/-/ready")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

// freeAddr returns a loopback address nothing listens on right now
// (Prometheus does not report a port it picked itself).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// queryResult is the part of an instant query's answer the test reads.
type queryResult struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string            `json:"resultType"`
		Result     []json.RawMessage `json:"result"`
	} `json:"data"`
}

// query runs an instant query; a parse error is an error.
func (p *prom) query(ctx context.Context, expr string) (queryResult, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/api/v1/query?"+url.Values{"query": {expr}}.Encode(), nil)
	if err != nil {
		return queryResult{}, err
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		return queryResult{}, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var r queryResult
	if err := json.Unmarshal(body, &r); err != nil {
		return r, fmt.Errorf("HTTP %d: %s", resp.StatusCode, body)
	}
	if r.Status != "success" {
		return r, fmt.Errorf("%s: %s", r.ErrorType, r.Error)
	}
	return r, nil
}

// metricNames returns every metric name Prometheus holds.
func (p *prom) metricNames(t *testing.T) []string {
	t.Helper()
	resp, err := p.hc.Get(p.base + "/api/v1/label/__name__/values")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Data []string `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	return r.Data
}

// TestPrometheusAnswersEveryQuery scrapes a live 3-node cluster with the
// shipped scrape job and rules, drives traffic and faults, and then asks
// Prometheus every dashboard query and every alert's QUERY (the alert
// expression without its threshold, which only filters): each must parse
// and return data. Every full alert expression must parse, and every rule
// must evaluate without error.
func TestPrometheusAnswersEveryQuery(t *testing.T) {
	needTool(t, "prometheus")
	c := startCluster(t)
	var targets []string
	for _, b := range c.bases {
		targets = append(targets, strings.TrimPrefix(b, "http://"))
	}
	p := startPrometheus(t, targets)
	ctx := context.Background()

	queries := dashboardQueries(t)
	alerts := shippedAlerts(t)
	if len(alerts) < 7 {
		t.Fatalf("%d alerts in %s, want the 7+ of the issue", len(alerts), rulesPath)
	}
	for name, expr := range alerts {
		if _, err := p.query(ctx, expr); err != nil {
			t.Errorf("alert %s does not parse: %v", name, err)
		}
		q, err := alertQuery(expr)
		if err != nil {
			t.Errorf("alert %s: %v", name, err)
			continue
		}
		queries["alert "+name] = q
	}

	c.traffic()
	c.faults()
	c.traffic()

	// Every query returns data once the scrapes after the traffic are in
	// (rates need two samples, so a few scrape intervals).
	empty := map[string]string{}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		clear(empty)
		for name, q := range queries {
			r, err := p.query(ctx, q)
			if err != nil {
				t.Fatalf("%s: %v\n%s", name, err, q)
			}
			if len(r.Data.Result) == 0 {
				empty[name] = q
			}
		}
		if len(empty) == 0 {
			break
		}
		if time.Now().After(deadline) {
			for name, q := range empty {
				t.Errorf("%s returns no data after 30 s of scrapes: %s", name, q)
			}
			t.FailNow()
		}
	}

	// Every weir_ metric a query names exists in the scrape, so a typo in
	// a name fails here even where the query would be empty for a reason.
	names := p.metricNames(t)
	re := regexp.MustCompile(`\bweir_[a-z0-9_]+`)
	for name, q := range queries {
		for _, m := range re.FindAllString(q, -1) {
			if !slices.Contains(names, m) {
				t.Errorf("%s names %s, which no node exports", name, m)
			}
		}
	}

	// The rules loaded and evaluate without error.
	resp, err := p.hc.Get(p.base + "/api/v1/rules")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rules struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					Name      string `json:"name"`
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&rules); err != nil {
		t.Fatal(err)
	}
	loaded := 0
	for _, g := range rules.Data.Groups {
		for _, r := range g.Rules {
			loaded++
			if r.Health != "ok" {
				t.Errorf("rule %s: health %q %s", r.Name, r.Health, r.LastError)
			}
		}
	}
	if loaded != len(alerts) {
		t.Errorf("prometheus loaded %d rules, the file has %d alerts", loaded, len(alerts))
	}
	t.Logf("%d queries answered with data from %d targets", len(queries), len(targets))
}
