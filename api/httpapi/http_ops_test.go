package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/internal/apitest"
)

// fakeOperator is a fakeDecider that also answers the operator routes,
// recording what Hot was asked.
type fakeOperator struct {
	apitest.Decider
	asked []string
}

func (f *fakeOperator) Hot(_ context.Context, limit string, n int) (api.HotKeys, error) {
	f.asked = append(f.asked, limit+"/"+strconv.Itoa(n))
	if limit == "nope" {
		return api.HotKeys{}, api.Errorf(api.CodeInvalid, "unknown limit %q", limit)
	}
	keys := []api.HotKey{{Key: "tenant:a", Cost: 9, Error: 1, Denied: 2}}
	return api.HotKeys{Node: "n1", Nodes: []string{"n1"}, Missing: []string{}, Limits: []api.HotLimit{{Limit: "export", Keys: keys}}}, nil
}

func (f *fakeOperator) Stats(context.Context) (api.ClusterStats, error) {
	return api.ClusterStats{Node: "n1", Epoch: 4, Members: []api.MemberStats{{Name: "n1", State: "alive", Reachable: true, RingShare: 1, Allowed: 3}}}, nil
}

func getBody(t *testing.T, url string) (int, http.Header, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func TestHTTPHot(t *testing.T) {
	f := &fakeOperator{}
	srv := httptest.NewServer(NewHandler(f, f, DefaultConfig(), nil, nil))
	defer srv.Close()
	code, _, body := getBody(t, srv.URL+"/v1/cluster/hot?limit=export&n=3")
	if code != http.StatusOK {
		t.Fatalf("hot: %d %s", code, body)
	}
	var got api.HotKeys
	if err := json.Unmarshal([]byte(body), &got); err != nil || got.Limits[0].Keys[0].Cost != 9 {
		t.Errorf("hot body %s (%v)", body, err)
	}
	if !strings.Contains(body, `"key":"tenant:a","cost":9,"error":1,"denied":2`) {
		t.Errorf("hot body %s lacks the snake_case key fields", body)
	}
	if code, _, _ := getBody(t, srv.URL+"/v1/cluster/hot"); code != http.StatusOK {
		t.Errorf("hot without parameters: %d", code)
	}
	for _, q := range []string{"n=0", "n=101", "n=x", "n=-1", "limit=nope", "limit=" + strings.Repeat("x", 600)} {
		before := len(f.asked)
		code, _, body := getBody(t, srv.URL+"/v1/cluster/hot?"+q)
		if code != http.StatusBadRequest || !strings.Contains(body, "invalid_request") {
			t.Errorf("hot?%s: %d %s, want 400 invalid_request", q, code, body)
		}
		if q != "limit=nope" && len(f.asked) != before {
			t.Errorf("hot?%s reached the node", q)
		}
	}
	if f.asked[0] != "export/3" || f.asked[1] != "/"+strconv.Itoa(api.DefaultHotN) {
		t.Errorf("operator asked %q", f.asked)
	}
}

func TestHTTPStats(t *testing.T) {
	op := &fakeOperator{}
	srv := httptest.NewServer(NewHandler(op, op, DefaultConfig(), nil, nil))
	defer srv.Close()
	code, _, body := getBody(t, srv.URL+"/v1/cluster/stats")
	if code != http.StatusOK || !strings.Contains(body, `"ring_share":1`) || !strings.Contains(body, `"epoch":4`) {
		t.Errorf("stats: %d %s", code, body)
	}
}

func TestHTTPOperatorRoutesNeedAnOperator(t *testing.T) {
	srv := httptest.NewServer(NewHandler(&apitest.Decider{}, nil, DefaultConfig(), nil, nil))
	defer srv.Close()
	for _, p := range []string{"/v1/cluster/hot", "/v1/cluster/stats"} {
		if code, _, _ := getBody(t, srv.URL+p); code != http.StatusNotFound {
			t.Errorf("%s on a plain Decider: %d, want 404", p, code)
		}
	}
}

func TestHTTPUIServesEmbeddedPage(t *testing.T) {
	srv := httptest.NewServer(NewHandler(&apitest.Decider{}, nil, DefaultConfig(), nil, nil))
	defer srv.Close()
	code, h, body := getBody(t, srv.URL+"/ui/")
	if code != http.StatusOK || !strings.Contains(body, "<title>Weir status</title>") {
		t.Fatalf("/ui/: %d %.200s", code, body)
	}
	if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("/ui/ CSP %q", csp)
	}
	for _, asset := range []string{"app.js", "style.css"} {
		if code, _, _ := getBody(t, srv.URL+"/ui/"+asset); code != http.StatusOK {
			t.Errorf("/ui/%s: %d", asset, code)
		}
		if !strings.Contains(body, asset) {
			t.Errorf("index.html does not load %s", asset)
		}
	}
	// No external assets: nothing in the page points off the node.
	if strings.Contains(body, "http://") || strings.Contains(body, "https://") {
		t.Error("index.html references an external URL")
	}
	if code, _, _ := getBody(t, srv.URL+"/ui"); code != http.StatusOK { // redirected to /ui/
		t.Errorf("/ui: %d", code)
	}
}
