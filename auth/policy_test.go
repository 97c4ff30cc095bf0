package auth

import (
	"strings"
	"testing"
)

const testFile = `version: 1
tokens:
  - name: acme
    sha256: %acme%
    scopes: [decide]
    key_prefix: "tenant:acme:"
  - name: acme-export
    sha256: %export%
    scopes: [decide, read]
    limits: [export]
  - name: ops
    sha256: %ops%
    scopes: [admin, read]
`

func testPolicy(t *testing.T) *Policy {
	t.Helper()
	data := strings.NewReplacer("%acme%", HashToken("tok-acme"), "%export%", HashToken("tok-export"), "%ops%", HashToken("tok-ops")).Replace(testFile)
	p, err := Parse([]byte(data), "test")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAuthorizeSteps is the policy's step table: one credential, scope,
// limit and key per row, and the answer.
func TestAuthorizeSteps(t *testing.T) {
	p := testPolicy(t)
	tests := []struct {
		cred       string
		scope      Scope
		limit, key string
		outcome    Outcome
		reason     Reason
		token      string
	}{
		{"", ScopeDecide, "export", "tenant:acme:x", Unauthenticated, ReasonMissing, ""},
		{"nope", ScopeDecide, "export", "tenant:acme:x", Unauthenticated, ReasonUnknown, ""},
		{"TOK-ACME", ScopeDecide, "export", "tenant:acme:x", Unauthenticated, ReasonUnknown, ""},
		{"tok-acme", ScopeDecide, "export", "tenant:acme:x", Allowed, ReasonNone, "acme"},
		{"tok-acme", ScopeDecide, "login", "tenant:acme:", Allowed, ReasonNone, "acme"},
		{"tok-acme", ScopeDecide, "export", "tenant:evil:x", Forbidden, ReasonKeyPrefix, "acme"},
		{"tok-acme", ScopeDecide, "export", "tenant:acme", Forbidden, ReasonKeyPrefix, "acme"},
		{"tok-acme", ScopeDecide, "export", "", Forbidden, ReasonKeyPrefix, "acme"},
		{"tok-acme", ScopeDecide, "", "", Allowed, ReasonNone, "acme"}, // scope only
		{"tok-acme", ScopeAdmin, "", "", Forbidden, ReasonScope, "acme"},
		{"tok-acme", ScopeRead, "", "", Forbidden, ReasonScope, "acme"},
		{"tok-export", ScopeDecide, "export", "anything", Allowed, ReasonNone, "acme-export"},
		{"tok-export", ScopeDecide, "search", "anything", Forbidden, ReasonLimit, "acme-export"},
		{"tok-export", ScopeRead, "", "", Allowed, ReasonNone, "acme-export"},
		{"tok-export", ScopeRead, "search", "k", Allowed, ReasonNone, "acme-export"}, // read ignores limits
		{"tok-ops", ScopeAdmin, "", "", Allowed, ReasonNone, "ops"},
		{"tok-ops", ScopeDecide, "export", "k", Forbidden, ReasonScope, "ops"},
	}
	for _, tt := range tests {
		a := p.Authorize(tt.cred, tt.scope, tt.limit, tt.key)
		name := ""
		if a.Token != nil {
			name = a.Token.Name
		}
		if a.Outcome != tt.outcome || a.Reason != tt.reason || name != tt.token {
			t.Errorf("Authorize(%q, %v, %q, %q) = {%v %q %q}, want {%v %q %q}",
				tt.cred, tt.scope, tt.limit, tt.key, a.Outcome, a.Reason, name, tt.outcome, tt.reason, tt.token)
		}
		if a.OK() != (tt.outcome == Allowed) {
			t.Errorf("OK() disagrees with the outcome for %q", tt.cred)
		}
		if d := a.Detail(tt.scope, tt.limit); len(tt.key) > 4 && strings.Contains(d, tt.key) && !a.OK() {
			t.Errorf("detail %q contains the key", d)
		}
	}
}

func TestParseRejects(t *testing.T) {
	h := HashToken("x")
	tests := []struct{ name, file, want string }{
		{"empty", "", "empty file"},
		{"version", "version: 2\ntokens: []\n", "version 2"},
		{"unknown field", "version: 1\ntokens:\n  - name: a\n    sha256: " + h + "\n    scopes: [decide]\n    scope: admin\n", "scope"},
		{"duplicate key", "version: 1\nversion: 1\n", "already defined"},
		{"plain token", "version: 1\ntokens:\n  - name: a\n    sha256: hunter2\n    scopes: [decide]\n", "line 3: tokens[0]: sha256 must be 64"},
		{"upper hex", "version: 1\ntokens:\n  - name: a\n    sha256: " + strings.ToUpper(h) + "\n    scopes: [decide]\n", "lower-case"},
		{"no scopes", "version: 1\ntokens:\n  - name: a\n    sha256: " + h + "\n", "at least one"},
		{"bad scope", "version: 1\ntokens:\n  - name: a\n    sha256: " + h + "\n    scopes: [root]\n", `unknown scope "root"`},
		{"no name", "version: 1\ntokens:\n  - sha256: " + h + "\n    scopes: [read]\n", "name is required"},
		{"dup name", "version: 1\ntokens:\n  - {name: a, sha256: " + h + ", scopes: [read]}\n  - {name: a, sha256: " + HashToken("y") + ", scopes: [read]}\n", "line 4: tokens[1]: name \"a\" is also tokens[0]"},
		{"dup hash", "version: 1\ntokens:\n  - {name: a, sha256: " + h + ", scopes: [read]}\n  - {name: b, sha256: " + h + ", scopes: [read]}\n", "also the hash"},
		{"empty limits", "version: 1\ntokens:\n  - {name: a, sha256: " + h + ", scopes: [decide], limits: []}\n", "limits is empty"},
		{"prefix without decide", "version: 1\ntokens:\n  - {name: a, sha256: " + h + ", scopes: [admin], key_prefix: x}\n", "has neither scope"},
		{"max_buckets without prefix", "version: 1\ntokens:\n  - {name: a, sha256: " + h + ", scopes: [decide], max_buckets: 5}\n", "max_buckets counts the buckets of a key_prefix"},
		{"max_buckets zero", "version: 1\ntokens:\n  - {name: a, sha256: " + h + ", scopes: [decide], key_prefix: x, max_buckets: 0}\n", "max_buckets 0: want 1..2147483648"},
		{"max_buckets huge", "version: 1\ntokens:\n  - {name: a, sha256: " + h + ", scopes: [decide], key_prefix: x, max_buckets: 9999999999}\n", "max_buckets 9999999999"},
		{"max_buckets text", "version: 1\ntokens:\n  - {name: a, sha256: " + h + ", scopes: [decide], key_prefix: x, max_buckets: many}\n", "cannot unmarshal"},
		{"wrong type", "version: 1\ntokens: 7\n", "cannot unmarshal"},
		{"too large", "version: 1\n#" + strings.Repeat("x", MaxFileSize), "larger than"},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.file), "f")
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want it to contain %q", tt.name, err, tt.want)
		}
	}
	// Every problem at once.
	_, err := Parse([]byte("version: 1\ntokens:\n  - {name: a, sha256: x, scopes: [root]}\n"), "f")
	if err == nil || !strings.Contains(err.Error(), "sha256") || !strings.Contains(err.Error(), "root") {
		t.Fatalf("want both problems: %v", err)
	}
}

func TestNewTokenAndHash(t *testing.T) {
	a, b := NewToken(), NewToken()
	if len(a) != 64 || a == b {
		t.Fatalf("NewToken = %q, %q", a, b)
	}
	if HashToken("test") != "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" {
		t.Fatal("HashToken is not hex SHA-256")
	}
}

// FuzzParse: Parse never panics; a file it accepts authenticates each of
// its tokens' hashes to that token only, and nothing authorizes a token
// beyond its scopes.
func FuzzParse(f *testing.F) {
	h := HashToken("x")
	f.Add([]byte(strings.NewReplacer("%acme%", h, "%export%", HashToken("y"), "%ops%", HashToken("z")).Replace(testFile)))
	f.Add([]byte("version: 1\ntokens: []\n"))
	f.Add([]byte("version: 1\ntokens:\n  - {name: a, sha256: " + h + ", scopes: [decide], limits: [l], key_prefix: p}\n"))
	f.Add([]byte("version: 1\ntokens:\n  - name: a\n    sha256: " + h + "\n    scopes: [root]\n"))
	f.Add([]byte("\x00\xff: [\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data, "fuzz")
		if err != nil {
			if p != nil {
				t.Fatal("an error and a policy")
			}
			return
		}
		seen := map[[32]byte]bool{}
		for _, tok := range p.Tokens() {
			if seen[tok.Hash] {
				t.Fatal("two tokens with one hash accepted")
			}
			seen[tok.Hash] = true
			if !tok.Has(ScopeDecide) && !tok.Has(ScopeAdmin) && !tok.Has(ScopeRead) {
				t.Fatalf("token %q accepted without a scope", tok.Name)
			}
			for _, s := range []Scope{ScopeDecide, ScopeAdmin, ScopeRead} {
				a := tok.Authorize(s, "", "")
				if a.OK() != tok.Has(s) {
					t.Fatalf("token %q scope %v: %v, has %v", tok.Name, s, a.OK(), tok.Has(s))
				}
			}
			if pre := tok.KeyPrefix(); pre != "" && tok.Authorize(ScopeDecide, firstLimit(tok), "\x00"+pre).OK() {
				t.Fatalf("token %q confined to %q allowed a key without the prefix", tok.Name, pre)
			}
		}
		if a := p.Authenticate("definitely not a token in any seed"); a.OK() {
			t.Fatal("an unknown credential authenticated")
		}
	})
}

func firstLimit(t *Token) string {
	if l := t.Limits(); len(l) > 0 {
		return l[0]
	}
	return "any"
}

// TestAllotScope: allot is a scope of its own, confined by limits and key
// prefix like decide, and implied by no other scope.
func TestAllotScope(t *testing.T) {
	h := HashToken("secret-of-the-holder")
	d := HashToken("secret-of-the-caller")
	p, err := Parse([]byte("version: 1\ntokens:\n  - name: holder\n    sha256: "+h+"\n    scopes: [allot]\n    key_prefix: \"t:\"\n"+
		"  - name: caller\n    sha256: "+d+"\n    scopes: [decide, read, admin]\n"), "f")
	if err != nil {
		t.Fatal(err)
	}
	if a := p.Authorize("secret-of-the-holder", ScopeAllot, "hot", "t:a"); !a.OK() {
		t.Fatalf("allot within the prefix: %+v", a)
	}
	if a := p.Authorize("secret-of-the-holder", ScopeAllot, "hot", "u:a"); a.OK() || a.Reason != ReasonKeyPrefix {
		t.Fatalf("allot outside the prefix: %+v", a)
	}
	if a := p.Authorize("secret-of-the-holder", ScopeDecide, "hot", "t:a"); a.OK() {
		t.Fatal("allot implies decide")
	}
	if a := p.Authorize("secret-of-the-caller", ScopeAllot, "hot", "t:a"); a.OK() || a.Reason != ReasonScope {
		t.Fatalf("decide, read and admin imply allot: %+v", a)
	}
	if ScopeAllot.String() != "allot" {
		t.Fatalf("ScopeAllot is %q", ScopeAllot)
	}
}

// TestMaxBuckets: a token confined to a key prefix holds max_buckets, or
// DefaultMaxBuckets when the file omits it; an unconfined one is not
// counted (0).
func TestMaxBuckets(t *testing.T) {
	p, err := Parse([]byte("version: 1\ntokens:\n"+
		"  - {name: set, sha256: "+HashToken("a")+", scopes: [decide], key_prefix: \"t1:\", max_buckets: 3}\n"+
		"  - {name: default, sha256: "+HashToken("b")+", scopes: [decide], key_prefix: \"t2:\"}\n"+
		"  - {name: free, sha256: "+HashToken("c")+", scopes: [decide]}\n"), "f")
	if err != nil {
		t.Fatal(err)
	}
	for cred, want := range map[string]int64{"a": 3, "b": DefaultMaxBuckets, "c": 0} {
		if got := p.Authenticate(cred).Token.MaxBuckets(); got != want {
			t.Errorf("token %q: MaxBuckets %d, want %d", cred, got, want)
		}
	}
}
