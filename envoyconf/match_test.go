package envoyconf

import (
	"errors"
	"strings"
	"testing"
)

// The configurations and decisions below are envoyproxy/ratelimit's README
// examples (its "Examples" section), as that service matches them.

func mustConfig(t *testing.T, files ...string) *Config {
	t.Helper()
	var fs []*File
	for i, src := range files {
		f, err := Parse("f"+string(rune('0'+i))+".yaml", []byte(src))
		if err != nil {
			t.Fatalf("Parse: %v", err)
		}
		fs = append(fs, f)
	}
	c, err := Build(fs...)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return c
}

// entries parses "k=v,k2=v2".
func entries(s string) []Entry {
	var out []Entry
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		out = append(out, Entry{Key: k, Value: v})
	}
	return out
}

type matchCase struct {
	desc string // "k=v,k2=v2"
	rule string // the rule ID, "" for no match
	rpu  uint32
}

func checkMatches(t *testing.T, c *Config, domain string, cases []matchCase) {
	t.Helper()
	for _, tc := range cases {
		m := c.Match(domain, entries(tc.desc))
		got := ""
		if m.Rule != nil {
			got = m.Rule.ID
		}
		if got != tc.rule {
			t.Errorf("%s %s: rule %q, want %q", domain, tc.desc, got, tc.rule)
			continue
		}
		if m.Rule != nil && m.Rule.Limit.RequestsPerUnit != tc.rpu {
			t.Errorf("%s %s: %d per unit, want %d", domain, tc.desc, m.Rule.Limit.RequestsPerUnit, tc.rpu)
		}
	}
}

const example1 = `
domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit:
      unit: second
      requests_per_unit: 500

  - key: database
    value: default
    rate_limit:
      unit: second
      requests_per_unit: 500
`

const example2 = `
domain: messaging
descriptors:
  # Only allow 5 marketing messages a day
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5

  # Only allow 100 messages a day to any unique phone number
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 100
`

const example3 = `
domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 10

  # Black list IP
  - key: remote_address
    value: 50.0.0.5
    rate_limit:
      unit: second
      requests_per_unit: 0
`

const example4a = `
domain: example4
descriptors:
  - key: key
    value: value
    rate_limit:
      requests_per_unit: 300
      unit: second
`

const example4b = `
domain: example4
descriptors:
  - key: key
    value: value
    descriptors:
      - key: subkey
        rate_limit:
          requests_per_unit: 300
          unit: second
`

const example5 = `
domain: internal
descriptors:
  - key: ldap
    rate_limit:
      unlimited: true

  - key: azure
    rate_limit:
      unit: minute
      requests_per_unit: 100
`

const example6 = `
domain: example6
descriptors:
  - key: service
    descriptors:
      - key: user
        value: user-a
        rate_limit:
          requests_per_unit: 10
          unit: second
        shadow_mode: true
      - key: user
        value: user-b
        rate_limit:
          requests_per_unit: 20
          unit: second
`

const example7 = `
domain: example7
descriptors:
  - key: key_1
    value: value_1
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          name: specific_limit
          requests_per_unit: 5
          unit: second
  - key: key_2
    value: value_2
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          replaces:
            - name: specific_limit
          requests_per_unit: 10
          unit: second
`

const example8 = `
domain: example8
descriptors:
  - key: key1
    detailed_metric: true
    rate_limit:
      unit: minute
      requests_per_unit: 10
  - key: key1
    value: value1
    rate_limit:
      unit: minute
      requests_per_unit: 20
`

const example9 = `
domain: example9
descriptors:
  - key: key1
    value: value*
    rate_limit:
      unit: minute
      requests_per_unit: 20
  - key: path
    value: /api/*/action
    rate_limit:
      unit: minute
      requests_per_unit: 20
  - key: route
    value: /api/*/resource/*/action
    rate_limit:
      unit: minute
      requests_per_unit: 20
`

const example11 = `
domain: example11
descriptors:
  # With share_threshold: true, all files/* matches share the same threshold
  - key: files
    value: files/*
    share_threshold: true
    rate_limit:
      unit: hour
      requests_per_unit: 10

  # Without share_threshold, each files_no_share/* match has its own isolated threshold
  - key: files_no_share
    value: files_no_share/*
    share_threshold: false
    rate_limit:
      unit: hour
      requests_per_unit: 10
`

func TestReadmeExamplesMatch(t *testing.T) {
	checkMatches(t, mustConfig(t, example1), "mongo_cps", []matchCase{
		{"database=users", "mongo_cps.database_users", 500},
		{"database=default", "mongo_cps.database_default", 500},
		{"database=other", "", 0},
	})
	// Example 2: ("message_type","marketing"),("to_number",X) gets 5 a day
	// per number; ("to_number",X) 100 a day per number.
	checkMatches(t, mustConfig(t, example2), "messaging", []matchCase{
		{"message_type=marketing,to_number=2061111111", "messaging.message_type_marketing.to_number", 5},
		{"to_number=2061111111", "messaging.to_number", 100},
		{"message_type=marketing", "", 0}, // a placeholder, no limit
		{"message_type=transactional,to_number=2061111111", "", 0},
	})
	// Example 3: key/value before key alone.
	checkMatches(t, mustConfig(t, example3), "edge_proxy_per_ip", []matchCase{
		{"remote_address=50.0.0.1", "edge_proxy_per_ip.remote_address", 10},
		{"remote_address=50.0.0.5", "edge_proxy_per_ip.remote_address_50.0.0.5", 0},
	})
	// Example 4: the request's depth must be the configuration's.
	checkMatches(t, mustConfig(t, example4a), "example4", []matchCase{
		{"key=value,subkey=subvalue", "", 0},
		{"key=value", "example4.key_value", 300},
	})
	checkMatches(t, mustConfig(t, example4b), "example4", []matchCase{
		{"key=value,subkey=subvalue", "example4.key_value.subkey", 300},
		{"key=value", "", 0},
	})
	c5 := mustConfig(t, example5)
	checkMatches(t, c5, "internal", []matchCase{{"ldap=x", "internal.ldap", 0}, {"azure=x", "internal.azure", 100}})
	if m := c5.Match("internal", entries("ldap=x")); !m.Rule.Limit.Unlimited {
		t.Error("ldap is not unlimited")
	}
	c6 := mustConfig(t, example6)
	checkMatches(t, c6, "example6", []matchCase{
		{"service=auth-service,user=user-a", "example6.service.user_user-a", 10},
		{"service=auth-service,user=user-b", "example6.service.user_user-b", 20},
	})
	if !c6.Match("example6", entries("service=auth-service,user=user-a")).Rule.ShadowMode {
		t.Error("user-a is not in shadow mode")
	}
	c7 := mustConfig(t, example7)
	checkMatches(t, c7, "example7", []matchCase{
		{"key_1=value_1,user=bkthomps", "example7.key_1_value_1.user_bkthomps", 5},
		{"key_2=value_2,user=bkthomps", "example7.key_2_value_2.user_bkthomps", 10},
	})
	if r := c7.Match("example7", entries("key_2=value_2,user=bkthomps")).Rule; len(r.Limit.Replaces) != 1 || r.Limit.Replaces[0] != "specific_limit" {
		t.Errorf("replaces %v", r.Limit.Replaces)
	}
	checkMatches(t, mustConfig(t, example8), "example8", []matchCase{
		{"key1=unspecified_value", "example8.key1", 10},
		{"key1=unspecified_value2", "example8.key1", 10},
		{"key1=value1", "example8.key1_value1", 20},
	})
	checkMatches(t, mustConfig(t, example9), "example9", []matchCase{
		{"key1=value1", "example9.key1_value*", 20},
		{"key1=valueXYZ", "example9.key1_value*", 20},
		{"key1=valu", "", 0},
		{"path=/api/123/action", "example9.path_/api/*/action", 20},
		{"path=/api/user-id/action", "example9.path_/api/*/action", 20},
		{"path=/api/123/other", "", 0},
		{"route=/api/v1/resource/123/action", "example9.route_/api/*/resource/*/action", 20},
		{"route=/api/v2/resource/456/action", "example9.route_/api/*/resource/*/action", 20},
		{"route=/api/v2/resource/456", "", 0},
	})
	// Example 11: share_threshold puts every files/* value in one bucket.
	c11 := mustConfig(t, example11)
	a, b := c11.Match("example11", entries("files=files/a.pdf")), c11.Match("example11", entries("files=files/b.csv"))
	if a.Entries[0] != b.Entries[0] || a.Entries[0].Value != "files/*" {
		t.Errorf("share_threshold buckets %v and %v, want both files/*", a.Entries, b.Entries)
	}
	na, nb := c11.Match("example11", entries("files_no_share=files_no_share/a.pdf")), c11.Match("example11", entries("files_no_share=files_no_share/b.csv"))
	if na.Rule == nil || na.Entries[0] == nb.Entries[0] {
		t.Errorf("without share_threshold the buckets are %v and %v, want distinct", na.Entries, nb.Entries)
	}
	if c11.Match("nope", entries("files=files/a.pdf")).Rule != nil {
		t.Error("an unknown domain matched")
	}
}

func TestWildcardMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, value string
		want           bool
	}{
		{"a*", "a", true},
		{"a*", "abc", true},
		{"a*", "b", false},
		{"a*c", "ac", true},
		{"a*c", "abbc", true},
		{"a*c", "abcd", false},
		{"a*b*c", "abc", true},
		{"a*b*c", "ac", false},
		{"a*b*c", "axxbyyc", true},
		{"ab*ba", "aba", false},
		{"*", "", true},
		{"x", "x", true},
		{"x", "y", false},
	} {
		if got := wildcardMatch(strings.Split(tc.pattern, "*"), tc.value); got != tc.want {
			t.Errorf("%q ~ %q = %v, want %v", tc.pattern, tc.value, got, tc.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"empty domain", "descriptors: []\n", "f.yaml: line 1: config file cannot have empty domain"},
		{"unknown key", "domain: d\ndescriptors:\n  - key: a\n    vaule: b\n", `f.yaml: line 4: unknown key "vaule" in a descriptor`},
		{"empty key", "domain: d\ndescriptors:\n  - value: b\n", "f.yaml: line 3: descriptor has empty key"},
		{"duplicate", "domain: d\ndescriptors:\n  - key: a\n  - key: a\n", "f.yaml: line 4: duplicate descriptor composite key 'd.a'"},
		{"bad unit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n", "f.yaml: line 4: invalid rate limit unit 'fortnight'"},
		{"unit with unlimited", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unlimited: true\n      unit: second\n", "f.yaml: line 5: should not specify rate limit unit when unlimited"},
		{"empty replaces", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      replaces: [{name: ''}]\n", "f.yaml: line 7: should not have an empty replaces entry"},
		{"self replaces", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      name: x\n      unit: second\n      requests_per_unit: 1\n      replaces:\n        - name: x\n", "f.yaml: line 9: replaces should not contain name of same descriptor"},
		{"share without wildcard", "domain: d\ndescriptors:\n  - key: a\n    value: b\n    share_threshold: true\n", "f.yaml: line 5: share_threshold can only be used with wildcard values"},
		{"negative rpu", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: -1}\n", "f.yaml: line 4: requests_per_unit must be an integer from 0 to 4294967295"},
		{"quota", "domain: d\ndescriptors:\n  - key: a\n    quota_mode: true\n", "f.yaml: line 4: quota_mode is not supported by Weir"},
		{"shadow not bool", "domain: d\ndescriptors:\n  - key: a\n    shadow_mode: yes please\n", "f.yaml: line 4: shadow_mode must be true or false"},
		{"bad algorithm", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      weir: {algorithm: leaky}\n", "f.yaml: line 7: algorithm must be"},
		{"burst on fixed window", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      weir: {burst: 4}\n", "f.yaml: line 7: burst belongs to token_bucket and gcra only"},
		{"syntax", "domain: d\ndescriptors:\n  - key: [\n", "f.yaml: line 3: did not find expected node content"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("f.yaml", []byte(tc.src))
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrInvalid) && !strings.Contains(tc.name, "syntax") {
				t.Errorf("%v is not ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to contain %q", err, tc.want)
			}
		})
	}
	// Every problem at once.
	_, err := Parse("f.yaml", []byte("domain: d\ndescriptors:\n  - key: a\n    x: 1\n  - key: b\n    rate_limit: {unit: eon}\n"))
	if es, ok := errors.AsType[Errors](err); !ok || len(es) != 2 {
		t.Fatalf("got %v, want two problems", err)
	}
	// A domain in two files.
	f1, _ := Parse("a.yaml", []byte("domain: d\n"))
	f2, _ := Parse("b.yaml", []byte("domain: d\n"))
	if _, err := Build(f1, f2); err == nil || !strings.Contains(err.Error(), "b.yaml: line 1: duplicate domain 'd' in config file (also in a.yaml)") {
		t.Fatalf("duplicate domain: %v", err)
	}
}

func TestRuleBucket(t *testing.T) {
	c := mustConfig(t, `
domain: d
descriptors:
  - key: fw
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: tb
    rate_limit:
      unit: minute
      requests_per_unit: 60
      weir: {algorithm: token_bucket, burst: 5, on_owner_unreachable: closed}
  - key: sw
    rate_limit:
      unit: MONTH
      requests_per_unit: 7
      weir: {algorithm: sliding_window}
`)
	rs := c.Rules()
	if len(rs) != 3 {
		t.Fatalf("%d rules", len(rs))
	}
	if b := rs[0].Bucket(); b.Algorithm.String() != "fixed_window" || b.Capacity != 10 || b.Calendar.String() != "second" {
		t.Errorf("fw: %+v", b)
	}
	if b := rs[1].Bucket(); b.Algorithm.String() != "token_bucket" || b.Capacity != 5 || b.Rate.N != 60 || b.Rate.Per.Seconds() != 60 || rs[1].Limit.OnOwnerUnreachable != "closed" {
		t.Errorf("tb: %+v %+v", b, rs[1].Limit)
	}
	if b := rs[2].Bucket(); b.Algorithm.String() != "sliding_window" || b.Window.Hours() != 720 {
		t.Errorf("sw: %+v", b)
	}
}

// The README examples as files (what the node's tests serve) load as one
// directory: one domain per file.
func TestReadmeExamplesLoadDir(t *testing.T) {
	c, err := LoadDir("testdata/readme")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(c.Domains()); got != 10 {
		t.Fatalf("%d domains, want 10: %v", got, c.Domains())
	}
}

// deploy/envoy/ratelimit, the rules of the example Envoy bootstrap, loads and
// matches the descriptors that bootstrap's actions send.
func TestDeployEnvoyRules(t *testing.T) {
	c, err := LoadDir("../deploy/envoy/ratelimit")
	if err != nil {
		t.Fatal(err)
	}
	checkMatches(t, c, "edge", []matchCase{
		{"remote_address=10.0.0.7", "edge.remote_address", 20},
		{"remote_address=10.0.0.7,path=/api/orders", "edge.remote_address.path_/api/*", 600},
		{"remote_address=10.0.0.7,path=/static/app.js", "", 0},
	})
}
