package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"
)

// suiteConfig is the command line of `loadgen suite`.
type suiteConfig struct {
	WeirBin    string
	RedisBin   string
	LimitsPath string
	Limit      string
	AllotLimit string // Limit with allotments: auto, for the -allot targets
	OutDir     string
	Duration   time.Duration
	Warmup     time.Duration
	Callers    []int
	Workloads  []workload
	Targets    []string // only these, when set
	Quick      bool
	// Rounds is how many slices each cell is measured in, the targets
	// of one workload and number of callers taking turns (rounds.go).
	Rounds int
	// Self is the load generator's own binary, started as `loadgen
	// ceiling` for the ceilings (os.Executable() unless a test sets it).
	Self string
	// GubernatorBin is Gubernator v2's server (bin/gubernator, built by
	// `make gubernator`); its targets are skipped, with why, when it is
	// missing.
	GubernatorBin string
	// CPUProfile is where the load generator's CPU profile goes ("": none).
	CPUProfile string
}

// suite is `loadgen suite`: it starts every target on loopback, runs one
// cell per workload × callers × target (targets interleaved at each
// number of callers, so background load hits them alike), prints one
// progress line per cell, and writes the Markdown table, CSV, SVG plot and
// raw JSON lines under -out.
func suite(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseSuiteFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, err)
		return 2
	}
	stop, err := startCPUProfile(cfg.CPUProfile)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	rows, header, err := runSuite(ctx, cfg, stderr)
	if perr := stop(); perr != nil && err == nil {
		err = perr
	}
	if len(rows) > 0 {
		if werr := writeSuite(cfg.OutDir, header, rows, stdout); werr != nil {
			fmt.Fprintln(stderr, werr)
			return 1
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	for _, r := range rows {
		if r.Check != "ok" {
			fmt.Fprintf(stderr, "loadgen: suite: %s %s c=%d failed its check: %s\n", r.Workload.Name, r.Target.Name, r.Result.Concurrency, r.Check)
			return 1
		}
	}
	return 0
}

// parseSuiteFlags reads the suite's command line.
func parseSuiteFlags(args []string, stderr io.Writer) (suiteConfig, error) {
	var cfg suiteConfig
	var (
		seconds   float64
		callers   string
		workloads string
		targets   string
		keys      int
	)
	fs := flag.NewFlagSet("loadgen suite", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.WeirBin, "weir", "bin/weir", "the weir binary to start")
	fs.StringVar(&cfg.RedisBin, "redis-server", "redis-server", "the redis-server binary to start")
	fs.StringVar(&cfg.GubernatorBin, "gubernator", "bin/gubernator", "Gubernator v2's server binary (make gubernator); its targets are skipped when it is missing")
	fs.StringVar(&cfg.LimitsPath, "limits", "bench/limits.yaml", "limits file of the Weir nodes and of the Lua bucket")
	fs.StringVar(&cfg.Limit, "limit", "bench", "the limit every request decides on (it must never deny)")
	fs.StringVar(&cfg.AllotLimit, "allot-limit", "bench-allot", "the limit of the -allot targets: -limit with allotments: auto")
	fs.StringVar(&cfg.OutDir, "out", "bench/results", "directory of bench.md, bench.csv, bench.svg and bench.jsonl")
	fs.Float64Var(&seconds, "seconds", 5, "measured seconds per cell")
	fs.DurationVar(&cfg.Warmup, "warmup", time.Second, "unrecorded warm-up per cell")
	fs.StringVar(&callers, "callers", "1,16,64,256", "numbers of callers, one cell each")
	fs.StringVar(&workloads, "workloads", "hot,uniform,zipf", "key patterns: hot (1 key), uniform and zipf (over -keys keys)")
	fs.IntVar(&keys, "keys", 100_000, "distinct keys of the uniform and zipf workloads")
	fs.StringVar(&targets, "targets", "", "comma-separated target names to run (default: all)")
	fs.StringVar(&cfg.CPUProfile, "cpuprofile", "", "write the load generator's own CPU profile of the whole run to this file: the client side of the targets run (run one for a clean picture)")
	fs.IntVar(&cfg.Rounds, "rounds", 1, "measure each cell in this many slices of -seconds/N, the targets of a workload and number of callers taking turns (each slice warms up for -warmup)")
	fs.BoolVar(&cfg.Quick, "quick", false, "a short run: 0.3 s cells after 0.1 s warm-up, unless -seconds or -warmup are given")
	err := fs.Parse(args)
	if err != nil {
		return suiteConfig{}, err
	}
	if fs.NArg() > 0 {
		return suiteConfig{}, fmt.Errorf("loadgen: suite: unexpected arguments %q", fs.Args())
	}
	if cfg.Quick {
		if !flagSet(fs, "seconds") {
			seconds = 0.3
		}
		if !flagSet(fs, "warmup") {
			cfg.Warmup = 100 * time.Millisecond
		}
	}
	if !(seconds > 0) || seconds > 3600 {
		return suiteConfig{}, fmt.Errorf("loadgen: suite: -seconds %v: want more than 0, at most 3600", seconds)
	}
	cfg.Duration = time.Duration(seconds * float64(time.Second))
	if cfg.Rounds < 1 || cfg.Rounds > 100 {
		return suiteConfig{}, fmt.Errorf("loadgen: suite: -rounds %d: want 1 to 100", cfg.Rounds)
	}
	if cfg.Warmup < 0 {
		return suiteConfig{}, errors.New("loadgen: suite: negative -warmup")
	}
	for c := range strings.SplitSeq(callers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 1 || n > 100_000 {
			return suiteConfig{}, fmt.Errorf("loadgen: suite: -callers: %q is not a number of callers", c)
		}
		cfg.Callers = append(cfg.Callers, n)
	}
	if keys < 2 {
		return suiteConfig{}, errors.New("loadgen: suite: -keys must be at least 2")
	}
	for w := range strings.SplitSeq(workloads, ",") {
		switch w = strings.TrimSpace(w); w {
		case "hot":
			cfg.Workloads = append(cfg.Workloads, workload{Name: w, Keys: 1})
		case "uniform":
			cfg.Workloads = append(cfg.Workloads, workload{Name: w, Keys: keys, Dist: distUniform})
		case "zipf":
			cfg.Workloads = append(cfg.Workloads, workload{Name: w, Keys: keys, Dist: distZipf})
		default:
			return suiteConfig{}, fmt.Errorf("loadgen: suite: -workloads: %q is not hot, uniform or zipf", w)
		}
	}
	for t := range strings.SplitSeq(targets, ",") {
		if t = strings.TrimSpace(t); t != "" {
			cfg.Targets = append(cfg.Targets, t)
		}
	}
	if cfg.Self, err = selfPath(); err != nil {
		return suiteConfig{}, err
	}
	return cfg, nil
}

// suiteEnv is what runSuite started; close stops it, every process by
// its own pid.
type suiteEnv struct {
	dir                string
	ceilHTTP, ceilGRPC *ceilingProc
	// aa are the second copies of the ceilings that -targets names as
	// A/A targets (aaCopies), in aaCopies' order.
	aa         []aaCeiling
	redis      *proc
	nodes      []*weirNode
	gubernator []*guberNode
	// guberWhyNot says why the Gubernator targets are not run, "" when
	// they are.
	guberWhyNot string
	stops       []func() // in-process servers, stopped after the nodes
}

func (e *suiteEnv) close() {
	for _, n := range slices.Backward(e.nodes) {
		n.stop(10 * time.Second)
	}
	for _, stop := range e.stops {
		stop()
	}
	for _, n := range slices.Backward(e.gubernator) {
		n.stop(10 * time.Second)
	}
	for _, a := range e.aa {
		a.proc.stop(5 * time.Second)
	}
	for _, p := range []*ceilingProc{e.ceilHTTP, e.ceilGRPC} {
		if p != nil {
			p.stop(5 * time.Second)
		}
	}
	if e.redis != nil {
		e.redis.stop(5 * time.Second)
	}
	_ = os.RemoveAll(e.dir)
}

// runSuite starts the servers, runs the cells and returns the rows, the
// Markdown header describing the run, and the error that stopped it early.
func runSuite(ctx context.Context, cfg suiteConfig, stderr io.Writer) ([]suiteRow, string, error) {
	b, err := redisBucket(cfg.LimitsPath, cfg.Limit, 1)
	if err != nil {
		return nil, "", err
	}
	dir, err := os.MkdirTemp("", "weir-bench-")
	if err != nil {
		return nil, "", err
	}
	env := &suiteEnv{dir: dir}
	defer env.close()

	if env.ceilHTTP, err = startCeiling(ctx, cfg.Self, dir, ceilingHTTPKind); err != nil {
		return nil, "", err
	}
	if env.ceilGRPC, err = startCeiling(ctx, cfg.Self, dir, ceilingGRPCKind); err != nil {
		return nil, "", err
	}
	if err := startAACeilings(ctx, cfg, dir, env); err != nil {
		return nil, "", err
	}
	redisAddr := ""
	if env.redis, redisAddr, err = startRedisServer(ctx, cfg.RedisBin, dir); err != nil {
		return nil, "", err
	}
	resp := weirHasFlag(cfg.WeirBin, "resp-addr")
	solo, err := startWeir(ctx, weirNodeConfig{bin: cfg.WeirBin, limits: cfg.LimitsPath, dir: dir, name: "solo", resp: resp})
	if err != nil {
		return nil, "", err
	}
	env.nodes = append(env.nodes, solo)
	trio, err := startTrio(ctx, cfg, dir, "n", false, env)
	if err != nil {
		return nil, "", err
	}
	trioOff, err := startTrio(ctx, cfg, dir, "r", true, env)
	if err != nil {
		return nil, "", err
	}
	if err := startGubernator(ctx, cfg, dir, env); err != nil {
		return nil, "", err
	}
	specs, skips := suiteSpecs(cfg, b, env, redisAddr, solo, trio, trioOff, resp)
	traced, err := tracedSpecs(ctx, cfg, dir, env)
	if err != nil {
		return nil, "", err
	}
	specs = append(specs, traced...)
	header := suiteHeader(cfg, skips)
	total := len(cfg.Workloads) * len(cfg.Callers) * len(specs)
	fmt.Fprintf(stderr, "loadgen: suite: %d cells of %v in %d round(s) (+%v warm-up a slice): %d targets × %d callers × %d workloads; skipped: %d\n",
		total, cfg.Duration, max(cfg.Rounds, 1), cfg.Warmup, len(specs), len(cfg.Callers), len(cfg.Workloads), len(skips))
	var rows []suiteRow
	printed := 0
	progress := func(r suiteRow) {
		printed++
		fmt.Fprintln(stderr, progressLine(printed, total, r))
	}
	for _, wl := range cfg.Workloads {
		for _, c := range cfg.Callers {
			group, err := runGroup(ctx, cfg, specs, wl, c, progress)
			rows = append(rows, group...)
			if err != nil {
				return rows, header, err
			}
		}
	}
	return rows, header + "- load average after: " + loadAvg() + "\n\n", nil
}

// startTrio starts a 3-node cluster whose nodes are named prefix1..3
// (with replication off when noRepl), adds them to env, and waits until
// every node sees all three.
func startTrio(ctx context.Context, cfg suiteConfig, dir, prefix string, noRepl bool, env *suiteEnv) ([]*weirNode, error) {
	var trio []*weirNode
	resp := weirHasFlag(cfg.WeirBin, "resp-addr") // the Go client takes over it
	for i := range 3 {
		join := ""
		if i > 0 {
			join = trio[0].gossipAddr
		}
		n, err := startWeir(ctx, weirNodeConfig{
			bin: cfg.WeirBin, limits: cfg.LimitsPath, dir: dir, name: prefix + itoa(i+1), join: join, noReplication: noRepl, resp: resp,
		})
		if err != nil {
			return nil, err
		}
		env.nodes = append(env.nodes, n)
		trio = append(trio, n)
	}
	var httpAddrs []string
	for _, n := range trio {
		httpAddrs = append(httpAddrs, n.httpAddr)
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if _, err := waitCluster(wctx, &http.Client{Timeout: 2 * time.Second}, httpAddrs, 3, 100*time.Millisecond); err != nil {
		return nil, fmt.Errorf("loadgen: suite: the 3-node cluster %s1..3 did not form: %w", prefix, err)
	}
	// For a node's HandoffWindow after the last join, a new owner pulls each
	// key from its previous owner on first use: with a million keys nearly
	// every take of the first cell would be a pull. Cells measure the
	// settled cluster.
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(trioSettle):
	}
	return trio, nil
}

// trioSettle is how long a formed cluster is left alone before its first
// cell: weir serve's default HandoffWindow (5 s) and a second of margin.
const trioSettle = 6 * time.Second

// runSuiteCell opens s for wl, runs one cell and checks it.
func runSuiteCell(ctx context.Context, cfg suiteConfig, s suiteSpec, wl workload, callers int) suiteRow {
	row := suiteRow{Workload: wl, Target: s.info}
	row.Result = cellResult{Target: s.info.Name, Limit: cfg.Limit, Concurrency: callers, Keys: wl.Keys, Dist: wl.Dist.String()}
	t, err := s.open(ctx, wl)
	if err != nil {
		row.Check = "not started: " + err.Error()
		return row
	}
	defer func() { _ = t.close() }()
	res, err := runCell(ctx, t, cellConfig{
		Concurrency: callers, Duration: cfg.Duration, Warmup: cfg.Warmup, Keys: wl.Keys, Dist: wl.Dist,
		Timeout: 5 * time.Second, ServerPIDs: s.pids, MetricsURLs: s.metrics,
	})
	res.Target, res.Limit = s.info.Name, cfg.Limit
	row.Result = res
	row.Check = checkCell(res)
	if err != nil {
		row.Check = err.Error()
	}
	return row
}

// progressLine is the one line printed per cell.
func progressLine(i, total int, r suiteRow) string {
	res := r.Result
	cpu, cpuOK := serverCPU(r)
	fwd, fwdOK := forwardedShare(r)
	return fmt.Sprintf("[%d/%d] %-7s c=%-3d %-19s %9.0f/s  p50 %s  p99 %s  p99.9 %s  cpu %s µs  fwd %s  %s",
		i, total, r.Workload.Name, res.Concurrency, r.Target.Name, res.Throughput,
		fmtUs(res.P50Us), fmtUs(res.P99Us), fmtUs(res.P999Us), fmtSig(cpu, cpuOK), fmtShare(fwd, fwdOK), r.Check)
}

// suiteHeader describes the run: machine, versions, cell length, what
// each target is, and what was skipped.
func suiteHeader(cfg suiteConfig, skips []skipped) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## `make bench`, %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "- machine: %d CPUs (%s), %s; %s; %s\n", runtime.NumCPU(), cpuModel(), runtime.GOOS+"/"+runtime.GOARCH,
		runtime.Version(), versionOf(cfg.RedisBin, "--version"))
	fmt.Fprintf(&b, "- weir: %s, tree %s\n", versionOf(cfg.WeirBin, "version"), versionOf("git", "describe", "--always", "--dirty"))
	fmt.Fprintf(&b, "- cells: %v measured after %v warm-up; callers %v; limit `%s` of `%s` (never denies; the `-allot` targets: `%s`, the same with allotments: auto); %s\n",
		cfg.Duration, cfg.Warmup, cfg.Callers, cfg.Limit, cfg.LimitsPath, cfg.AllotLimit, roundsNote(cfg))
	fmt.Fprintf(&b, "- load average before: %s\n", loadAvg())
	if !slices.ContainsFunc(skips, func(s skipped) bool { return strings.HasPrefix(s.name, "gubernator") }) {
		fmt.Fprintf(&b, "- gubernator: %s\n", gubernatorVersion(cfg.GubernatorBin))
	}
	for _, s := range skips {
		fmt.Fprintf(&b, "- not run: %s: %s\n", s.name, s.why)
	}
	return b.String()
}

// writeSuite writes bench.md (header and tables), bench.csv, bench.svg and
// bench.jsonl under dir, and the Markdown to stdout.
func writeSuite(dir, header string, rows []suiteRow, stdout io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var md strings.Builder
	md.WriteString(header)
	md.WriteString("\n")
	if err := writeMarkdown(&md, rows); err != nil {
		return err
	}
	write := func(name string, f func(io.Writer) error) error {
		file, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		return errors.Join(f(file), file.Close())
	}
	err := errors.Join(
		write("bench.md", func(w io.Writer) error { _, err := io.WriteString(w, md.String()); return err }),
		write("bench.csv", func(w io.Writer) error { return writeCSV(w, rows) }),
		write("bench.svg", func(w io.Writer) error { return writeSVG(w, rows) }),
		write("bench.jsonl", func(w io.Writer) error {
			enc := json.NewEncoder(w)
			for _, r := range rows {
				res := r.Result
				res.Label = r.Workload.Name
				if err := enc.Encode(res); err != nil {
					return err
				}
			}
			return nil
		}),
	)
	if err != nil {
		return err
	}
	_, err = io.WriteString(stdout, md.String())
	return err
}

// startCPUProfile starts profiling this process into path, and returns
// the function that stops it and closes the file; for "" it does nothing.
func startCPUProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("loadgen: suite: -cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("loadgen: suite: -cpuprofile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}
