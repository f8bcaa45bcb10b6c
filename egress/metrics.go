package egress

import "github.com/prometheus/client_golang/prometheus"

// metrics are the module's Prometheus series. Queue depth and in-flight
// gauges are read from the queues when scraped.
type metrics struct {
	m          *Module
	deliveries *prometheus.CounterVec
	attempts   *prometheus.CounterVec
	dropped    *prometheus.CounterVec
	missed     prometheus.CounterFunc
	latency    *prometheus.HistogramVec
	queued     *prometheus.Desc
	inFlight   *prometheus.Desc
	deadLetter *prometheus.Desc
}

func newMetrics(m *Module) *metrics {
	return &metrics{
		m: m,
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "axocoatl_webhook_deliveries_total",
			Help: "Deliveries that ended, by webhook and outcome (delivered, failed, dead_lettered).",
		}, []string{"webhook", "outcome"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "axocoatl_webhook_attempts_total",
			Help: "HTTP attempts, by webhook and result (2xx, 3xx, 4xx, 5xx, error).",
		}, []string{"webhook", "result"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "axocoatl_webhook_dropped_total",
			Help: "Deliveries dropped because the webhook's queue was full.",
		}, []string{"webhook"}),
		missed: prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "axocoatl_webhook_lattice_missed_total",
			Help: "Events the lattice dropped before egress could queue them.",
		}, func() float64 { return float64(m.missed.Load()) }),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "axocoatl_webhook_attempt_duration_seconds",
			Help:    "Duration of one HTTP attempt, by webhook.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"webhook"}),
		queued:     prometheus.NewDesc("axocoatl_webhook_queue_depth", "Deliveries waiting for a sender.", []string{"webhook"}, nil),
		inFlight:   prometheus.NewDesc("axocoatl_webhook_in_flight", "Deliveries being sent or waiting between attempts.", []string{"webhook"}, nil),
		deadLetter: prometheus.NewDesc("axocoatl_webhook_dead_letters", "Failed and dead-lettered deliveries kept for retry.", []string{"webhook"}, nil),
	}
}

// Collector returns the module's Prometheus metrics for the host to
// register: deliveries by webhook and outcome, attempts by result, drops,
// events missed on the lattice, attempt latency, queue depth, in flight and
// dead letters.
func (m *Module) Collector() prometheus.Collector { return m.metrics }

// Describe implements [prometheus.Collector].
func (c *metrics) Describe(ch chan<- *prometheus.Desc) {
	c.deliveries.Describe(ch)
	c.attempts.Describe(ch)
	c.dropped.Describe(ch)
	c.missed.Describe(ch)
	c.latency.Describe(ch)
	ch <- c.queued
	ch <- c.inFlight
	ch <- c.deadLetter
}

// Collect implements [prometheus.Collector].
func (c *metrics) Collect(ch chan<- prometheus.Metric) {
	c.deliveries.Collect(ch)
	c.attempts.Collect(ch)
	c.dropped.Collect(ch)
	c.missed.Collect(ch)
	c.latency.Collect(ch)
	for _, h := range c.m.allHooks() {
		b := c.m.backendStateOf(h)
		var cs clusterState
		shared := false
		if b != nil {
			cs, shared = b.shared(h)
		}
		h.mu.Lock()
		q, f, d := len(h.ch), h.inFlight, len(h.dead)
		h.mu.Unlock()
		if shared && cs.err == nil {
			q, f, d = cs.queued, cs.inFlight, cs.dead // the cluster's
		}
		ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(q), h.cfg.Name)
		ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(f), h.cfg.Name)
		ch <- prometheus.MustNewConstMetric(c.deadLetter, prometheus.GaugeValue, float64(d), h.cfg.Name)
	}
}
