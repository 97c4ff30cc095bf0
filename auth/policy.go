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
	// DefaultMaxBuckets is the max_buckets of a token confined to a key
	// prefix that does not set it: the live buckets its keys may hold at
	// each owner node.
	DefaultMaxBuckets = 100_000
	// MaxMaxBuckets is the largest max_buckets a token may set.
	MaxMaxBuckets = 1 << 31
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
	// ScopeAllot is holding allotments: taking a slice of a bucket's
	// tokens to decide its takes in the caller's own process. Off unless
	// given: it is for services trusted with their own budget. Like
	// decide, it is confined by the token's limits and key prefix.
	ScopeAllot
)

var scopeNames = map[string]Scope{"decide": ScopeDecide, "admin": ScopeAdmin, "read": ScopeRead, "allot": ScopeAllot}

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
	scopes   [5]bool // indexed by Scope
	limits   []string
	prefix   string
	hasLimit bool
	buckets  int64 // max_buckets; 0 without a key prefix
}

// Has reports whether t has scope s.
func (t *Token) Has(s Scope) bool { return int(s) < len(t.scopes) && t.scopes[s] }

// Limits returns the limits t is confined to; nil means any.
func (t *Token) Limits() []string { return slices.Clone(t.limits) }

// KeyPrefix returns the key prefix t is confined to; "" means any key.
func (t *Token) KeyPrefix() string { return t.prefix }

// MaxBuckets returns the most live buckets the keys of t's key prefix may
// hold at each owner node (the file's max_buckets, DefaultMaxBuckets when
// unset); 0 for a token without a key prefix, which is not counted.
func (t *Token) MaxBuckets() int64 { return t.buckets }

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

// Current returns the token of p with t's hash: t as the policy in force
// defines it now (its scopes, limits and key prefix may have changed since
// t was authenticated), or nil when p no longer has it. Front ends that
// keep a caller's token for a connection or a stream re-resolve it with
// Current before every call, so a reload reaches them.
func (p *Policy) Current(t *Token) *Token {
	if t == nil {
		return nil
	}
	return p.byHash[t.Hash]
}

// Lookup returns the token whose SHA-256 is hash, or nil: a credential
// derived from a token (the status page's session cookie carries its
// hash) is checked against the file in force, so a token removed from the
// file stops working there too.
func (p *Policy) Lookup(hash [32]byte) *Token { return p.byHash[hash] }

// Authorize is Authenticate followed by Token.Authorize.
func (p *Policy) Authorize(credential string, scope Scope, limit, key string) Answer {
	a := p.Authenticate(credential)
	if !a.OK() {
		return a
	}
	return a.Token.Authorize(scope, limit, key)
}

// Authorize answers whether t may make a call of scope on (limit, key).
// For ScopeDecide and ScopeAllot, limit and key are checked against the
// token's limits and key prefix; pass both empty to check the scope alone
// (a call whose resource is not known yet). Other scopes ignore limit and
// key.
func (t *Token) Authorize(scope Scope, limit, key string) Answer {
	switch {
	case !t.Has(scope):
		return Answer{Outcome: Forbidden, Reason: ReasonScope, Token: t}
	case (scope != ScopeDecide && scope != ScopeAllot) || (limit == "" && key == ""):
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
	Name       string   `yaml:"name"`
	SHA256     string   `yaml:"sha256"`
	Scopes     []string `yaml:"scopes"`
	Limits     []string `yaml:"limits"`
	KeyPrefix  string   `yaml:"key_prefix"`
	MaxBuckets *int64   `yaml:"max_buckets"`
}

// Parse parses a tokens file. source names it in errors. Every problem is
// reported, each with its line, in one error; nothing is returned then.
func Parse(data []byte, source string) (*Policy, error) {
	f, err := decodeFile(data, source)
	if err != nil {
		return nil, err
	}
	b := &policyBuilder{lines: entryLines(data), names: map[string]int{}}
	b.header(&f)
	b.policy = &Policy{Source: source, byHash: make(map[[32]byte]*Token, len(f.Tokens))}
	for i, e := range f.Tokens {
		b.add(b.token(i, e))
	}
	if len(b.errs) > 0 {
		return nil, fmt.Errorf("auth: %s: %w", source, errors.Join(b.errs...))
	}
	return b.policy, nil
}

// decodeFile decodes data strictly (unknown fields are errors) into the
// file's shape. It fails on a file over MaxFileSize, an empty one or one
// that is not the shape; the error is complete, with the auth prefix and
// source. A file that decodes may still hold problems, which policyBuilder
// finds.
func decodeFile(data []byte, source string) (fileYAML, error) {
	var f fileYAML
	if len(data) > MaxFileSize {
		return f, fmt.Errorf("auth: %s: file is larger than %d bytes", source, MaxFileSize)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return f, fmt.Errorf("auth: %s: empty file: want version: 1 and tokens", source)
		}
		return f, fmt.Errorf("auth: %s: %w", source, err)
	}
	return f, nil
}

// entryLines returns the line of each entry of tokens, in file order, from
// a second, untyped pass over data that decodeFile accepted.
func entryLines(data []byte) []int {
	var raw struct {
		Tokens []yaml.Node `yaml:"tokens"`
	}
	_ = yaml.Unmarshal(data, &raw)
	lines := make([]int, len(raw.Tokens))
	for i, n := range raw.Tokens {
		lines[i] = n.Line
	}
	return lines
}

// policyBuilder turns a decoded file into a Policy, one entry at a time,
// collecting every problem instead of stopping at the first. Its checks
// run in a fixed order (header; then per entry name, sha256, scopes,
// limits, key_prefix, scope consistency), which is the order of the
// problems in Parse's error.
type policyBuilder struct {
	policy *Policy
	lines  []int          // the line of each entry, from entryLines
	names  map[string]int // each token name seen, to the index of its entry
	errs   []error        // the problems found so far, in file order
}

// bad records a problem with entry i, prefixed with its line and index.
func (b *policyBuilder) bad(i int, format string, args ...any) {
	line := 0
	if i < len(b.lines) {
		line = b.lines[i]
	}
	b.errs = append(b.errs, fmt.Errorf("line %d: tokens[%d]: %s", line, i, fmt.Sprintf(format, args...)))
}

// header checks the file's version and its number of tokens, cutting
// f.Tokens to MaxTokens so that the rest of the file is still checked.
func (b *policyBuilder) header(f *fileYAML) {
	if f.Version != 1 {
		b.errs = append(b.errs, fmt.Errorf("version %d: want 1", f.Version))
	}
	if len(f.Tokens) > MaxTokens {
		b.errs = append(b.errs, fmt.Errorf("%d tokens: at most %d", len(f.Tokens), MaxTokens))
		f.Tokens = f.Tokens[:MaxTokens]
	}
}

// token builds the Token of entry i, recording each of its problems. It
// always returns a Token, complete as far as the entry allows.
func (b *policyBuilder) token(i int, e tokenYAML) *Token {
	t := &Token{Name: e.Name, prefix: e.KeyPrefix}
	b.name(i, e.Name)
	b.hash(i, e.SHA256, t)
	b.scopes(i, e.Scopes, t)
	b.limits(i, e.Limits, t)
	if len(e.KeyPrefix) > MaxNameBytes {
		b.bad(i, "key_prefix is longer than %d bytes", MaxNameBytes)
	}
	if (t.hasLimit || t.prefix != "") && !t.scopes[ScopeDecide] && !t.scopes[ScopeAllot] {
		b.bad(i, "limits and key_prefix restrict decide and allot calls; this token has neither scope")
	}
	b.maxBuckets(i, e.MaxBuckets, t)
	return t
}

// maxBuckets sets t's bucket quota: max (1..MaxMaxBuckets) for a token
// with a key prefix, DefaultMaxBuckets when the entry omits it; a token
// without a key prefix has no tenant to count, so max_buckets is refused.
func (b *policyBuilder) maxBuckets(i int, max *int64, t *Token) {
	switch {
	case t.prefix == "" && max != nil:
		b.bad(i, "max_buckets counts the buckets of a key_prefix; this token has none")
	case t.prefix == "":
	case max == nil:
		t.buckets = DefaultMaxBuckets
	case *max < 1 || *max > MaxMaxBuckets:
		b.bad(i, "max_buckets %d: want 1..%d", *max, int64(MaxMaxBuckets))
	default:
		t.buckets = *max
	}
}

// name checks that entry i has a name of at most MaxNameBytes that no
// earlier entry has, and remembers it.
func (b *policyBuilder) name(i int, name string) {
	switch {
	case name == "":
		b.bad(i, "name is required")
	case len(name) > MaxNameBytes:
		b.bad(i, "name is longer than %d bytes", MaxNameBytes)
	default:
		if j, dup := b.names[name]; dup {
			b.bad(i, "name %q is also tokens[%d]", clip(name), j)
		}
		b.names[name] = i
	}
}

// hash sets t.Hash from digest, the entry's sha256, which must be 64
// lower-case hex digits (else t.Hash stays zero) and the hash of no earlier
// token.
func (b *policyBuilder) hash(i int, digest string, t *Token) {
	raw, err := hex.DecodeString(digest)
	if err != nil || len(raw) != 32 || strings.ToLower(digest) != digest {
		b.bad(i, "sha256 must be 64 lower-case hex digits (weir token hash); never put the token itself in the file")
		return
	}
	copy(t.Hash[:], raw)
	if o, dup := b.policy.byHash[t.Hash]; dup {
		b.bad(i, "sha256 is also the hash of token %q", clip(o.Name))
	}
}

// scopes sets t's scopes from names: at least one, each known, none twice.
func (b *policyBuilder) scopes(i int, names []string, t *Token) {
	if len(names) == 0 {
		b.bad(i, "scopes: at least one of decide, admin, read")
	}
	for _, s := range names {
		v, ok := scopeNames[s]
		switch {
		case !ok:
			b.bad(i, "unknown scope %q: want decide, admin or read", clip(s))
		case t.scopes[v]:
			b.bad(i, "scope %q listed twice", s)
		default:
			t.scopes[v] = true
		}
	}
}

// limits confines t to limits when the entry has the field (nil means any
// limit): a present list must not be empty, and each name is 1 to
// MaxNameBytes bytes and listed once.
func (b *policyBuilder) limits(i int, limits []string, t *Token) {
	if limits != nil {
		t.hasLimit = true
		if len(limits) == 0 {
			b.bad(i, "limits is empty: omit it to allow every limit")
		}
	}
	for _, l := range limits {
		switch {
		case l == "" || len(l) > MaxNameBytes:
			b.bad(i, "limit names must be 1 to %d bytes", MaxNameBytes)
		case slices.Contains(t.limits, l):
			b.bad(i, "limit %q listed twice", clip(l))
		default:
			t.limits = append(t.limits, l)
		}
	}
}

// add appends t to the policy in file order; the first token with a hash
// is the one Authenticate finds.
func (b *policyBuilder) add(t *Token) {
	b.policy.tokens = append(b.policy.tokens, t)
	if _, dup := b.policy.byHash[t.Hash]; !dup {
		b.policy.byHash[t.Hash] = t
	}
}
