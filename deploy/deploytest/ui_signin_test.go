package deploytest

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/weir-rl/weir/auth"
	"github.com/weir-rl/weir/node"
)

// The tokens of the sign-in test.
const (
	uiReadToken   = "read-0123456789abcdef0123456789abcdef"
	uiDecideToken = "decide-0123456789abcdef0123456789abcdef"
)

// startTokenNode starts one node behind a tokens file holding a read and a
// decide token.
func startTokenNode(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	limits, tokens := filepath.Join(dir, "limits.yaml"), filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(limits, []byte(testLimits), 0o600); err != nil {
		t.Fatal(err)
	}
	tf := "version: 1\ntokens:\n" +
		"  - {name: monitoring, sha256: " + auth.HashToken(uiReadToken) + ", scopes: [read]}\n" +
		"  - {name: svc, sha256: " + auth.HashToken(uiDecideToken) + ", scopes: [decide]}\n"
	if err := os.WriteFile(tokens, []byte(tf), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := node.LocalConfig()
	cfg.NodeName = "n1"
	cfg.LimitsPath = limits
	cfg.Security.TokensFile = tokens
	n, err := node.New(cfg, node.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := n.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return "http://" + n.HTTPAddr()
}

// signInState is what the page shows around its sign-in form.
type signInState struct {
	LoginShown bool     `json:"loginShown"`
	LoginError string   `json:"loginError"`
	Members    []string `json:"members"`
	Cookie     string   `json:"cookie"` // document.cookie: what the page's scripts can read
}

const signInJS = `(() => ({
  loginShown: !document.getElementById('login').hidden,
  loginError: document.getElementById('login-error').hidden ? "" : document.getElementById('login-error').textContent,
  members: [...document.querySelectorAll('#members tbody tr')].map(r => r.dataset.member + ' ' + r.cells[1].textContent),
  cookie: document.cookie,
}))()`

// pollPage waits until the page's sign-in state satisfies cond (a JS
// expression over p), failing with what it last showed.
func pollPage(t *testing.T, ctx context.Context, what, cond string) signInState {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Poll[signInState](`((p) => (`+cond+`) ? p : false)(`+signInJS+`)`,
		chromedp.WithPollingTimeout(20*time.Second), chromedp.WithPollingInterval(100*time.Millisecond)))
	if err != nil {
		last, _ := chromedp.Run(ctx, chromedp.Evaluate[signInState](signInJS))
		t.Fatalf("%s: %v; the page showed %+v", what, err, last)
	}
	return s
}

// TestStatusPageSignInInChromium: behind a tokens file the status page
// asks for a token; a decide token is refused with the reason, a read
// token opens an HttpOnly, SameSite=Strict session the page's scripts
// cannot read, which survives a reload, and the cookie opens nothing but
// the page's reads.
func TestStatusPageSignInInChromium(t *testing.T) {
	chromium := needTool(t, "chromium")
	base := startTokenNode(t)
	b := newBrowser(t, chromium, 60*time.Second)
	ctx := b.ctx
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/ui/")); err != nil {
		t.Fatalf("navigate: %v", err)
	}
	pollPage(t, ctx, "the sign-in form", `p.loginShown && p.members.length === 0`)

	signIn := func(token string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("login-token"), token), chromedp.Click(chromedp.ID("login-submit"))); err != nil {
			t.Fatalf("sign in: %v", err)
		}
	}
	signIn(uiDecideToken)
	s := pollPage(t, ctx, "a refusal of the decide token", `p.loginError !== ""`)
	if !strings.Contains(s.LoginError, "lacks the read scope") || !s.LoginShown {
		t.Fatalf("decide token: %+v, want the form with the reason", s)
	}
	signIn(uiReadToken)
	s = pollPage(t, ctx, "the page after signing in", `!p.loginShown && p.members.length === 1`)
	if s.Members[0] != "n1 alive" || s.Cookie != "" {
		t.Fatalf("after signing in: %+v, want n1 alive and no cookie visible to scripts", s)
	}
	res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/v1/cluster/stats"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Cookies) != 1 || res.Cookies[0].Name != "weir_ui" || !res.Cookies[0].HTTPOnly ||
		res.Cookies[0].SameSite != network.CookieSameSiteStrict || res.Cookies[0].Path != "/" {
		t.Fatalf("cookies %+v, want weir_ui, HttpOnly, SameSite=Strict, Path=/", res.Cookies)
	}
	cookie := res.Cookies[0].Value

	// A reload keeps the session: no form, the members again.
	if err := chromedp.Do(ctx, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	pollPage(t, ctx, "the page after a reload", `!p.loginShown && p.members.length === 1`)

	// The cookie reads the page's routes and nothing else.
	hc := &http.Client{Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	for _, r := range []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/v1/cluster/stats", http.StatusOK},
		{http.MethodGet, "/v1/cluster/hot", http.StatusOK},
		{http.MethodGet, "/v1/cluster", http.StatusUnauthorized},
		{http.MethodPost, "/v1/take", http.StatusUnauthorized},
	} {
		req, _ := http.NewRequest(r.method, base+r.path, strings.NewReader(`{"checks":[{"limit":"quota","key":"k"}]}`))
		req.AddCookie(&http.Cookie{Name: "weir_ui", Value: cookie})
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != r.want {
			t.Errorf("%s %s with the session cookie: %d, want %d", r.method, r.path, resp.StatusCode, r.want)
		}
	}
	// The only errors the browser may log are the 401s that showed the form
	// and the refused sign-in's 403.
	b.check(t, func(p string) bool {
		return strings.Contains(p, "status of 401") || strings.Contains(p, "status of 403")
	})
}
