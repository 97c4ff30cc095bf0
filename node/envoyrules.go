package node

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-rl/weir/envoyconf"
	"github.com/weir-rl/weir/internal/filewatch"
	"github.com/weir-rl/weir/node/limits"
)

// envoyRules holds the envoyproxy/ratelimit configuration read from a
// directory (Config.EnvoyConfigDir) and reloads it when the directory
// changes, as limits.Reloader does for the limits file: a directory that
// does not validate is logged and counted, and the last valid
// configuration stays in force. current never blocks; reloads are
// serialized. It is safe for concurrent use.
type envoyRules struct {
	dir      string
	log      *slog.Logger
	onReload func() // called after every accepted reload, with mu held
	reloads  prometheus.Counter
	failures prometheus.Counter

	cur atomic.Pointer[envoyconf.Config]
	// next is the configuration a reload is switching to, nil between
	// reloads: merge adds its limits to cur's, so the limits of the new
	// rules are in force before the rules are (see reload).
	next atomic.Pointer[envoyconf.Config]

	mu   sync.Mutex // serializes reloads; guards seen
	seen [32]byte   // hash of the directory's YAML last read
}

// newEnvoyRules loads dir once; an invalid directory is an error, as an
// invalid limits file is at startup.
func newEnvoyRules(dir string, log *slog.Logger, reg prometheus.Registerer, onReload func()) (*envoyRules, error) {
	r := &envoyRules{
		dir: dir, log: log, onReload: onReload,
		reloads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_envoy_config_reloads_total",
			Help: "Accepted reloads of the envoyproxy/ratelimit configuration directory.",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_envoy_config_reload_failures_total",
			Help: "Rejected reloads of the envoyproxy/ratelimit configuration directory; the last valid one stayed in force.",
		}),
	}
	c, err := envoyconf.LoadDir(dir)
	if err != nil {
		return nil, err
	}
	r.seen, _ = r.hash()
	r.cur.Store(c)
	log.Info("envoy config in force", "dir", dir, "domains", len(c.Domains()), "rules", len(c.Rules()))
	reg.MustRegister(r.reloads, r.failures)
	return r, nil
}

// current returns the configuration in force.
func (r *envoyRules) current() *envoyconf.Config { return r.cur.Load() }

// merge returns base with the limits of the rules in force added, and
// during a reload those of the rules it switches to.
func (r *envoyRules) merge(base *limits.File) (*limits.File, error) {
	ls := envoyLimits(r.current())
	if n := r.next.Load(); n != nil {
		// Mid-reload: the new rules' limits too; a name in both is the
		// new definition.
		nl := envoyLimits(n)
		names := make(map[string]bool, len(nl))
		for _, l := range nl {
			names[l.Name] = true
		}
		ls = slices.DeleteFunc(ls, func(l limits.Limit) bool { return names[l.Name] })
		ls = append(ls, nl...)
	}
	return base.WithLimits(ls)
}

// hash digests the names and contents of the directory's YAML files.
func (r *envoyRules) hash() ([32]byte, error) {
	var names []string
	for _, pat := range []string{"*.yaml", "*.yml"} {
		m, err := filepath.Glob(filepath.Join(r.dir, pat))
		if err != nil {
			return [32]byte{}, err
		}
		names = append(names, m...)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return [32]byte{}, err
		}
		h.Write([]byte(n))
		h.Write([]byte{0})
		h.Write(b)
		h.Write([]byte{0})
	}
	var out [32]byte
	h.Sum(out[:0])
	return out, nil
}

// reload re-reads the directory. force reads it even when its content did
// not change (SIGHUP); a watch event does not.
func (r *envoyRules) reload(force bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	sum, err := r.hash()
	if err == nil && !force && sum == r.seen {
		return nil
	}
	r.seen = sum
	c, err := envoyconf.LoadDir(r.dir)
	if err != nil {
		r.failures.Inc()
		r.log.Error("envoy config rejected; the last valid one stays in force", "dir", r.dir, "err", err)
		return err
	}
	// Three steps, so that no request maps a descriptor to a limit the
	// engine does not have (answered "unknown limit"): the limits of the
	// old and the new rules, then the new rules, then the new rules'
	// limits alone.
	r.next.Store(c)
	r.onReload()
	r.cur.Store(c)
	r.next.Store(nil)
	r.reloads.Inc()
	r.log.Info("envoy config loaded", "dir", r.dir, "domains", len(c.Domains()), "rules", len(c.Rules()))
	r.onReload()
	return nil
}

// run watches the directory until ctx ends, reloading it once per burst of
// events (an editor's writes, a ConfigMap's symlink swap; see
// filewatch.Run for the timing). It returns nil when ctx ends.
func (r *envoyRules) run(ctx context.Context) error {
	cfg := filewatch.Config{Dirs: []string{r.dir}, Logger: r.log.With("dir", r.dir)}
	return filewatch.Run(ctx, cfg, func() { _ = r.reload(false) }) // logged and counted
}

// envoyLimits returns the Weir limits of c's rules that need a bucket.
func envoyLimits(c *envoyconf.Config) []limits.Limit {
	var out []limits.Limit
	for _, r := range c.Rules() {
		if r.Limit.Unlimited || r.Limit.RequestsPerUnit == 0 {
			continue
		}
		policy, err := limits.ParsePolicy(r.Limit.OnOwnerUnreachable)
		if err != nil {
			policy = limits.PolicyLocal // envoyconf accepts only the three names
		}
		out = append(out, limits.Limit{
			Name: r.LimitName(), Kind: limits.KindRate, Bucket: r.Bucket(),
			OnOwnerUnreachable: policy, Shadow: r.ShadowMode, Line: r.Line,
		})
	}
	return out
}
