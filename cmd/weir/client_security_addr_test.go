package main

import "testing"

// TestBareAddrSchemeFollowsTLSFlags: a bare --addr is https:// when a TLS
// flag asks for TLS, http:// otherwise; ":port" is loopback.
func TestBareAddrSchemeFollowsTLSFlags(t *testing.T) {
	for _, tt := range []struct {
		c    connFlags
		want string
	}{
		{connFlags{addr: addrValue{raw: "node:8443"}, caFile: "ca.pem"}, "https://node:8443"},
		{connFlags{addr: addrValue{raw: "node:8443"}, insecure: true}, "https://node:8443"},
		{connFlags{addr: addrValue{raw: "node:8080/"}}, "http://node:8080"},
		{connFlags{addr: addrValue{raw: ":8080"}}, "http://127.0.0.1:8080"},
		{connFlags{addr: addrValue{raw: "http://node:8080"}, caFile: "ca.pem"}, "http://node:8080"},
	} {
		if got := tt.c.base(); got != tt.want {
			t.Errorf("%+v: %s, want %s", tt.c, got, tt.want)
		}
	}
}
