// Command jepsen runs Weir's fault-injection matrix against real weir
// processes in network namespaces and prints a summary table. It needs root
// (ip netns, veth, bridge, iptables). It exits 1 when any scenario fails its
// checks, 2 when the harness itself fails.
//
//	jepsen -quick                       # 3 nodes: kill, pause, isolate, long-partition, broken
//	jepsen -nodes 3,5 -faults all       # the full matrix
//	jepsen -seed 42 -faults isolate     # reproduce one scenario
//	jepsen -compose deploy/docker-compose.yml -image weir:jepsen -faults kill,pause
//	                                    # the deploy/ compose cluster (3 nodes, docker)
package main

import (
	"context"
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

// quick is the CI suite; all is the full matrix.
var (
	quick = []string{"kill", "pause", "isolate", "long-partition", "broken"}
	all   = []string{"none", "kill", "pause", "isolate", "long-partition", "split", "ring", "loss", "leave", "skew", "broken"}
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("jepsen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	bin := fs.String("bin", "bin/weir", "weir binary (build it with CGO_ENABLED=0)")
	nodes := fs.String("nodes", "3", "cluster sizes, comma separated (3 or 5)")
	faults := fs.String("faults", strings.Join(quick, ","), "scenarios, comma separated, or all: "+strings.Join(all, ","))
	quickF := fs.Bool("quick", false, "the CI suite: 3 nodes, "+strings.Join(quick, ","))
	seed := fs.Uint64("seed", 0, "seed for targets and traffic (0: from the clock)")
	out := fs.String("out", "jepsen/runs", "directory for run directories")
	prefix := fs.String("prefix", "wj", "name prefix of the namespaces and veths")
	xfail := fs.String("xfail", "", "scenarios expected to fail because of a known, reported bug (e.g. 3-long-partition):\n"+
		"shown as XFAIL and not counted in the exit status; one that passes shows XPASS")
	composeFile := fs.String("compose", "", "run on the deploy/ docker compose cluster from this file (deploy/docker-compose.yml)\n"+
		"instead of processes in network namespaces: 3 nodes, the image given by -image; -bin and -prefix are unused")
	image := fs.String("image", "weir:jepsen", "with -compose: the weir image, built beforehand from deploy/Dockerfile")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *quickF {
		*nodes, *faults = "3", strings.Join(quick, ",")
	}
	if *faults == "all" {
		*faults = strings.Join(all, ",")
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano() % 1_000_000)
	}
	var composeCfg jepsen.ComposeConfig
	if *composeFile != "" {
		composeCfg = jepsen.DefaultComposeConfig()
		composeCfg.File, composeCfg.Image = *composeFile, *image
		if err := composeCfg.Validate(); err != nil {
			fmt.Fprintf(stderr, "%v\n", err)
			return 2
		}
		if err := composeSupports(*nodes, *faults); err != nil {
			fmt.Fprintf(stderr, "jepsen: -compose: %v\n", err)
			return 2
		}
	}
	absBin, err := filepath.Abs(*bin)
	if err == nil && *composeFile == "" {
		_, err = os.Stat(absBin)
	}
	if err != nil {
		fmt.Fprintf(stderr, "jepsen: weir binary: %v (run make build)\n", err)
		return 2
	}
	runDir := filepath.Join(*out, time.Now().Format("20060102-150405")+"-"+strconv.FormatUint(*seed, 10))
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		fmt.Fprintf(stderr, "jepsen: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	start := time.Now()
	var results []jepsen.Result
	harnessErr := false
	for _, ns := range strings.Split(*nodes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(ns))
		if err != nil || n < 1 {
			fmt.Fprintf(stderr, "jepsen: bad -nodes %q\n", ns)
			return 2
		}
		nw := &jepsen.Net{Prefix: *prefix, N: n}
		backend, cleanup := jepsen.NetnsNodes(absBin, nw), func() { nw.Cleanup(ctx) }
		if *composeFile != "" {
			// Each scenario brings its containers up and down itself.
			backend, cleanup = jepsen.ComposeNodes(composeCfg), func() {}
		} else if err := nw.Setup(ctx); err != nil {
			fmt.Fprintf(stderr, "jepsen: %v\n", err)
			return 2
		}
		for _, f := range strings.Split(*faults, ",") {
			sc, err := scenario(strings.TrimSpace(f), n)
			if err != nil {
				cleanup()
				fmt.Fprintf(stderr, "jepsen: %v\n", err)
				return 2
			}
			sc.Seed, sc.Nodes = *seed, backend
			sc.Dir = filepath.Join(runDir, sc.Name)
			fmt.Fprintf(stderr, "jepsen: %s ...\n", sc.Name)
			res, err := jepsen.Run(ctx, sc)
			res.KnownBug = slices.Contains(strings.Split(*xfail, ","), sc.Name)
			if err != nil {
				fmt.Fprintf(stderr, "jepsen: %s: %v\n", sc.Name, err)
				harnessErr = true
				if ctx.Err() != nil {
					break
				}
				continue
			}
			fmt.Fprintf(stderr, "jepsen: %s %s in %v\n", sc.Name, map[bool]string{true: "passed", false: "FAILED"}[res.Pass], res.Elapsed.Round(time.Second))
			results = append(results, res)
		}
		cleanup()
		if ctx.Err() != nil {
			break
		}
	}
	f, err := os.Create(filepath.Join(runDir, "summary.txt"))
	if err == nil {
		_ = jepsen.WriteSummary(io.MultiWriter(stdout, f), results)
		f.Close()
	} else {
		_ = jepsen.WriteSummary(stdout, results)
	}
	if err := writeHTML(filepath.Join(runDir, "report.html"), fmt.Sprintf("Weir jepsen run %s (seed %d)", filepath.Base(runDir), *seed), results); err != nil {
		fmt.Fprintf(stderr, "jepsen: report.html: %v\n", err)
	}
	fmt.Fprintf(stdout, "seed %d, %d scenarios in %v, results in %s\n", *seed, len(results), time.Since(start).Round(time.Second), runDir)
	switch {
	case harnessErr || ctx.Err() != nil:
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
func scenario(name string, n int) (jepsen.ScenarioConfig, error) {
	sc := jepsen.DefaultScenario()
	sc.Name = fmt.Sprintf("%d-%s", n, name)
	switch name {
	case "none":
		sc.Fault, sc.Before = jepsen.None, 8*time.Second
	case "broken":
		sc.Fault, sc.Before, sc.Standalone, sc.ExpectViolation = jepsen.None, 6*time.Second, true, true
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
		return sc, fmt.Errorf("unknown scenario %q (want one of %s)", name, strings.Join(all, ","))
	}
	return sc, nil
}
