package client_test

import (
	"io"
	"net"
	"strings"
	"testing"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/api/client"
)

// These tests stop a member gracefully while a caller holds a request or
// a stream open on it, and check that the member's buckets still reach
// their new owner with their debt. A new owner cannot pull from a member
// gone, so a bucket the leaving member failed to hand over starts full
// there: the leave would admit again what was spent before it.

// TestLeaveWithOpenStreamKeepsDebt: the client keeps a TakeStream open for
// as long as it runs. The member ends it when it drains, instead of
// waiting for it to the end of ShutdownTimeout (after which the handoff,
// on the same clock, had no time left).
func TestLeaveWithOpenStreamKeepsDebt(t *testing.T) {
	tc, c, owned := spendAtN2(t)
	tc.leave("n2")
	checkDebt(t, tc, c, owned)
}

// TestLeaveAfterSlowRequestKeepsDebt: a caller sends a request's body so
// slowly that it holds the drain to the end of ShutdownTimeout. The
// handoff and the leave then get their own bound, not what the drain left.
func TestLeaveAfterSlowRequestKeepsDebt(t *testing.T) {
	tc, c, owned := spendAtN2(t)
	conn, err := net.Dial("tcp", tc.running()["n2"].HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	// The member answers "100 Continue" once its handler reads the body:
	// from then on the request is in flight, and it never ends.
	if _, err := conn.Write([]byte("POST /v1/take HTTP/1.1\r\nHost: weir\r\nContent-Type: application/json\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len("HTTP/1.1 100 Continue\r\n\r\n"))
	if _, err := io.ReadFull(conn, buf); err != nil || !strings.HasPrefix(string(buf), "HTTP/1.1 100 ") {
		t.Fatalf("the member answered %q, %v; want 100 Continue", buf, err)
	}
	tc.leave("n2")
	checkDebt(t, tc, c, owned)
}

// spendAtN2 starts two members and a gRPC client, and spends 100 of 1000
// on each of 20 keys of limit "exact" that n2 owns, through the client's
// stream to n2.
func spendAtN2(t *testing.T) (*testCluster, *client.Client, []string) {
	t.Helper()
	tc := newTestCluster(t)
	tc.noRESP = true // the takes go over gRPC, on the member's stream
	tc.start(2)
	c := dial(t, tc.running()["n1"], client.Options{Transport: client.TransportGRPC})
	var owned []string
	for _, k := range keys("debt", 200) {
		if o, _ := c.Owner("exact", k); o == "n2" {
			owned = append(owned, k)
		}
	}
	if len(owned) < 20 {
		t.Fatalf("n2 owns %d of 200 keys; want 20 or more", len(owned))
	}
	owned = owned[:20]
	for _, k := range owned {
		resp, err := c.Take(t.Context(), api.Check{Limit: "exact", Key: k, Cost: 100})
		if err != nil || !resp.Allowed || resp.Forwarded {
			t.Fatalf("take %s at n2 = %+v, %v; want allowed by its owner", k, resp, err)
		}
	}
	return tc, c, owned
}

// checkDebt waits for the members left to agree, then requires each key's
// bucket to hold the 100 spent at n2: 1000 - 100 - 1 after one more take
// (the limit refills 1 an hour).
func checkDebt(t *testing.T, tc *testCluster, c *client.Client, owned []string) {
	t.Helper()
	tc.waitConverged()
	for _, k := range owned {
		resp, err := c.Take(t.Context(), api.Check{Limit: "exact", Key: k, Cost: 1})
		if err != nil {
			t.Fatalf("take %s after the leave: %v", k, err)
		}
		if got := resp.Results[0].Remaining; got != 899 {
			t.Fatalf("take %s after n2 left: %d remaining, want 899 (the 100 spent at n2 were lost in the leave)", k, got)
		}
	}
}
