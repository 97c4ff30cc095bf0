package middleware_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/weir-rl/weir/api/client"
	"github.com/weir-rl/weir/internal/leakcheck"
	"github.com/weir-rl/weir/node"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// testLimits are the limits the tests and examples decide by: mw drains in
// three requests and refills one token every 20 minutes, so nothing refills
// during a test.
const testLimits = `
version: 1
limits:
  - name: mw
    capacity: 3
    rate: 3/h
  - name: mw-closed
    capacity: 3
    rate: 3/h
    on_owner_unreachable: closed
`

// weirNode is a running node and a Go client of it.
type weirNode struct {
	n      *node.Node
	client *client.Client
	conn   *grpc.ClientConn
}

// startWeir starts a real node on loopback with testLimits and the legacy
// X-RateLimit trio on, as the middleware under test sends it; stop ends it.
func startWeir() (w *weirNode, stop func(), err error) {
	dir, err := os.MkdirTemp("", "weir-mw-")
	if err != nil {
		return nil, nil, err
	}
	path := filepath.Join(dir, "limits.yaml")
	if err := os.WriteFile(path, []byte(testLimits), 0o600); err != nil {
		return nil, nil, err
	}
	cfg := node.LocalConfig()
	cfg.LimitsPath = path
	cfg.HTTP.LegacyHeaders = true
	n, err := node.New(cfg, node.Deps{})
	if err != nil {
		return nil, nil, err
	}
	if err := n.Start(context.Background()); err != nil {
		return nil, nil, err
	}
	conn, err := grpc.NewClient(n.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, err
	}
	stop = func() {
		_ = conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = n.Shutdown(ctx)
		_ = os.RemoveAll(dir)
	}
	return &weirNode{n: n, client: client.New(conn), conn: conn}, stop, nil
}

func newWeir(t *testing.T) *weirNode {
	t.Helper()
	w, stop, err := startWeir()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return w
}

// deadWeir returns a client of an address where nothing listens: every
// call fails as when the node is down.
func deadWeir(t *testing.T) *client.Client {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return client.New(conn)
}
