package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/node/limits"
)

// The targets loadgen can drive, and their default addresses.
var defaultAddrs = map[string]string{
	"weir-grpc": "127.0.0.1:8081",
	"weir-http": "127.0.0.1:8080",
	"redis-lua": "127.0.0.1:6379",
	// Acquire then Release on a concurrency limit, one round trip per
	// request.
	"weir-lease-grpc": "127.0.0.1:8081",
}

// config is the command line of a load run.
type config struct {
	Target      string
	Addrs       []string
	Concurrency []int
	Duration    time.Duration
	Requests    int64
	Warmup      time.Duration
	Timeout     time.Duration
	Keys        int
	Dist        keyDist
	Limit       string
	LimitsPath  string
	Cost        int64
	Conns       int
	JSON        bool
	Label       string
	ServerPIDs  []int
	MetricsURLs []string
	Rotate      bool
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is main without the process: it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "report":
			return report(args[1:], stdout, stderr)
		case "cluster-wait":
			return clusterWait(ctx, args[1:], stdout, stderr)
		case "owner":
			return owner(ctx, args[1:], stdout, stderr)
		case "suite":
			return suite(ctx, args[1:], stdout, stderr)
		case "ceiling":
			return ceilingCmd(ctx, args[1:], stdout, stderr)
		case "spread":
			return spread(args[1:], stdout, stderr)
		}
	}
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, err)
		return 2
	}
	t, err := newTarget(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer func() { _ = t.close() }()

	enc := json.NewEncoder(stdout)
	if !cfg.JSON {
		fmt.Fprintf(stdout, "%-10s %5s %7s %10s %12s %9s %9s %9s %9s %9s %10s %8s %7s %11s %11s\n",
			"target", "conc", "keys", "decisions", "req/s", "mean", "p50", "p99", "p99.9", "max", "allowed", "denied", "errors",
			"srv CPU/req", "lg CPU/req")
	}
	code := 0
	for _, c := range cfg.Concurrency {
		res, err := runCell(ctx, t, cellConfig{
			Concurrency: c, Duration: cfg.Duration, Requests: cfg.Requests,
			Warmup: cfg.Warmup, Keys: cfg.Keys, Dist: cfg.Dist, Timeout: cfg.Timeout, ServerPIDs: cfg.ServerPIDs,
			MetricsURLs: cfg.MetricsURLs,
		})
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		res.Target, res.Label, res.Addrs, res.Limit = cfg.Target, cfg.Label, cfg.Addrs, cfg.Limit
		if cfg.JSON {
			if err := enc.Encode(res); err != nil {
				fmt.Fprintln(stderr, err)
				return 1
			}
		} else {
			fmt.Fprintf(stdout, "%-10s %5d %7d %10d %12.0f %9s %9s %9s %9s %9s %10d %8d %7d %11s %11s\n",
				res.Target, res.Concurrency, res.Keys, res.Decisions, res.Throughput,
				fmtUs(res.MeanUs), fmtUs(res.P50Us), fmtUs(res.P99Us), fmtUs(res.P999Us), fmtUs(res.MaxUs),
				res.Allowed, res.Denied, res.Errors,
				fmtUs(res.serverCPUPerDecision()), fmtUs(res.loadgenCPUPerDecision()))
		}
		if res.MetricsError != "" {
			fmt.Fprintf(stderr, "loadgen: %s c=%d: forwarding counters not read: %s\n", res.Target, c, res.MetricsError)
		} else if res.Scraped && !cfg.JSON {
			fmt.Fprintf(stdout, "%-10s %5d forwarded %.0f (%.2f per request) in %.0f batches (mean %.2f), %.0f forward errors\n",
				"", c, res.Forwarded, res.forwardsPerDecision(), res.ForwardBatches, res.meanBatch(), res.ForwardErrors)
		}
		if res.Errors > 0 {
			fmt.Fprintf(stderr, "loadgen: %s c=%d: %d errors, first: %s\n", res.Target, c, res.Errors, res.FirstError)
		}
		if res.Decisions == 0 {
			code = 1 // nothing was decided: the numbers mean nothing
		}
	}
	return code
}

// parseFlags reads the command line of a load run.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	var (
		cfg  config
		list listFlags
	)
	fs := newFlagSet(&cfg, &list, stderr)
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("loadgen: unexpected arguments %q", fs.Args())
	}
	if err := cfg.finish(list, flagSet(fs, "limit")); err != nil {
		return config{}, err
	}
	return cfg, nil
}

// listFlags holds the flags that parseFlags reads as text and config.finish
// turns into config's fields.
type listFlags struct {
	addrs   string // -addrs, comma-separated
	concs   string // -concurrency, comma-separated
	pids    string // -server-pid, comma-separated
	metrics string // -metrics, comma-separated
	dist    string // -dist
}

// newFlagSet returns the flag set of a load run, with its usage text,
// writing each flag into cfg or, for those config.finish reads, into list.
func newFlagSet(cfg *config, list *listFlags, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: loadgen -target weir-grpc|weir-http|weir-lease-grpc|redis-lua [flags]\n"+
			"       loadgen report [-compare LABEL -to LABEL] [results.jsonl ...]\n"+
			"       loadgen cluster-wait -addrs HTTP,... -members N [-timeout 30s]\n"+
			"       loadgen owner -addr HTTP -limit L -key K\n"+
			"       loadgen suite [-quick] [-seconds 5] [-callers 1,16,64,256] [-workloads hot,uniform,zipf] (make bench)\n"+
			"       loadgen ceiling -kind http|grpc -addr ADDR (an empty server; the suite starts its ceilings so)\n"+
			"       loadgen spread RUN1/bench.csv RUN2/bench.csv ... (same-run ratios of several suite runs: median and range)\n\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.Target, "target", "", "weir-grpc, weir-http, weir-lease-grpc or redis-lua (required)")
	fs.StringVar(&list.addrs, "addrs", "", "comma-separated addresses; caller i uses address i mod n (default: the target's usual loopback port)")
	fs.StringVar(&list.concs, "concurrency", "1,16,64", "comma-separated list of concurrencies, one cell each")
	fs.DurationVar(&cfg.Duration, "duration", 5*time.Second, "measured time per cell; 0 bounds by -requests only")
	fs.Int64Var(&cfg.Requests, "requests", 0, "requests per cell over all callers; 0 bounds by -duration only")
	fs.DurationVar(&cfg.Warmup, "warmup", time.Second, "unrecorded warm-up before each cell")
	fs.DurationVar(&cfg.Timeout, "timeout", 5*time.Second, "how long an outstanding request may run past the cell's end")
	fs.IntVar(&cfg.Keys, "keys", 1, "distinct keys, picked per request by -dist; 1 is one hot key")
	fs.StringVar(&list.dist, "dist", "uniform", "key distribution: uniform or zipf")
	fs.StringVar(&cfg.Limit, "limit", "bench", "limit name (weir-lease-grpc: bench-lease unless set)")
	fs.StringVar(&cfg.LimitsPath, "limits", "", "limits file whose -limit gives redis-lua its capacity and rate (required for redis-lua)")
	fs.Int64Var(&cfg.Cost, "cost", 1, "cost of each request")
	fs.IntVar(&cfg.Conns, "conns", 1, "weir-grpc, weir-lease-grpc: client connections per address")
	fs.BoolVar(&cfg.Rotate, "rotate", false, "weir-grpc, weir-lease-grpc: each caller moves to the next address on every request (round robin)")
	fs.BoolVar(&cfg.JSON, "json", false, "print one JSON object per cell instead of a table")
	fs.StringVar(&list.pids, "server-pid", "", "comma-separated local server processes whose CPU time per cell is reported, summed (Linux)")
	fs.StringVar(&list.metrics, "metrics", "", "comma-separated node HTTP addresses whose /metrics forwarding counters are read around each cell")
	fs.StringVar(&cfg.Label, "label", "", "free text copied into -json output (e.g. \"1 node\")")
	return fs
}

// finish completes cfg from the list flags and checks it, before anything
// is connected. limitSet says -limit was given (else weir-lease-grpc uses
// bench-lease). It reports the first problem, checking in a fixed order:
// -dist, -target, -addrs, -server-pid, -rotate, -concurrency, -cost and
// -conns, then the cell bounds.
func (cfg *config) finish(list listFlags, limitSet bool) error {
	d, err := parseKeyDist(list.dist)
	if err != nil {
		return err
	}
	cfg.Dist = d
	if cfg.Addrs, err = targetAddrs(cfg.Target, list.addrs); err != nil {
		return err
	}
	if cfg.ServerPIDs, err = parsePIDs(list.pids); err != nil {
		return err
	}
	for _, a := range splitList(list.metrics) {
		cfg.MetricsURLs = append(cfg.MetricsURLs, metricsURL(a))
	}
	if cfg.Target == "weir-lease-grpc" && !limitSet {
		cfg.Limit = "bench-lease"
	}
	if cfg.Rotate && cfg.Target != "weir-grpc" && cfg.Target != "weir-lease-grpc" {
		return errors.New("loadgen: -rotate applies to weir-grpc and weir-lease-grpc only")
	}
	if cfg.Concurrency, err = parseConcurrency(list.concs); err != nil {
		return err
	}
	if cfg.Cost < 1 || cfg.Conns < 1 {
		return errors.New("loadgen: -cost and -conns must be at least 1")
	}
	// Check the cell bounds once, before connecting to anything.
	return cellConfig{
		Concurrency: 1, Duration: cfg.Duration, Requests: cfg.Requests,
		Warmup: cfg.Warmup, Keys: cfg.Keys, Timeout: cfg.Timeout,
	}.validate()
}

// targetAddrs returns the addresses listed in addrs, or target's default
// address when addrs is empty. It fails on an unknown target or a list
// that names no address.
func targetAddrs(target, addrs string) ([]string, error) {
	def, ok := defaultAddrs[target]
	if !ok {
		return nil, fmt.Errorf("loadgen: -target must be weir-grpc, weir-http, weir-lease-grpc or redis-lua, got %q", target)
	}
	if addrs == "" {
		addrs = def
	}
	out := splitList(addrs)
	if len(out) == 0 {
		return nil, errors.New("loadgen: -addrs lists no address")
	}
	return out, nil
}

// parsePIDs parses -server-pid: process ids, each at least 1.
func parsePIDs(list string) ([]int, error) {
	var pids []int
	for _, p := range splitList(list) {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("loadgen: -server-pid: %q is not a process id", p)
		}
		pids = append(pids, n)
	}
	return pids, nil
}

// parseConcurrency parses -concurrency: one positive integer per cell; an
// empty item is an error.
func parseConcurrency(list string) ([]int, error) {
	var out []int
	for c := range strings.SplitSeq(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("loadgen: -concurrency: %q is not a positive integer", c)
		}
		out = append(out, n)
	}
	return out, nil
}

// splitList returns the items of a comma-separated list, trimmed of spaces,
// without the empty ones; nil if there are none.
func splitList(s string) []string {
	var out []string
	for a := range strings.SplitSeq(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// newTarget connects to the target named in cfg.
func newTarget(ctx context.Context, cfg config) (target, error) {
	switch cfg.Target {
	case "weir-grpc":
		return newGRPCTarget(cfg.Addrs, cfg.Conns, cfg.Limit, cfg.Keys, cfg.Cost, cfg.Rotate)
	case "weir-lease-grpc":
		return newLeaseTarget(cfg.Addrs, cfg.Conns, cfg.Limit, cfg.Keys, cfg.Rotate)
	case "weir-http":
		return newHTTPTarget(cfg.Addrs, max(maxOf(cfg.Concurrency), 1), cfg.Limit, cfg.Keys, cfg.Cost)
	default: // redis-lua; parseFlags checked the name
		b, err := redisBucket(cfg.LimitsPath, cfg.Limit, cfg.Cost)
		if err != nil {
			return nil, err
		}
		return newRedisTarget(ctx, cfg.Addrs, cfg.Limit, cfg.Keys, b, cfg.Cost)
	}
}

// redisBucket reads the token bucket of limit name from the limits file, so
// the script decides with the parameters the Weir node serves.
func redisBucket(path, name string, cost int64) (bucketSpec, error) {
	if path == "" {
		return bucketSpec{}, errors.New("loadgen: redis-lua needs -limits FILE (e.g. bench/limits.yaml) to know the bucket")
	}
	f, err := limits.Load(path)
	if err != nil {
		return bucketSpec{}, err
	}
	l, ok := f.Lookup(name)
	if !ok || l.Kind != limits.KindRate || l.Bucket.Algorithm != bucket.TokenBucket {
		return bucketSpec{}, fmt.Errorf("loadgen: %s: no token_bucket limit named %q", path, name)
	}
	if cost > l.Bucket.Capacity {
		return bucketSpec{}, fmt.Errorf("loadgen: -cost %d is above the capacity %d of %q", cost, l.Bucket.Capacity, name)
	}
	return bucketSpec{Capacity: l.Bucket.Capacity, N: l.Bucket.Rate.N, Per: l.Bucket.Rate.Per}, nil
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func maxOf(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// fmtUs formats microseconds for the text table.
func fmtUs(us float64) string {
	switch {
	case us >= 10_000:
		return strconv.FormatFloat(us/1000, 'f', 1, 64) + "ms"
	case us >= 100:
		return strconv.FormatFloat(us, 'f', 0, 64) + "µs"
	default:
		return strconv.FormatFloat(us, 'f', 1, 64) + "µs"
	}
}
