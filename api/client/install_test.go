package client

import (
	"fmt"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// A ring installed after a member failed keeps the failure mark for its
// downFor, though the ring still lists the member: routing goes on
// skipping it. The member the ring came from is reachable, and loses its
// mark.
func TestRingInstallKeepsFailureMarks(t *testing.T) {
	r, fc, addrs := ringRouter(t, "a", "b")
	set := r.members.Load()
	a, b := set.byName["a"], set.byName["b"]
	if a == nil || b == nil || !a.healthy(fc.Now()) || !b.healthy(fc.Now()) {
		t.Fatalf("after the first ring: members %v", set.byName)
	}
	r.failed(a)
	r.failed(b)
	r.apply(&ringView{from: "a", epoch: 2, addrs: addrs}, a)
	set = r.members.Load()
	if set.byName["a"] != a || set.byName["b"] != b {
		t.Fatal("the second ring replaced members it still lists")
	}
	if b.healthy(fc.Now()) {
		t.Fatal("a ring installed after b failed cleared b's failure mark")
	}
	if !a.healthy(fc.Now()) {
		t.Fatal("a answered the ring but stays marked failed")
	}
	if m, _, _ := r.pick(nil); m != a {
		t.Fatalf("routing picked %s; want a, the one member not marked failed", m.name)
	}
	_ = fc.Sleep(t.Context(), downFor)
	if !b.healthy(fc.Now()) {
		t.Fatalf("b still marked failed %v after its failure", downFor)
	}
}

// TestRetryAvoidsEveryMemberThatFailedTheTake: a retry goes to a member
// that has not failed the take's earlier attempts, even when every member
// is marked failed (by this take or by others), wherever the round robin
// starts; when every member failed the take, it still gets one.
func TestRetryAvoidsEveryMemberThatFailedTheTake(t *testing.T) {
	r, _, _ := ringRouter(t, "a", "b", "c")
	set := r.members.Load()
	a, b, c := set.byName["a"], set.byName["b"], set.byName["c"]
	for _, m := range []*member{a, b, c} {
		r.failed(m)
	}
	for i := range 2 * len(set.list) { // every start of the round robin
		if m, _, _ := r.pick(nil, a, b); m != c {
			t.Fatalf("pick %d after a and b failed the take: %s; want c", i, m.name)
		}
	}
	if m, _, _ := r.pick(nil, a, b, c); m == nil {
		t.Fatal("no member picked when every member failed the take")
	}
}

// ringRouter returns a router on a fake clock with a first ring of the
// named members, at addresses that are never dialled (nothing is sent),
// and those addresses by name.
func ringRouter(t *testing.T, names ...string) (*router, *fakeClock, map[string]string) {
	t.Helper()
	fc := newFakeClock()
	opts := DefaultOptions()
	opts.Clock, opts.Transport = fc, TransportGRPC
	r := newRouter(opts.withDefaults())
	r.dial = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	t.Cleanup(r.close)
	addrs := map[string]string{}
	for i, name := range names {
		addrs[name] = fmt.Sprintf("127.0.0.1:%d", i+1)
	}
	r.apply(&ringView{from: names[0], epoch: 1, addrs: addrs}, nil)
	return r, fc, addrs
}
