package api

import (
	"context"
	"testing"
)

type otherKey struct{}

// TestRequestID: the id is read back directly and through contexts made on
// top of it, other values pass through to the parent, WithoutRequestID
// hides it, and an empty id is no id.
func TestRequestID(t *testing.T) {
	parent := context.WithValue(context.Background(), otherKey{}, "v")
	if got := WithRequestID(parent, ""); got != parent {
		t.Fatal("an empty id wrapped the context")
	}
	ctx := WithRequestID(parent, "r1")
	cancelled, cancel := context.WithCancel(ctx)
	defer cancel()
	cases := map[string]struct {
		ctx  context.Context
		want string
	}{
		"none":                    {parent, ""},
		"direct":                  {ctx, "r1"},
		"under a value":           {context.WithValue(ctx, otherKey{}, "w"), "r1"},
		"under a cancel":          {cancelled, "r1"},
		"replaced":                {WithRequestID(ctx, "r2"), "r2"},
		"removed":                 {WithoutRequestID(ctx), ""},
		"removed, under a cancel": {context.WithoutCancel(WithoutRequestID(ctx)), ""},
	}
	for name, c := range cases {
		if got := RequestID(c.ctx); got != c.want {
			t.Errorf("%s: RequestID = %q, want %q", name, got, c.want)
		}
	}
	if v, _ := ctx.Value(otherKey{}).(string); v != "v" {
		t.Errorf("the parent's value reads %q through the id's context", v)
	}
}

// BenchmarkRequestID is what a client take's request id costs its front
// end and engine: carried in the context, then read.
func BenchmarkRequestID(b *testing.B) {
	ctx := context.Background()
	id := string([]byte("0123456789abcdef")) // made at run time, as a caller's id is
	b.ReportAllocs()
	for b.Loop() {
		if RequestID(WithRequestID(ctx, id)) == "" {
			b.Fatal("no id")
		}
	}
}
