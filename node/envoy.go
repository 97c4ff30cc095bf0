package node

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-rl/weir/envoyconf"
	"github.com/weir-rl/weir/node/limits"
)

// envoySource is the envoyproxy/ratelimit configuration Envoy's rate limit
// service decides by: envoyRules, read from Config.EnvoyConfigDir, or
// noEnvoyRules without one (the generic_key mapping).
type envoySource interface {
	// current returns the configuration in force; nil selects the
	// generic_key mapping (envoyrls.Config.Rules).
	current() *envoyconf.Config
	// merge returns base with the rules' limits added.
	merge(base *limits.File) (*limits.File, error)
	// reload re-reads the configuration (force: even when unchanged).
	reload(force bool) error
	// run watches the configuration until ctx ends.
	run(ctx context.Context) error
}

// newEnvoySource loads the configuration directory dir, or returns
// noEnvoyRules when dir is empty.
func newEnvoySource(dir string, log *slog.Logger, reg prometheus.Registerer, onReload func()) (envoySource, error) {
	if dir == "" {
		return noEnvoyRules{}, nil
	}
	return newEnvoyRules(dir, log, reg, onReload)
}

// noEnvoyRules is the envoySource of a node without an envoy configuration
// directory: no rules, nothing to watch.
type noEnvoyRules struct{}

func (noEnvoyRules) current() *envoyconf.Config                    { return nil }
func (noEnvoyRules) merge(base *limits.File) (*limits.File, error) { return base, nil }
func (noEnvoyRules) reload(bool) error                             { return nil }
func (noEnvoyRules) run(context.Context) error                     { return nil }
