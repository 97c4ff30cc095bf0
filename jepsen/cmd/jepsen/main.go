// Command jepsen runs Weir's fault-injection matrix against real weir
// processes in network namespaces and prints a summary table. It needs root
// (ip netns, veth, bridge, iptables). It exits 1 when any scenario fails its
// checks, 2 when the harness itself fails.
//
//	jepsen -quick                       # 3 nodes: kill, pause, isolate, long-partition, broken, allot-none
//	jepsen -nodes 3,5 -faults all       # the full matrix
//	jepsen -seed 42 -faults isolate     # reproduce one scenario
//	jepsen -compose deploy/docker-compose.yml -image weir:jepsen -faults kill,pause
//	                                    # the deploy/ compose cluster (3 nodes, docker)
//	jepsen -faults soak -duration 30m   # the soak (make soak): 3 nodes, join/leave/kill every 3 min
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/weir-rl/weir/jepsen"
)

// quick is the CI suite; all is the full matrix. The upgrade scenario
// (make jepsen-upgrade, with -from-bin) is in neither.
var (
	quick = []string{"kill", "pause", "isolate", "long-partition", "broken", "allot-none"}
	all   = []string{
		"none", "kill", "pause", "isolate", "long-partition", "split", "ring", "loss", "leave", "skew", "broken",
		"allot-none", "allot-kill", "allot-pause", "allot-isolate", "allot-split",
	}
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run is main without the process: it returns the exit code, 0 when every
// scenario passed (or failed as expected), 1 when one failed its checks, 2
// when the harness failed. A harness failure before any scenario ran stops
// the run at once; one inside a scenario is reported and the run goes on.
func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseOptions(args, stderr)
	if err != nil {
		return 2 // the flag set has said why
	}
	if err := o.prepare(); err != nil {
		fmt.Fprintf(stderr, "%v\n", err)
		return 2
	}
	if o.faults == "soak" {
		return runSoak(o, stdout, stderr)
	}
	runDir := filepath.Join(o.out, time.Now().Format("20060102-150405")+"-"+strconv.FormatUint(o.seed, 10))
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		fmt.Fprintf(stderr, "jepsen: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	start := time.Now()
	m := &matrix{opts: o, runDir: runDir, stderr: stderr}
	if err := m.run(ctx); err != nil {
		fmt.Fprintf(stderr, "%v\n", err)
		return 2
	}
	writeReports(runDir, o.seed, m.results, stdout, stderr)
	fmt.Fprintf(stdout, "seed %d, %d scenarios in %v, results in %s\n", o.seed, len(m.results), time.Since(start).Round(time.Second), runDir)
	return exitCode(m.results, m.harnessErr || ctx.Err() != nil)
}

// options is the command line of a run.
type options struct {
	bin         string // -bin; absBin once prepared
	fromBin     string // -from-bin; absFromBin once prepared
	nodes       string // -nodes, comma-separated cluster sizes
	faults      string // -faults, comma-separated scenario names
	seed        uint64 // -seed, never 0 once parsed
	out         string // -out
	prefix      string // -prefix
	xfail       string // -xfail, comma-separated scenario names
	composeFile string // -compose; "" runs in network namespaces
	image       string // -image
	soak        soakOptions

	absBin     string               // bin made absolute, by prepare
	absFromBin string               // fromBin made absolute ("" without), by prepare
	compose    jepsen.ComposeConfig // with composeFile: the validated config, by prepare
}

// parseOptions reads the command line, applying -quick, expanding -faults
// all and drawing a seed from the clock when none is given. A bad command
// line is reported on stderr by the flag set and returned as an error.
func parseOptions(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("jepsen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.bin, "bin", "bin/weir", "weir binary (build it with CGO_ENABLED=0)")
	fs.StringVar(&o.fromBin, "from-bin", "", "an older weir binary every node starts from; the upgrade scenario replaces it by -bin\n"+
		"one node at a time (make jepsen-upgrade FROM=<git ref> builds it)")
	fs.StringVar(&o.nodes, "nodes", "3", "cluster sizes, comma separated (3 or 5)")
	fs.StringVar(&o.faults, "faults", strings.Join(quick, ","), "scenarios, comma separated, or all: "+strings.Join(all, ",")+";\n"+
		"or soak alone: the long run of make soak (-duration, -soak-every, -soak-rate)")
	quickF := fs.Bool("quick", false, "the CI suite: 3 nodes, "+strings.Join(quick, ","))
	fs.Uint64Var(&o.seed, "seed", 0, "seed for targets and traffic (0: from the clock)")
	fs.StringVar(&o.out, "out", "jepsen/runs", "directory for run directories")
	fs.StringVar(&o.prefix, "prefix", "wj", "name prefix of the namespaces and veths")
	fs.StringVar(&o.xfail, "xfail", "", "scenarios expected to fail because of a known, reported bug (e.g. 3-long-partition):\n"+
		"shown as XFAIL and not counted in the exit status; one that passes shows XPASS")
	fs.StringVar(&o.composeFile, "compose", "", "run on the deploy/ docker compose cluster from this file (deploy/docker-compose.yml)\n"+
		"instead of processes in network namespaces: 3 nodes, the image given by -image; -bin and -prefix are unused")
	fs.StringVar(&o.image, "image", "weir:jepsen", "with -compose: the weir image, built beforehand from deploy/Dockerfile")
	o.soak.flags(fs)
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if *quickF {
		o.nodes, o.faults = "3", strings.Join(quick, ",")
	}
	if o.faults == "all" {
		o.faults = strings.Join(all, ",")
	}
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano() % 1_000_000)
	}
	return o, nil
}

// prepare checks what the run needs before it starts: with -compose a
// valid compose config that supports -nodes and -faults, else a weir
// binary at -bin. It sets absBin and compose. Its errors are complete
// messages.
func (o *options) prepare() error {
	if o.composeFile != "" {
		o.compose = jepsen.DefaultComposeConfig()
		o.compose.File, o.compose.Image = o.composeFile, o.image
		if err := o.compose.Validate(); err != nil {
			return err
		}
		if err := composeSupports(o.nodes, o.faults); err != nil {
			return fmt.Errorf("jepsen: -compose: %w", err)
		}
	}
	absBin, err := filepath.Abs(o.bin)
	if err == nil && o.composeFile == "" {
		_, err = os.Stat(absBin)
	}
	if err != nil {
		return fmt.Errorf("jepsen: weir binary: %w (run make build)", err)
	}
	o.absBin = absBin
	if o.fromBin != "" {
		if o.composeFile != "" {
			return errors.New("jepsen: -from-bin needs network namespaces, not -compose")
		}
		abs, err := filepath.Abs(o.fromBin)
		if err == nil {
			_, err = os.Stat(abs)
		}
		if err != nil {
			return fmt.Errorf("jepsen: -from-bin: %w", err)
		}
		o.absFromBin = abs
	}
	return nil
}

// matrix runs every scenario of -faults at every size of -nodes, in that
// order, and gathers the results.
type matrix struct {
	opts       options
	runDir     string    // each scenario writes under runDir/<name>
	stderr     io.Writer // progress lines
	results    []jepsen.Result
	harnessErr bool // some scenario's harness failed; its result is not in results
}

// run runs the matrix until it is done or ctx ends. Its error is a bad
// -nodes or -faults entry or a network that could not be set up: the run
// stops at once, without a summary.
func (m *matrix) run(ctx context.Context) error {
	for _, ns := range strings.Split(m.opts.nodes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(ns))
		if err != nil || n < 1 {
			return fmt.Errorf("jepsen: bad -nodes %q", ns)
		}
		backend, cleanup, err := m.backend(ctx, n)
		if err != nil {
			return err
		}
		err = m.size(ctx, n, backend)
		cleanup()
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil
}

// backend returns the node backend for clusters of n and the cleanup to
// call after their scenarios: network namespaces set up here and torn down
// by cleanup, or with -compose the compose cluster, which each scenario
// brings up and down itself.
func (m *matrix) backend(ctx context.Context, n int) (func(jepsen.NodesConfig) (jepsen.Nodes, error), func(), error) {
	if m.opts.composeFile != "" {
		return jepsen.ComposeNodes(m.opts.compose), func() {}, nil
	}
	nw := &jepsen.Net{Prefix: m.opts.prefix, N: n}
	if err := nw.Setup(ctx); err != nil {
		return nil, nil, fmt.Errorf("jepsen: %w", err)
	}
	return jepsen.NetnsNodes(m.opts.absBin, m.opts.absFromBin, nw), func() { nw.Cleanup(ctx) }, nil
}

// size runs every scenario at cluster size n on backend, stopping early
// when ctx ends. Its error is an unknown scenario name.
func (m *matrix) size(ctx context.Context, n int, backend func(jepsen.NodesConfig) (jepsen.Nodes, error)) error {
	for _, f := range strings.Split(m.opts.faults, ",") {
		sc, err := scenario(strings.TrimSpace(f), n)
		if err != nil {
			return fmt.Errorf("jepsen: %w", err)
		}
		sc.Seed, sc.Nodes = m.opts.seed, backend
		sc.Dir = filepath.Join(m.runDir, sc.Name)
		if !m.scenario(ctx, sc) && ctx.Err() != nil {
			break
		}
	}
	return nil
}

// scenario runs sc, printing its start and outcome, and records its result,
// or a harness failure; it reports whether the harness succeeded.
func (m *matrix) scenario(ctx context.Context, sc jepsen.ScenarioConfig) bool {
	fmt.Fprintf(m.stderr, "jepsen: %s ...\n", sc.Name)
	res, err := jepsen.Run(ctx, sc)
	res.KnownBug = slices.Contains(strings.Split(m.opts.xfail, ","), sc.Name)
	if err != nil {
		fmt.Fprintf(m.stderr, "jepsen: %s: %v\n", sc.Name, err)
		m.harnessErr = true
		return false
	}
	fmt.Fprintf(m.stderr, "jepsen: %s %s in %v\n", sc.Name, map[bool]string{true: "passed", false: "FAILED"}[res.Pass], res.Elapsed.Round(time.Second))
	m.results = append(m.results, res)
	return true
}

// writeReports writes the summary table to stdout and runDir/summary.txt
// (stdout alone if the file cannot be created) and the HTML report to
// runDir/report.html; a report that cannot be written is said on stderr.
func writeReports(runDir string, seed uint64, results []jepsen.Result, stdout, stderr io.Writer) {
	f, err := os.Create(filepath.Join(runDir, "summary.txt"))
	if err == nil {
		_ = jepsen.WriteSummary(io.MultiWriter(stdout, f), results)
		f.Close()
	} else {
		_ = jepsen.WriteSummary(stdout, results)
	}
	if err := writeHTML(filepath.Join(runDir, "report.html"), fmt.Sprintf("Weir jepsen run %s (seed %d)", filepath.Base(runDir), seed), results); err != nil {
		fmt.Fprintf(stderr, "jepsen: report.html: %v\n", err)
	}
}

// exitCode is the run's exit status: 2 after a harness failure or an
// interrupt, 1 when a scenario failed that is not a known bug, else 0.
func exitCode(results []jepsen.Result, harnessFailed bool) int {
	if harnessFailed {
		return 2
	}
	for _, r := range results {
		if !r.Pass && !r.KnownBug {
			return 1
		}
	}
	return 0
}

// composeSupports reports why the compose backend cannot run the cluster
// sizes and scenarios asked for: deploy/docker-compose.yml has 3 nodes.
func composeSupports(nodes, faults string) error {
	for _, ns := range strings.Split(nodes, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(ns)); err == nil && n != jepsen.ComposeN {
			return fmt.Errorf("deploy/docker-compose.yml has %d nodes; -nodes %s is not supported", jepsen.ComposeN, nodes)
		}
	}
	for _, f := range strings.Split(faults, ",") {
		if f = strings.TrimSpace(f); !slices.Contains(all, f) {
			return fmt.Errorf("unknown scenario %q (want one of %s)", f, strings.Join(all, ","))
		}
	}
	return nil
}

// writeHTML renders the run's HTML report from the scenarios' saved
// histories.
func writeHTML(path, title string, results []jepsen.Result) error {
	var scs []jepsen.ReportScenario
	for _, r := range results {
		sc, err := jepsen.LoadReportScenario(r)
		if err != nil {
			return err
		}
		scs = append(scs, sc)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	werr := jepsen.WriteHTML(f, title, scs)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	return werr
}

// scenario returns the configuration of one named scenario for n nodes.
// allot-<fault> is <fault> on the hot-key-with-allotments workload
// (jepsen.AllotScenario).
func scenario(name string, n int) (jepsen.ScenarioConfig, error) {
	if f, ok := strings.CutPrefix(name, "allot-"); ok && slices.Contains([]string{"none", "kill", "pause", "isolate", "split"}, f) {
		sc, err := scenario(f, n)
		sc.Name = fmt.Sprintf("%d-%s", n, name)
		return jepsen.AllotScenario(sc), err
	}
	sc := jepsen.DefaultScenario()
	sc.Name = fmt.Sprintf("%d-%s", n, name)
	switch name {
	case "none":
		sc.Fault, sc.Before = jepsen.None, 8*time.Second
	case "broken":
		sc.Fault, sc.Before, sc.Standalone, sc.ExpectViolation = jepsen.None, 6*time.Second, true, true
	case "upgrade":
		// Every node in turn; each step waits for the members to agree.
		sc.Fault, sc.During = jepsen.Upgrade, 2*time.Second
	case "kill", "pause", "leave", "skew":
		sc.Fault, sc.During = jepsen.Fault(name), 4*time.Second
	case "isolate", "split", "ring":
		sc.Fault, sc.During = jepsen.Fault(name), 5*time.Second
	case "long-partition":
		// Longer than GossipToTheDeadTime (2s) plus detection (~1.6s), so
		// both sides forget each other and only the rejoin loop heals it.
		sc.Fault, sc.During = jepsen.LongPartition, 8*time.Second
	case "loss":
		sc.Fault, sc.During = jepsen.Loss, 6*time.Second
	default:
		return sc, fmt.Errorf("unknown scenario %q (want one of %s, or upgrade)", name, strings.Join(all, ","))
	}
	return sc, nil
}
