package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/weir-rl/weir/node"
)

// serveFlags binds the flags of `weir serve` to a node.Config.
func serveFlags(fs *flag.FlagSet, cfg *node.Config, logFormat *string) {
	fs.StringVar(&cfg.NodeName, "node-name", cfg.NodeName, "name of this member in the cluster")
	fs.StringVar(&cfg.HTTPAddr, "http-addr", cfg.HTTPAddr, "public HTTP listen address")
	fs.StringVar(&cfg.GRPCAddr, "grpc-addr", cfg.GRPCAddr, "public gRPC listen address")
	fs.StringVar(&cfg.LimitsPath, "limits", cfg.LimitsPath, "limits file (YAML); empty serves the embedded default")
	fs.IntVar(&cfg.Store.MaxBuckets, "max-buckets", cfg.Store.MaxBuckets, "cap on live buckets this node owns")
	fs.BoolVar(&cfg.HTTP.LegacyHeaders, "legacy-headers", cfg.HTTP.LegacyHeaders, "send X-RateLimit-Limit/Remaining/Reset")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", cfg.ShutdownTimeout, "how long in-flight requests get on SIGTERM")
	fs.StringVar(logFormat, "log-format", *logFormat, "log format: text or json")
}

// serve runs a node until SIGTERM or SIGINT, reloading limits on SIGHUP.
func serve(args []string, stderr io.Writer) int {
	cfg := node.DefaultConfig()
	if h, err := os.Hostname(); err == nil && h != "" {
		cfg.NodeName = h
	}
	logFormat := "text"
	fs := newFlagSet("serve", stderr)
	serveFlags(fs, &cfg, &logFormat)
	if err := parseWithEnv(fs, args, os.Getenv); err != nil {
		return 2
	}
	var h slog.Handler = slog.NewTextHandler(stderr, nil)
	if logFormat == "json" {
		h = slog.NewJSONHandler(stderr, nil)
	}
	log := slog.New(h).With("node", cfg.NodeName)

	n, err := node.New(cfg, node.Deps{Logger: log})
	if err != nil {
		fmt.Fprintf(stderr, "weir serve: %v\n", err)
		return 1
	}
	f := n.Limits()
	log.Info("limits file in force", "source", f.Source, "version", f.Version, "limits", len(f.Limits))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := n.Start(ctx); err != nil {
		log.Error("start failed", "err", err)
		return 1
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-hup:
			if err := n.ReloadLimits(); err != nil {
				log.Warn("limits reload rejected; last valid file stays in force", "err", err)
			}
		case <-ctx.Done():
			log.Info("shutting down: no new requests, finishing in-flight ones")
			sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout+time.Second)
			defer cancel()
			if err := n.Shutdown(sctx); err != nil {
				log.Error("shutdown", "err", err)
				return 1
			}
			log.Info("stopped")
			return 0
		}
	}
}
