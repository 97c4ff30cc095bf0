package cluster

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the collectors of the cluster part of a node.
type metrics struct {
	forwardLatency *prometheus.HistogramVec // peer
	forwardErrors  *prometheus.CounterVec   // peer
	batchSize      prometheus.Histogram
	handoff        *prometheus.CounterVec // direction: in|out
	pulls          *prometheus.CounterVec // result: ok|error
	proxied        prometheus.Counter
	notOwner       prometheus.Counter
	settleRetries  prometheus.Counter
	expired        prometheus.Counter
	epoch          prometheus.Gauge
	protocol       prometheus.Gauge
	members        *prometheus.GaugeVec // state
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		forwardLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "weir_forward_duration_seconds", Help: "Forward round trips to an owner, by peer address.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1},
		}, []string{"peer"}),
		forwardErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_forward_errors_total", Help: "Forwards that got no answer from the owner (unreachable, or not within the deadline), by peer address.",
		}, []string{"peer"}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "weir_forward_batch_size", Help: "Requests per forwarded batch.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
		}),
		handoff: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_handoff_buckets_total", Help: "Buckets handed over on ownership changes, by direction (in, out).",
		}, []string{"direction"}),
		pulls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_handoff_pulls_total", Help: "First-miss pulls of a moved bucket, by result.",
		}, []string{"result"}),
		proxied: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_forward_proxied_total", Help: "Forwards passed on once because views disagreed.",
		}),
		notOwner: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_forward_not_owner_total", Help: "Forwards the receiver refused because its ring disagreed.",
		}),
		settleRetries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_forward_settle_retries_total", Help: "Takes of callers without a deadline sent again, once, within --forward-settle-timeout: the first got no answer in time while this node's view changed.",
		}),
		expired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_forward_expired_total", Help: "Forwards this node, as their owner, refused unspent because their sender's deadline had passed before it got to them.",
		}),
		epoch: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "weir_ring_epoch", Help: "This node's ring epoch: the number of ring changes it has seen.",
		}),
		protocol: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "weir_peer_protocol_version",
			Help: "The peer protocol version this node sends in: the highest every live member advertises; 0 while members have none in common.",
		}),
		members: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "weir_members", Help: "Known members by state.",
		}, []string{"state"}),
	}
	reg.MustRegister(m.forwardLatency, m.forwardErrors, m.batchSize, m.handoff, m.pulls, m.proxied, m.notOwner, m.settleRetries, m.expired, m.epoch, m.protocol, m.members)
	return m
}

// observer feeds transport events into the metrics.
type observer struct{ m *metrics }

func (o observer) BatchSent(_ string, size int) { o.m.batchSize.Observe(float64(size)) }
func (o observer) Forwarded(peer string, d time.Duration, err error) {
	if err != nil {
		o.m.forwardErrors.WithLabelValues(peer).Inc()
		return
	}
	o.m.forwardLatency.WithLabelValues(peer).Observe(d.Seconds())
}
