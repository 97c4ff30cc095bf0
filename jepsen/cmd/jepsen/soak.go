package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/weir-rl/weir/jepsen"
)

// soakOptions is the command line of -faults soak.
type soakOptions struct {
	duration time.Duration // -duration
	every    time.Duration // -soak-every
	rate     float64       // -soak-rate; 0 calibrates
	load     float64       // -soak-load
}

func (s *soakOptions) flags(fs *flag.FlagSet) {
	fs.DurationVar(&s.duration, "duration", 30*time.Minute, "with -faults soak: how long the soak runs")
	fs.DurationVar(&s.every, "soak-every", 3*time.Minute, "with -faults soak: a join, a leave or a kill this often, in turn")
	fs.Float64Var(&s.rate, "soak-rate", 0, "with -faults soak: the bulk load in takes/s (0: -soak-load of the rate calibrated flat out)")
	fs.Float64Var(&s.load, "soak-load", 0.5, "with -faults soak and no -soak-rate: the share of the calibrated capacity")
}

// runSoak runs the soak in network namespaces (3 members and a spare),
// prints its summary and writes it to the run directory; it returns the
// exit code: 0 pass, 1 fail, 2 the harness failed.
func runSoak(o options, stdout, stderr io.Writer) int {
	if o.composeFile != "" {
		fmt.Fprintln(stderr, "jepsen: the soak runs in network namespaces, not -compose")
		return 2
	}
	if o.soak.duration < 2*time.Minute || o.soak.every <= 0 {
		fmt.Fprintln(stderr, "jepsen: the soak needs -duration of at least 2m and a positive -soak-every")
		return 2
	}
	runDir := filepath.Join(o.out, time.Now().Format("20060102-150405")+"-soak-"+strconv.FormatUint(o.seed, 10))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cfg := jepsen.DefaultSoak(o.soak.duration)
	cfg.Every, cfg.Rate, cfg.Load = o.soak.every, o.soak.rate, o.soak.load
	cfg.Bin, cfg.Seed, cfg.Dir = o.absBin, o.seed, runDir
	cfg.Net = &jepsen.Net{Prefix: o.prefix, N: cfg.Members + 1}
	if err := cfg.Net.Setup(ctx); err != nil {
		fmt.Fprintf(stderr, "jepsen: %v\n", err)
		return 2
	}
	defer cfg.Net.Cleanup(context.Background())
	res, err := jepsen.RunSoak(ctx, cfg, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "jepsen: soak: %v\n", err)
		return 2
	}
	f, ferr := os.Create(filepath.Join(runDir, "summary.txt"))
	if ferr == nil {
		_ = jepsen.WriteSoakSummary(io.MultiWriter(stdout, f), res)
		f.Close()
	} else {
		_ = jepsen.WriteSoakSummary(stdout, res)
	}
	if !res.Pass {
		return 1
	}
	return 0
}
