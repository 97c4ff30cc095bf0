package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestClusterSubcommandsInProcess runs cluster-wait and owner against a
// real node, a cluster of one.
func TestClusterSubcommandsInProcess(t *testing.T) {
	n := startNode(t)
	ctx := context.Background()
	var out, errb bytes.Buffer
	if code := run(ctx, []string{"cluster-wait", "-addrs", n.HTTPAddr(), "-members", "1", "-timeout", "10s"}, &out, &errb); code != 0 {
		t.Fatalf("cluster-wait -members 1: exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "1 members alive") {
		t.Fatalf("cluster-wait printed %q", out.String())
	}
	out.Reset()
	if code := run(ctx, []string{"owner", "-addr", "http://" + n.HTTPAddr(), "-limit", "bench", "-key", "k0"}, &out, &errb); code != 0 {
		t.Fatalf("owner: exit %d: %s", code, errb.String())
	}
	if got := strings.TrimSpace(out.String()); got == "" || strings.ContainsAny(got, " \n") {
		t.Fatalf("owner printed %q, want one member name", got)
	}
	errb.Reset()
	if code := run(ctx, []string{"cluster-wait", "-addrs", n.HTTPAddr(), "-members", "3", "-timeout", "300ms"}, &out, &errb); code != 1 {
		t.Fatalf("cluster-wait -members 3 on a cluster of one: exit %d, want 1", code)
	}
	if !strings.Contains(errb.String(), "want 3 alive") {
		t.Fatalf("cluster-wait timed out saying %q", errb.String())
	}
	for _, args := range [][]string{
		{"cluster-wait"},
		{"cluster-wait", "-addrs", n.HTTPAddr()},
		{"cluster-wait", "-addrs", ",", "-members", "1"},
		{"owner", "-limit", ""},
		{"owner", "extra"},
	} {
		if code := run(ctx, args, &out, &errb); code != 2 {
			t.Errorf("run(%q) = exit %d, want 2", args, code)
		}
	}
	if code := run(ctx, []string{"owner", "-addr", "127.0.0.1:0"}, &out, &errb); code != 1 {
		t.Errorf("owner asked of no node: exit %d, want 1", code)
	}
}

// TestWaitClusterConverges serves three views that converge after a few
// polls: a member suspect, then one missing, then all alive.
func TestWaitClusterConverges(t *testing.T) {
	var polls atomic.Int64
	view := func(states ...string) string {
		var ms []string
		for i, s := range states {
			ms = append(ms, fmt.Sprintf(`{"name":"n%d","addr":"x","state":%q,"limits_version":1}`, i+1, s))
		}
		return `{"node":"n1","epoch":3,"members":[` + strings.Join(ms, ",") + `]}`
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := polls.Add(1); {
		case p <= 3:
			fmt.Fprint(w, view("alive", "suspect", "alive"))
		case p <= 6:
			fmt.Fprint(w, view("alive", "alive"))
		default:
			fmt.Fprint(w, view("alive", "alive", "alive"))
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	views, err := waitCluster(ctx, srv.Client(), []string{srv.URL, srv.URL}, 3, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(views) != 2 || views[0].alive() != 3 || polls.Load() < 8 {
		t.Fatalf("returned %d views after %d polls, want 2 views of 3 alive after at least 8 polls", len(views), polls.Load())
	}
	// A node that answers an error never satisfies the wait.
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
	}))
	defer bad.Close()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if _, err := waitCluster(ctx2, bad.Client(), []string{srv.URL, bad.URL}, 3, time.Millisecond); err == nil ||
		!strings.Contains(err.Error(), "503") {
		t.Fatalf("a failing node: %v, want its 503 named", err)
	}
}

func TestClusterURL(t *testing.T) {
	if got := clusterURL("127.0.0.1:1", "", ""); got != "http://127.0.0.1:1/v1/cluster" {
		t.Errorf("clusterURL = %q", got)
	}
	if got := clusterURL("http://h:1/", "a b", "k&1"); got != "http://h:1/v1/cluster?key=k%261&limit=a+b" {
		t.Errorf("clusterURL with a key = %q", got)
	}
}

// TestOwnerNamesNone: a node that names no owner is an error.
func TestOwnerNamesNone(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"node":"x","epoch":1,"members":[]}`)
	}))
	defer srv.Close()
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"owner", "-addr", srv.URL}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "names no owner") {
		t.Fatalf("exit %d, %q", code, errb.String())
	}
}
