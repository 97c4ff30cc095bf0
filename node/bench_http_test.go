package node_test

import (
	"net"
	"net/http"
	"testing"

	"github.com/weir-rl/weir/internal/apitest"
	"github.com/weir-rl/weir/internal/ceiling"
)

// BenchmarkHTTPServeVsCeiling is make bench's HTTP cell on uniform keys in
// one process: a started node's public HTTP server, and beside it the
// ceiling make bench measures it against (package ceiling), each answering
// takes over loopback from 16 concurrent callers through the same client,
// on 100,000 keys in turn. The process's CPU per
// take (cpu-ns/op) is what a take costs the two ends together, so the two
// rows' ratio is make bench's "÷ ceiling" for this cell with the client's
// cost held equal and without a second process's noise (run them
// interleaved, a process per run, as
// bench/results/ceiling-vs-http-74f9f67/inproc.sh does; the machine drifts):
//
//	go test -run '^$' -bench HTTPServeVsCeiling -benchtime 100000x ./node
func BenchmarkHTTPServeVsCeiling(b *testing.B) {
	b.Run("target=ceiling", func(b *testing.B) {
		srv := ceiling.NewHTTPServer()
		addr := serveOnLoopback(b, srv.Serve, func() { _ = srv.Close() })
		benchHTTPTakes(b, "http://"+addr+"/v1/take")
	})
	b.Run("target=weir", func(b *testing.B) {
		n := startedBenchNode(b)
		benchHTTPTakes(b, "http://"+n.HTTPAddr()+"/v1/take")
	})
}

// benchHTTPTakes posts one take per iteration to url from 16 callers, each
// with its own kept-alive connection, on 100,000 keys in turn, and reports
// the process's CPU per take.
func benchHTTPTakes(b *testing.B, url string) {
	const callers = 16
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: callers}}
	b.Cleanup(c.CloseIdleConnections)
	parallelTakes(b, callers, func(key string) bool {
		return apitest.PostOK(b, c, url, `{"checks":[{"limit":"bench","key":"`+key+`","cost":1}]}`)
	})
}

// serveOnLoopback runs serve on a new loopback listener until the
// benchmark ends, then calls stop, and returns the listener's address.
func serveOnLoopback(b *testing.B, serve func(net.Listener) error, stop func()) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = serve(ln) }()
	b.Cleanup(stop)
	return ln.Addr().String()
}
