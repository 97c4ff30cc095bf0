package node

import "github.com/prometheus/client_golang/prometheus"

// metrics are the node's own collectors: the limits file in force and its
// reloads. The engine, the cluster and the security layer register theirs.
type metrics struct {
	limitsVersion  prometheus.Gauge
	reloads        prometheus.Counter
	reloadFailures prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		limitsVersion: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "weir_limits_version",
			Help: "The version field of the limits file in force.",
		}),
		reloads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_limits_reloads_total",
			Help: "Accepted reloads of the limits file.",
		}),
		reloadFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_limits_reload_failures_total",
			Help: "Rejected reloads of the limits file; the last valid file stayed in force.",
		}),
	}
	reg.MustRegister(m.limitsVersion, m.reloads, m.reloadFailures)
	return m
}
