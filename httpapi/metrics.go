package httpapi

import (
	"encoding/json"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/lattice"
)

// metrics counts what happens on the lattice, so every door (HTTP, A2A,
// MCP, library) is measured the same way. It has its own registry: nothing
// global.
type metrics struct {
	reg        *prometheus.Registry
	executions *prometheus.CounterVec   // agent, source, status
	durations  *prometheus.HistogramVec // agent, status
	events     *prometheus.CounterVec   // type (built-in names, else "custom")
	tokens     *prometheus.CounterVec   // agent, model, kind
	missed     prometheus.Counter

	named   func(eventType string) bool // the types counted by name
	handler http.Handler

	sub  lattice.Subscription
	done chan struct{}
	once sync.Once
}

// metricsBuffer is the subscription buffer of the metrics counter.
const metricsBuffer = 4096

func newMetrics(bus lattice.Bus, named func(eventType string) bool, modules ...prometheus.Collector) (*metrics, error) {
	m := &metrics{
		reg: prometheus.NewRegistry(), named: named,
		executions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "axocoatl_executions_total", Help: "Finished agent executions by agent, door and status.",
		}, []string{"agent", "source", "status"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "axocoatl_execution_duration_seconds", Help: "Duration of agent executions.",
			Buckets: []float64{.001, .005, .025, .1, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"agent", "status"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "axocoatl_events_total", Help: "Events seen on the lattice by type (custom types are counted as \"custom\").",
		}, []string{"type"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "axocoatl_model_tokens_total",
			Help: "Tokens used by agents' model calls, by agent, model and kind (input, output, cached_input: the part of input served from the provider's cache), counted from the usage of TaskCompleted and AgentFailed.",
		}, []string{"agent", "model", "kind"}),
		missed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "axocoatl_metrics_events_missed_total", Help: "Events the metrics subscriber dropped because it fell behind.",
		}),
		done: make(chan struct{}),
	}
	m.reg.MustRegister(m.executions, m.durations, m.events, m.tokens, m.missed,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, c := range modules {
		// A module's collector registered twice (two Runtimes sharing
		// one) is an error, not a panic.
		if err := m.reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.handler = exposition(m.reg)
	// Local: on a shared NATS lattice each daemon counts the runs and
	// events it produced, so summing the daemons' metrics counts each once.
	sub, err := bus.Subscribe(lattice.Filter{Local: true}, metricsBuffer)
	if err != nil {
		return nil, err
	}
	m.sub = sub
	go m.run()
	return m, nil
}

type runPayload struct {
	AgentID    string `json:"agent_id"`
	DurationMS int64  `json:"duration_ms"`
	Source     string `json:"source"`
	Canceled   bool   `json:"canceled"`
	Model      string `json:"model"`
	Usage      struct {
		Input  int64 `json:"input_tokens"`
		Output int64 `json:"output_tokens"`
		Cached int64 `json:"cached_input_tokens"`
	} `json:"usage"`
}

func (m *metrics) run() {
	defer close(m.done)
	var seenMissed uint64
	for ev := range m.sub.Events() {
		if n := m.sub.Missed(); n > seenMissed {
			m.missed.Add(float64(n - seenMissed))
			seenMissed = n
		}
		label := ev.Type
		if !m.named(label) {
			label = "custom" // bounded label set: clients choose custom types
		}
		m.events.WithLabelValues(label).Inc()
		var status string
		switch ev.Type {
		case axocoatl.EventTaskCompleted:
			status = "completed"
		case axocoatl.EventAgentFailed:
			status = "failed"
		default:
			continue
		}
		var p runPayload
		if json.Unmarshal(ev.Payload, &p) != nil {
			continue
		}
		if p.Canceled {
			status = "canceled" // a client's cancel is not a failure
		}
		m.executions.WithLabelValues(p.AgentID, p.Source, status).Inc()
		m.durations.WithLabelValues(p.AgentID, status).Observe(float64(p.DurationMS) / 1000)
		// Counted per run from its end event rather than per model call:
		// the lattice carries no per-call event, and a run's tokens are
		// counted once whichever door watched it. The label values are
		// the configured agents' ids and model names, a bounded set.
		for _, k := range [...]struct {
			kind string
			n    int64
		}{{"input", p.Usage.Input}, {"output", p.Usage.Output}, {"cached_input", p.Usage.Cached}} {
			if k.n > 0 {
				m.tokens.WithLabelValues(p.AgentID, p.Model, k.kind).Add(float64(k.n))
			}
		}
	}
}

// close ends the subscriber goroutine.
func (m *metrics) close() {
	m.once.Do(func() { _ = m.sub.Close() })
	<-m.done
}
