package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestValidJSONText(t *testing.T) {
	for body, want := range map[string]bool{
		`{"key":"plain"}`:                  true,
		`{"key":"caf\u00e9 \ud83d\ude00"}`: true, // é and a surrogate pair
		`{"key":"\\udc00"}`:                true, // an escaped backslash, then text
		`{"key":"\"\udc00"}`:               false,
		"{\"key\":\"\xff\"}":               false,
		`{"key":"\udc00"}`:                 false,
		`{"key":"\ud83d"}`:                 false,
		`{"key":"\ud83dx"}`:                false,
		`{"key":"\ud83d\u0041"}`:           false,
		`{"key":"\u0000"}`:                 true,
		`"\u12`:                            true, // malformed: left to the decoder
	} {
		if got := validJSONText([]byte(body)); got != want {
			t.Errorf("validJSONText(%q) = %v, want %v", body, got, want)
		}
	}
}

// FuzzValidJSONText: whenever validJSONText accepts a body that
// encoding/json decodes into a string, the string is what the body's text
// means: no replacement character appears that the body did not contain.
func FuzzValidJSONText(f *testing.F) {
	for _, s := range []string{`"a"`, `"\udc00"`, `"\ud83d\ude00"`, "\"\xff\"", `"\\u"`, `"\ufffd"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var s string
		if json.Unmarshal(body, &s) != nil || !validJSONText(body) {
			return
		}
		if strings.ContainsRune(s, utf8.RuneError) && !strings.Contains(string(body), "\ufffd") && !strings.Contains(strings.ToLower(string(body)), `\ufffd`) {
			t.Fatalf("accepted %q, which decodes lossily to %q", body, s)
		}
	})
}
