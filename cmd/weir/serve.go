package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	sockaddr "github.com/hashicorp/go-sockaddr"

	"github.com/weir-rl/weir/internal/gcfloor"
	"github.com/weir-rl/weir/node"
	"github.com/weir-rl/weir/ring/gossip"
)

// clusterFlags are the serve flags that need parsing after flag.Parse.
type clusterFlags struct {
	gossipAddr  string
	join        string
	timing      string
	clockOffset time.Duration
}

// apply copies the parsed cluster flags into cfg.
func (cf clusterFlags) apply(cfg *node.Config) error {
	host, port, err := net.SplitHostPort(cf.gossipAddr)
	if err != nil {
		return fmt.Errorf("--gossip-addr %q: %w", cf.gossipAddr, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("--gossip-addr %q: bad port", cf.gossipAddr)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	cfg.Ring.BindAddr, cfg.Ring.BindPort = host, p
	cfg.Ring.Join = nil
	for _, j := range strings.Split(cf.join, ",") {
		if j = strings.TrimSpace(j); j != "" {
			cfg.Ring.Join = append(cfg.Ring.Join, j)
		}
	}
	if cfg.Ring.AdvertiseAddr == "" && len(cfg.Ring.Join) == 0 && (host == "0.0.0.0" || host == "::") {
		// A lone node on a machine without a private address (memberlist
		// refuses to advertise a public one by itself) still starts: it
		// advertises loopback until told otherwise with --advertise-addr.
		if ip, err := sockaddr.GetPrivateIP(); err != nil || ip == "" {
			cfg.Ring.AdvertiseAddr = "127.0.0.1"
		}
	}
	switch cf.timing {
	case "lan":
		cfg.Timing = node.LANTiming()
	case "local":
		cfg.Timing = node.LocalTiming()
	default:
		return fmt.Errorf("--timing %q: want lan or local", cf.timing)
	}
	return nil
}

// defaultNodeName is the member name when --node-name is not given: the
// host name, and for a gossip port other than the default the host name
// and the port, so that several nodes on one host have distinct names
// without being told.
func defaultNodeName(hostname func() (string, error), gossipPort int) string {
	h, err := hostname()
	if err != nil || h == "" {
		h = "weir"
	}
	if gossipPort != gossip.DefaultConfig().BindPort {
		h += "-" + strconv.Itoa(gossipPort)
	}
	return h
}

// processFlags are the flags of `weir serve` about the process rather
// than the node: its log format, profiler and garbage collector.
type processFlags struct {
	logFormat    string // text or json
	debugAddr    string // --debug-addr, "" for off
	heapFloorMiB int    // --heap-floor-mib
}

// serveFlags binds the flags of `weir serve` to a node.Config.
func serveFlags(fs *flag.FlagSet, cfg *node.Config, cf *clusterFlags, pf *processFlags) {
	fs.StringVar(&cf.gossipAddr, "gossip-addr", ":7946", "gossip (memberlist) listen address, UDP and TCP")
	fs.StringVar(&cfg.Ring.AdvertiseAddr, "advertise-addr", "", "IP other members reach this node at (default: picked by memberlist)")
	fs.StringVar(&cfg.PeerAddr, "peer-addr", cfg.PeerAddr, "peer gRPC listen address, forwards and handoff between members (default: the gossip host, gossip port + 1)")
	fs.DurationVar(&cfg.Forward.Deadline, "forward-timeout", cfg.Forward.Deadline, "how long a forward waits for a key's owner when its caller sets no deadline (a gRPC caller's own deadline replaces it); past it a live owner's key is answered limiter_overloaded (open limits allow)")
	fs.DurationVar(&cfg.Forward.SettleDeadline, "forward-settle-timeout", cfg.Forward.SettleDeadline, "--forward-timeout while the ring settles: within the handoff window after a membership change, when a key's state may be moving to its new owner (never shorter than --forward-timeout)")
	fs.StringVar(&cf.join, "join", "", "seeds to join: host:port,... or a DNS name (re-resolved on every retry)")
	fs.StringVar(&cfg.ClusterSecretFile, "cluster-secret-file", "", "file holding the cluster secret (gossip encryption and peer auth)")
	fs.BoolVar(&cfg.Replication.Enabled, "replication", cfg.Replication.Enabled, "stream each owned key's changes to its successor, so a crash loses one interval's debits instead of a full bucket")
	fs.DurationVar(&cfg.Replication.Interval, "replication-interval", cfg.Replication.Interval, "how often changed keys are sent to their successors")
	fs.StringVar(&cf.timing, "timing", "lan", "failure-detection profile: lan or local (fast, for tests on one machine)")
	fs.DurationVar(&cf.clockOffset, "test-clock-offset", 0, "testing only: shift this node's decision clock (clock-skew faults in jepsen/)")
	fs.BoolVar(&cfg.Clustered, "cluster", cfg.Clustered, "run gossip and the peer service (false: a cluster of one with no gossip port)")
	fs.StringVar(&cfg.NodeName, "node-name", "", "name of this member in the cluster (default: the host name, with -PORT appended when the gossip port is not 7946)")
	fs.StringVar(&cfg.HTTPAddr, "http-addr", cfg.HTTPAddr, "public HTTP listen address")
	fs.StringVar(&cfg.GRPCAddr, "grpc-addr", cfg.GRPCAddr, "public gRPC listen address")
	fs.StringVar(&cfg.RESPAddr, "resp-addr", cfg.RESPAddr, "Redis-protocol listen address, like :6380 (empty: off)")
	fs.StringVar(&cfg.LimitsPath, "limits", cfg.LimitsPath, "limits file (YAML); empty serves the embedded default")
	fs.IntVar(&cfg.Store.MaxBuckets, "max-buckets", cfg.Store.MaxBuckets, "cap on live buckets this node owns")
	fs.StringVar(&cfg.Envoy.Domain, "envoy-domain", cfg.Envoy.Domain, "the only domain Envoy's rate limit service accepts (empty: any)")
	fs.StringVar(&cfg.EnvoyConfigDir, "envoy-config-dir", cfg.EnvoyConfigDir, "a directory of envoyproxy/ratelimit configuration files that Envoy's rate limit service decides by (watched; empty: the generic_key mapping)")
	fs.BoolVar(&cfg.HTTP.LegacyHeaders, "legacy-headers", cfg.HTTP.LegacyHeaders, "also send the legacy X-RateLimit-Limit/Remaining/Reset headers")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", cfg.ShutdownTimeout, "how long in-flight requests get on SIGTERM")
	fs.DurationVar(&cfg.LeaveTimeout, "leave-timeout", cfg.LeaveTimeout, "after the in-flight requests on SIGTERM, how long each step of the graceful leave gets (the handoff of buckets and leases, the gossip leave, the handoff of what arrived meanwhile): up to 3× this in all")
	fs.StringVar(&cfg.StateDir, "state-dir", cfg.StateDir, "directory the buckets in debt and the leases are saved to on SIGTERM and restored from on start, so a restart of every node keeps its debits (empty: nothing kept)")
	fs.StringVar(&pf.logFormat, "log-format", pf.logFormat, "log format: text or json")
	fs.StringVar(&pf.debugAddr, "debug-addr", "", "loopback address serving Go's profiler (net/http/pprof) for diagnosis, like 127.0.0.1:6060 (empty: off)")
	fs.IntVar(&pf.heapFloorMiB, "heap-floor-mib", gcfloor.DefaultFloorMiB, "the garbage collector waits for this much heap (MiB) while the live heap is small, instead of collecting at twice the live heap; at most a quarter of GOMEMLIMIT and of the cgroup's memory limit; 0: Go's default; off when GOGC is set")
	tracingFlags(fs, &cfg.Tracing)
	securityFlags(fs, cfg)
}

// maxHeapFloorMiB bounds --heap-floor-mib: 1 TiB.
const maxHeapFloorMiB = 1 << 20

// startHeapFloor keeps a heap floor of mib MiB (package gcfloor; at most a
// quarter of GOMEMLIMIT and of the cgroup's memory limit) unless it is 0
// or the GOGC environment variable is set (the operator's choice wins),
// logs which, and returns the func that stops it.
func startHeapFloor(mib int, getenv func(string) string, log *slog.Logger) (stop func()) {
	if gcfloor.GOGCSet(getenv) {
		log.Info("heap floor off: GOGC is set", "GOGC", getenv("GOGC"))
		return func() {}
	}
	if mib == 0 {
		return func() {}
	}
	t := gcfloor.Start(uint64(mib)<<20, 100)
	log.Info("heap floor", "mib", t.Floor()>>20)
	return t.Stop
}

// serve runs a node until SIGTERM or SIGINT, reloading limits on SIGHUP.
func serve(args []string, stdout, stderr io.Writer) int {
	cfg := node.DefaultConfig()
	cfg.NodeName = ""
	cfg.RESP.Version = versionNumber() // what HELLO and INFO report
	pf := processFlags{logFormat: "text"}
	var cf clusterFlags
	fs := newFlagSet("serve")
	serveFlags(fs, &cfg, &cf, &pf)
	if code, ok := parseCommand(fs, args, os.Getenv, "weir serve [flags]", stdout, stderr); !ok {
		return code
	}
	if err := cf.apply(&cfg); err != nil {
		fmt.Fprintf(stderr, "weir serve: %v\n", err)
		return 2
	}
	if pf.debugAddr != "" {
		if err := checkDebugAddr(pf.debugAddr); err != nil {
			fmt.Fprintf(stderr, "weir serve: %v\n", err)
			return 2
		}
	}
	if pf.heapFloorMiB < 0 || pf.heapFloorMiB > maxHeapFloorMiB {
		fmt.Fprintf(stderr, "weir serve: --heap-floor-mib %d: want 0 (off) to %d\n", pf.heapFloorMiB, maxHeapFloorMiB)
		return 2
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	confined := protectedMode(&cfg, func(name string) bool { return given[name] })
	if err := tracingFromEnv(&cfg.Tracing, func(name string) bool { return given[name] }, os.Getenv); err != nil {
		fmt.Fprintf(stderr, "weir serve: %v\n", err)
		return 2
	}
	if cfg.NodeName == "" {
		cfg.NodeName = defaultNodeName(os.Hostname, cfg.Ring.BindPort)
	}
	var h slog.Handler = slog.NewTextHandler(stderr, nil)
	if pf.logFormat == "json" {
		h = slog.NewJSONHandler(stderr, nil)
	}
	log := slog.New(newDedupHandler(h)).With("node", cfg.NodeName)

	for _, what := range confined {
		log.Warn("protected mode: " + what)
	}
	deps := node.Deps{Logger: log}
	if off := cf.clockOffset; off != 0 {
		log.Warn("decision clock shifted for testing", "offset", off)
		deps.Clock = func() time.Time { return time.Now().Add(off) }
	}
	n, err := node.New(cfg, deps)
	if err != nil {
		fmt.Fprintf(stderr, "weir serve: %v\n", err)
		return 1
	}
	if pf.debugAddr != "" {
		_, closeDebug, err := startDebug(pf.debugAddr, log)
		if err != nil {
			fmt.Fprintf(stderr, "weir serve: %v\n", err)
			return 1
		}
		defer closeDebug()
	}
	f := n.Limits()
	log.Info("limits file in force", "source", f.Source, "version", f.Version, "limits", len(f.Limits))
	defer startHeapFloor(pf.heapFloorMiB, os.Getenv, log)()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := n.Start(ctx); err != nil {
		if hint := startHint(err, cfg); hint != "" {
			log.Error("start failed: "+hint, "err", err)
			return 1
		}
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
			_ = n.ReloadTLS()    // logged inside
			_ = n.ReloadTokens() // logged inside
		case <-ctx.Done():
			log.Info("shutting down: no new requests, finishing in-flight ones")
			sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownBound()+time.Second)
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
