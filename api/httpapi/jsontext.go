package httpapi

import "unicode/utf8"

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
