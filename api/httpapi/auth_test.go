package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/weir-rl/weir/api/authz"
	"github.com/weir-rl/weir/auth"
	"github.com/weir-rl/weir/internal/apitest"
)

// testAuthConfig is apitest.Policy in force, recording refusals in
// failures.
func testAuthConfig(t *testing.T, failures *[]auth.Reason) authz.Config {
	t.Helper()
	p := apitest.Policy(t)
	return authz.Config{Policy: func() *auth.Policy { return p }, OnFailure: func(r auth.Reason) { *failures = append(*failures, r) }}
}

func TestRequireTokensHTTP(t *testing.T) {
	var failures []auth.Reason
	cfg := testAuthConfig(t, &failures)
	f := &apitest.Decider{}
	srv := httptest.NewServer(RequireTokens(NewHandler(authz.Decider(f, cfg), nil, DefaultConfig(), http.NotFoundHandler(), nil), cfg))
	defer srv.Close()
	do := func(tok, header, body string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/take", strings.NewReader(body))
		if tok != "" {
			req.Header.Set(header, tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	body := `{"checks":[{"limit":"export","key":"tenant:acme:1"}]}`
	for _, tt := range []struct {
		tok, header string
		want        int
	}{
		{"", "", http.StatusUnauthorized},
		{"Bearer nope", "Authorization", http.StatusUnauthorized},
		{"Basic acme", "Authorization", http.StatusUnauthorized},
		{"bearer acme", "Authorization", http.StatusOK},
		{"acme", TokenHeader, http.StatusOK},
		{"Bearer ops", "Authorization", http.StatusForbidden},
	} {
		if got := do(tt.tok, tt.header, body); got != tt.want {
			t.Errorf("%s %q: %d, want %d", tt.header, tt.tok, got, tt.want)
		}
	}
	if len(f.Takes) != 2 {
		t.Fatalf("decider saw %d takes, want the 2 allowed", len(f.Takes))
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusUnauthorized {
			t.Errorf("%s needs a token", p)
		}
	}
}
