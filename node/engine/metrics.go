package engine

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics holds the engine's Prometheus collectors. Labels are bounded:
// limit names come from the limits file, never from callers' keys.
type metrics struct {
	decisions   *prometheus.CounterVec     // limit, outcome, source
	denials     *prometheus.CounterVec     // limit, kind: policy|concurrency|fallback|error
	overloaded  *prometheus.CounterVec     // limit, answer: refused|open
	latency     *prometheus.HistogramVec   // op
	takeLatency func() prometheus.Observer // latency{op="take"}, looked up once
	bucketsMax  prometheus.Gauge           // Store.MaxBuckets, for alerts on the cap
	leaseEvents *prometheus.CounterVec     // limit, event: granted|refused|queued|expired|released|renewed
	leaseWait   *prometheus.HistogramVec   // limit
}

// Denial kinds, kept apart so a dashboard can tell a policy doing its job
// from a limiter in trouble.
const (
	denialPolicy      = "policy"
	denialConcurrency = "concurrency"
	denialFallback    = "fallback"
	denialError       = "error"
	denialQuota       = "tenant_quota" // a tenant's new key past its max_buckets
)

// gauges are the functions behind the engine's gauges, read at scrape
// time.
type gauges struct {
	owner, fallback, evictions, leasesHeld func() float64
}

func newMetrics(reg prometheus.Registerer, g gauges) *metrics {
	m := &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_decisions_total",
			Help: "Rate-limit decisions by limit, outcome (allowed, denied, shadow_denied) and source (owner, fallback).",
		}, []string{"limit", "outcome", "source"}),
		denials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_denials_total",
			Help: "Refusals by limit and kind: policy (the owner's bucket), concurrency (no lease permit), fallback (a local ceiling), error (fail-closed or overloaded).",
		}, []string{"limit", "kind"}),
		overloaded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_overloaded_total",
			Help: "Checks forwarded to an owner that gossip holds alive and that did not answer within the caller's deadline, by limit and answer: refused (limiter_overloaded) or open (allowed by an open limit, spending nothing). Never decided from a local ceiling.",
		}, []string{"limit", "answer"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "weir_decision_duration_seconds",
			Help:    "Time to decide one request, from validation to answer.",
			Buckets: []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1},
		}, []string{"op"}),
		bucketsMax: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "weir_buckets_max",
			Help: "The cap on live buckets this node owns (--max-buckets); weir_buckets near it means evictions, then limiter_overloaded.",
		}),
		leaseEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_lease_events_total",
			Help: "Lease lifecycle by limit and event: granted, refused, queued, expired, released, renewed.",
		}, []string{"limit", "event"}),
		leaseWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "weir_lease_queue_wait_seconds",
			Help:    "Time a granted acquire spent queued (0 for an immediate grant).",
			Buckets: []float64{0, .001, .005, .01, .05, .1, .5, 1, 2.5, 5, 10},
		}, []string{"limit"}),
	}
	m.takeLatency = sync.OnceValue(func() prometheus.Observer { return m.latency.WithLabelValues("take") })
	held := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "weir_leases_held", Help: "Leases held in this node's table.",
	}, g.leasesHeld)
	buckets := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "weir_buckets", Help: "Live buckets this node owns.",
	}, g.owner)
	fbBuckets := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "weir_fallback_buckets", Help: "Live local-ceiling buckets used while owners are unreachable.",
	}, g.fallback)
	evict := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "weir_bucket_evictions_total", Help: "Idle, fully refilled buckets forgotten to bound memory.",
	}, g.evictions)
	reg.MustRegister(m.decisions, m.denials, m.overloaded, m.latency, m.bucketsMax,
		buckets, fbBuckets, evict, m.leaseEvents, m.leaseWait, held)
	return m
}
