package httpapi

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/weir-rl/weir/api"
)

// validJSONText reports whether a JSON body decodes without loss:
// encoding/json silently replaces invalid UTF-8 and unpaired surrogate
// escapes ("\udc00") with U+FFFD, which would turn distinct keys into one
// bucket. A body that is not valid UTF-8, or whose strings hold an
// unpaired surrogate escape, is refused instead.
func validJSONText(body []byte) bool {
	if !utf8.Valid(body) {
		return false
	}
	inString := false
	for i := 0; i < len(body); i++ {
		switch c := body[i]; {
		case c == '"':
			inString = !inString
		case c == '\\' && inString:
			if i+1 >= len(body) {
				return true // malformed; the decoder says so
			}
			if body[i+1] != 'u' {
				i++ // a two-character escape; skip its second byte
				continue
			}
			r, ok := hex4(body, i+2)
			if !ok {
				return true // malformed; the decoder says so
			}
			i += 5
			switch {
			case r >= 0xDC00 && r <= 0xDFFF:
				return false // a low surrogate without its high one
			case r >= 0xD800 && r <= 0xDBFF:
				if i+6 >= len(body) || body[i+1] != '\\' || body[i+2] != 'u' {
					return false
				}
				lo, ok := hex4(body, i+3)
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					return false
				}
				i += 6
			}
		}
	}
	return true
}

// hex4 parses the four hex digits at b[i:i+4].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// fieldNames checks the object member names of a JSON body against the
// contract every request body keeps: names are matched exactly, as written
// in the API reference (lower-case snake_case), and each appears at most
// once per object. encoding/json alone would match "KEY" or "\u212aey"
// (the Kelvin sign folds to k) to "key" and let the last of two "key"s win,
// so a proxy or firewall that reads the first, or compares names exactly,
// would judge a different request than Weir decides. It returns nil for a
// body that is not valid JSON: the decoder reports that, so every syntax
// error reads the same.
func fieldNames(body []byte) *api.Error {
	dec := json.NewDecoder(bytes.NewReader(body))
	type frame struct {
		object  bool
		wantKey bool
		seen    map[string]bool
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // the end, or malformed: the decoder answers
		}
		top := len(stack) - 1
		if top >= 0 && stack[top].object && stack[top].wantKey {
			if name, ok := tok.(string); ok {
				if !snakeCase(name) {
					return invalidf("unknown field %q (field names are matched exactly, in lower case)", api.Clip(name))
				}
				if stack[top].seen[name] {
					return invalidf("field %q is given twice", name)
				}
				stack[top].seen[name] = true
				stack[top].wantKey = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{object: true, wantKey: true, seen: map[string]bool{}})
			continue
		case json.Delim('['):
			stack = append(stack, frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// A value ended: the enclosing object wants its next name.
		if top := len(stack) - 1; top >= 0 && stack[top].object {
			stack[top].wantKey = true
		}
	}
}

// snakeCase reports whether name is 1 to 64 bytes of a-z, 0-9 and '_', the
// only names any request body has.
func snakeCase(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}
