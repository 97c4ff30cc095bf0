package api

// This file is the one escaping of a key built from named parts, shared by
// the Envoy front ends (api/envoyrls descriptors, api/rlqs bucket ids): each
// part is "k=v", parts are joined by ",", and '%', ',' and '=' inside a
// name or value are percent-encoded, so two different sets of parts never
// render to the same key.

// KeyPartLen is len(AppendKeyPart(nil, s)).
func KeyPartLen(s string) int {
	n := len(s)
	for i := 0; i < len(s); i++ {
		if keyPartEscapes(s[i]) {
			n += 2
		}
	}
	return n
}

// AppendKeyPart appends s to b with '%', ',' and '=' percent-encoded
// (%25, %2C, %3D).
func AppendKeyPart(b []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if keyPartEscapes(c) {
			b = append(b, '%', hex[c>>4], hex[c&0xf])
			continue
		}
		b = append(b, c)
	}
	return b
}

func keyPartEscapes(c byte) bool { return c == '%' || c == ',' || c == '=' }
