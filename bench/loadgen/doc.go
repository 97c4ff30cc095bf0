// Command loadgen is Weir's whole-system load generator. It drives one
// target at a list of concurrencies, each for a bounded duration or request
// count, and prints throughput, latency percentiles (p50, p99, p99.9) and the
// allowed / denied / error counts of every cell.
//
// Targets:
//
//	weir-grpc   weir.v1.Limiter/Take over gRPC (the generated weirv1 client)
//	weir-http   POST /v1/take over HTTP/1.1 keep-alive
//	weir-lease-grpc
//	            Acquire then Release on a concurrency limit (-limit
//	            bench-lease): one request is one lease round trip
//	redis-lua   the classic "Redis plus a Lua token bucket": EVALSHA of
//	            redisScript against a redis-server, over a small RESP2 client
//
// `loadgen suite` (make bench) starts every target itself and adds more:
// the cluster-aware Go client, TakeStream, RESP through go-redis, three
// Weir nodes, three Gubernator v2 nodes over HTTP and gRPC
// (suite_gubernator.go), and the ceilings, empty HTTP and gRPC servers
// that `loadgen ceiling -kind http|grpc -addr ADDR` serves from a child
// process of the suite (ceiling.go), so that every target and every
// ceiling is a server in a process of its own.
//
// Every target takes -addrs, a comma-separated list; caller i (a goroutine
// that has one request in flight at a time) uses address i mod len(addrs), so
// a multi-node Weir cluster is driven by listing its nodes. With -rotate
// (the gRPC targets) a caller instead moves to the next address on every
// request, as a round-robin client-side balancer does, so even one caller
// spreads its requests over the nodes.
//
// -server-pid takes a list of processes whose CPU time is summed (a whole
// cluster on this machine), and -metrics a list of node HTTP addresses
// whose forwarding counters (weir_forward_batch_size sum and count,
// weir_forward_errors_total) are read at the start and the end of each
// measured phase: the requests forwarded to owners, the batches they went
// in, and the forwards that failed.
//
// Usage:
//
//	loadgen -target weir-grpc -addrs 127.0.0.1:8081 -concurrency 1,16,64 -duration 5s
//	loadgen -target redis-lua -addrs 127.0.0.1:6379 -concurrency 1,16,64 -json >> results.jsonl
//	loadgen report results.jsonl     # markdown tables with Weir/Redis ratios
//	loadgen report -compare "3 nodes" -to "1 node" results.jsonl
//	loadgen cluster-wait -addrs 127.0.0.1:8080,127.0.0.1:9080 -members 2
//	loadgen owner -addr 127.0.0.1:8080 -limit bench -key k0
//	loadgen suite -quick                 # make bench BENCH_QUICK=1
//	loadgen ceiling -kind grpc -addr 127.0.0.1:9000
//	loadgen spread run-1/bench.csv run-2/bench.csv run-3/bench.csv   # make bench-targets
//
// report -compare A -to B pairs the cells labelled A with those labelled B
// (same target, limit, keys and concurrency) and prints their ratios and
// latency differences. cluster-wait returns once every listed node's GET
// /v1/cluster shows the given number of members, all alive; owner prints
// the name of the member that owns a key (bench/cluster.sh uses both).
// spread reads the bench.csv of several suite runs and prints each
// same-run ratio per run with its median and range: one run's ratio moves
// too much between runs to call a target near its bound.
//
// Latencies are recorded per caller in a fixed log-bucket histogram (64
// linear sub-buckets per power of two: at most 1/64 relative error, exact
// below 128 ns) and merged at the end of a cell; a reported percentile is the
// upper bound of its bucket, so it never understates.
//
// The load generator shares the machine with the servers it drives; see
// bench/README.md for how to read its numbers.
package main
