package auth

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Bounds on a tokens file.
const (
	// MaxFileSize is the largest tokens file Parse and Load accept: 1 MiB.
	MaxFileSize = 1 << 20
	// MaxTokens is the most tokens one file may hold.
	MaxTokens = 10_000
	// MaxNameBytes bounds a token's name, a limit name and a key prefix.
	MaxNameBytes = 512
)

// Scope is one kind of call a token may make.
type Scope uint8

// The scopes.
const (
	// ScopeDecide is take, check and lease calls.
	ScopeDecide Scope = iota + 1
	// ScopeAdmin is forgetting members and other cluster changes.
	ScopeAdmin
	// ScopeRead is cluster status, and metrics when protected.
	ScopeRead
)

var scopeNames = map[string]Scope{"decide": ScopeDecide, "admin": ScopeAdmin, "read": ScopeRead}

// String returns the scope's name in the tokens file.
func (s Scope) String() string {
	for n, v := range scopeNames {
		if v == s {
			return n
		}
	}
	return fmt.Sprintf("scope(%d)", uint8(s))
}

// Token is one entry of the tokens file. It is immutable once parsed.
type Token struct {
	// Name identifies the token in logs; it is not secret.
	Name string
	// Hash is the SHA-256 of the token.
	Hash     [32]byte
	scopes   [4]bool // indexed by Scope
	limits   []string
	prefix   string
	hasLimit bool
}

// Has reports whether t has scope s.
func (t *Token) Has(s Scope) bool { return int(s) < len(t.scopes) && t.scopes[s] }

// Limits returns the limits t is confined to; nil means any.
func (t *Token) Limits() []string { return slices.Clone(t.limits) }

// KeyPrefix returns the key prefix t is confined to; "" means any key.
func (t *Token) KeyPrefix() string { return t.prefix }

// Outcome is the kind of an Answer.
type Outcome uint8

// The outcomes.
const (
	// Allowed means the call may go ahead.
	Allowed Outcome = iota
	// Unauthenticated means no credential or an unknown one: HTTP 401,
	// gRPC Unauthenticated.
	Unauthenticated
	// Forbidden means a known token that may not make this call: HTTP
	// 403, gRPC PermissionDenied.
	Forbidden
)

// Reason says why a call was refused; it is a fixed word, fit for a
// metric label, and never contains the credential or the key.
type Reason string

// The reasons.
const (
	// ReasonNone is the reason of an Allowed answer.
	ReasonNone Reason = ""
	// ReasonMissing is a call without a credential.
	ReasonMissing Reason = "missing_token"
	// ReasonUnknown is a credential that matches no token.
	ReasonUnknown Reason = "unknown_token"
	// ReasonScope is a token without the call's scope.
	ReasonScope Reason = "scope"
	// ReasonLimit is a limit outside the token's limits.
	ReasonLimit Reason = "limit"
	// ReasonKeyPrefix is a key outside the token's key prefix.
	ReasonKeyPrefix Reason = "key_prefix"
)

// Answer is the policy's answer for one call. Token is the caller's token
// when the credential was recognised (also when Forbidden), nil otherwise.
type Answer struct {
	Outcome Outcome
	Reason  Reason
	Token   *Token
}

// OK reports whether the answer allows the call.
func (a Answer) OK() bool { return a.Outcome == Allowed }

// Detail is a sentence for the caller saying why the call was refused,
// naming the scope or limit but never the key or the credential.
func (a Answer) Detail(scope Scope, limit string) string {
	switch a.Reason {
	case ReasonMissing:
		return "a token is required: send Authorization: Bearer TOKEN"
	case ReasonUnknown:
		return "the token is not valid"
	case ReasonScope:
		return fmt.Sprintf("the token lacks the %s scope", scope)
	case ReasonLimit:
		return fmt.Sprintf("the token may not use limit %q", clip(limit))
	case ReasonKeyPrefix:
		return "the token may not use this key: it is confined to another key prefix"
	}
	return ""
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// Policy is a parsed tokens file. It is immutable and safe for concurrent
// use; the node replaces the whole Policy on reload.
type Policy struct {
	// Source names where the file came from, for messages.
	Source string
	byHash map[[32]byte]*Token
	tokens []*Token
}

// Tokens returns the tokens in file order.
func (p *Policy) Tokens() []*Token { return slices.Clone(p.tokens) }

// Authenticate finds the token whose hash is SHA-256(credential). An empty
// credential is Unauthenticated with ReasonMissing, an unknown one with
// ReasonUnknown. The lookup is by hash, so its timing reveals nothing
// useful about the stored hashes' preimages.
func (p *Policy) Authenticate(credential string) Answer {
	if credential == "" {
		return Answer{Outcome: Unauthenticated, Reason: ReasonMissing}
	}
	t := p.byHash[sha256.Sum256([]byte(credential))]
	if t == nil {
		return Answer{Outcome: Unauthenticated, Reason: ReasonUnknown}
	}
	return Answer{Outcome: Allowed, Token: t}
}

// Authorize is Authenticate followed by Token.Authorize.
func (p *Policy) Authorize(credential string, scope Scope, limit, key string) Answer {
	a := p.Authenticate(credential)
	if !a.OK() {
		return a
	}
	return a.Token.Authorize(scope, limit, key)
}

// Authorize answers whether t may make a call of scope on (limit, key).
// For ScopeDecide, limit and key are checked against the token's limits
// and key prefix; pass both empty to check the scope alone (a call whose
// resource is not known yet). Other scopes ignore limit and key.
func (t *Token) Authorize(scope Scope, limit, key string) Answer {
	switch {
	case !t.Has(scope):
		return Answer{Outcome: Forbidden, Reason: ReasonScope, Token: t}
	case scope != ScopeDecide || (limit == "" && key == ""):
	case t.hasLimit && !slices.Contains(t.limits, limit):
		return Answer{Outcome: Forbidden, Reason: ReasonLimit, Token: t}
	case !strings.HasPrefix(key, t.prefix):
		return Answer{Outcome: Forbidden, Reason: ReasonKeyPrefix, Token: t}
	}
	return Answer{Outcome: Allowed, Token: t}
}

// HashToken returns the hex SHA-256 of a token, the form the tokens file
// stores (weir token hash).
func HashToken(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// NewToken returns a fresh random token: 32 bytes from crypto/rand, hex
// encoded (256 bits).
func NewToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// Load reads and parses the tokens file at path.
func Load(path string) (*Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("auth: tokens file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("auth: tokens file %s: %w", path, err)
	}
	return Parse(data, path)
}

// fileYAML is the file's shape, decoded strictly.
type fileYAML struct {
	Version int         `yaml:"version"`
	Tokens  []tokenYAML `yaml:"tokens"`
}

type tokenYAML struct {
	Name      string   `yaml:"name"`
	SHA256    string   `yaml:"sha256"`
	Scopes    []string `yaml:"scopes"`
	Limits    []string `yaml:"limits"`
	KeyPrefix string   `yaml:"key_prefix"`
}

// Parse parses a tokens file. source names it in errors. Every problem is
// reported, each with its line, in one error; nothing is returned then.
func Parse(data []byte, source string) (*Policy, error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("auth: %s: file is larger than %d bytes", source, MaxFileSize)
	}
	var f fileYAML
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("auth: %s: empty file: want version: 1 and tokens", source)
		}
		return nil, fmt.Errorf("auth: %s: %w", source, err)
	}
	// Line numbers of the entries, from a second, untyped pass.
	var lines struct {
		Tokens []yaml.Node `yaml:"tokens"`
	}
	_ = yaml.Unmarshal(data, &lines)
	line := func(i int) int {
		if i < len(lines.Tokens) {
			return lines.Tokens[i].Line
		}
		return 0
	}
	var errs []error
	bad := func(i int, format string, args ...any) {
		errs = append(errs, fmt.Errorf("line %d: tokens[%d]: %s", line(i), i, fmt.Sprintf(format, args...)))
	}
	if f.Version != 1 {
		errs = append(errs, fmt.Errorf("version %d: want 1", f.Version))
	}
	if len(f.Tokens) > MaxTokens {
		errs = append(errs, fmt.Errorf("%d tokens: at most %d", len(f.Tokens), MaxTokens))
		f.Tokens = f.Tokens[:MaxTokens]
	}
	p := &Policy{Source: source, byHash: make(map[[32]byte]*Token, len(f.Tokens))}
	names := map[string]int{}
	for i, e := range f.Tokens {
		t := &Token{Name: e.Name, prefix: e.KeyPrefix}
		switch {
		case e.Name == "":
			bad(i, "name is required")
		case len(e.Name) > MaxNameBytes:
			bad(i, "name is longer than %d bytes", MaxNameBytes)
		default:
			if j, dup := names[e.Name]; dup {
				bad(i, "name %q is also tokens[%d]", clip(e.Name), j)
			}
			names[e.Name] = i
		}
		if raw, err := hex.DecodeString(e.SHA256); err != nil || len(raw) != 32 || strings.ToLower(e.SHA256) != e.SHA256 {
			bad(i, "sha256 must be 64 lower-case hex digits (weir token hash); never put the token itself in the file")
		} else {
			copy(t.Hash[:], raw)
			if o, dup := p.byHash[t.Hash]; dup {
				bad(i, "sha256 is also the hash of token %q", clip(o.Name))
			}
		}
		if len(e.Scopes) == 0 {
			bad(i, "scopes: at least one of decide, admin, read")
		}
		for _, s := range e.Scopes {
			v, ok := scopeNames[s]
			switch {
			case !ok:
				bad(i, "unknown scope %q: want decide, admin or read", clip(s))
			case t.scopes[v]:
				bad(i, "scope %q listed twice", s)
			default:
				t.scopes[v] = true
			}
		}
		if e.Limits != nil {
			t.hasLimit = true
			if len(e.Limits) == 0 {
				bad(i, "limits is empty: omit it to allow every limit")
			}
		}
		for _, l := range e.Limits {
			switch {
			case l == "" || len(l) > MaxNameBytes:
				bad(i, "limit names must be 1 to %d bytes", MaxNameBytes)
			case slices.Contains(t.limits, l):
				bad(i, "limit %q listed twice", clip(l))
			default:
				t.limits = append(t.limits, l)
			}
		}
		if len(e.KeyPrefix) > MaxNameBytes {
			bad(i, "key_prefix is longer than %d bytes", MaxNameBytes)
		}
		if (t.hasLimit || t.prefix != "") && !t.scopes[ScopeDecide] {
			bad(i, "limits and key_prefix restrict decide calls; this token has no decide scope")
		}
		p.tokens = append(p.tokens, t)
		if _, dup := p.byHash[t.Hash]; !dup {
			p.byHash[t.Hash] = t
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("auth: %s: %w", source, errors.Join(errs...))
	}
	return p, nil
}
