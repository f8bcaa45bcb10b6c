// Package egress delivers the Engine's events to HTTP endpoints: signed
// webhooks that lose nothing.
//
// A [Module] subscribes to the lattice and takes every event a webhook's
// filter matches into that webhook's own bounded queue at once; a fixed
// set of senders per webhook POSTs each delivery with retries (network
// errors, timeouts, 5xx and 429, with exponential backoff and full jitter,
// Retry-After honoured up to the backoff cap). The body is serialized once,
// and its bytes are signed (X-Axocoatl-Signature, and the Standard Webhooks
// headers that also cover a timestamp) and sent. With [Config].DataDir the
// deliveries are kept in a bbolt database until delivered, so neither a
// restart nor a crash loses them; a delivery that exhausts its attempts is
// dead-lettered and can be retried through the module's HTTP API with the
// same delivery_id. Receivers written in Go check requests with [Verify].
//
// With [Config].JetStream (a NATS lattice) deliveries wait in a JetStream
// work queue shared by every process instead: each event is delivered by
// one process of the cluster, and one in progress on a process that dies
// is sent by another ([JetStream]).
//
// With [Config].Push enabled the module is also the Engine's
// [axocoatl.Pusher]: requests to URLs chosen at run time (A2A push
// notifications) wait in the same kind of queue under the name
// [PushWebhook], are signed, retried and logged as a webhook's, and are
// refused on loopback, private and link-local addresses, checked on the
// address dialed, unless the request allows them.
//
// With no webhooks configured and push disabled the module starts
// nothing: no goroutine, no HTTP client, no store, and no request is ever
// sent.
//
// # In Go terms
//
// Egress is an observer. [New] validates a [Config] (its [Webhook] list is
// the daemon's `webhooks:` section, its DataDir and [JetStream] are set by
// the host) and returns a [*Module]. [axocoatl.Engine.Use] calls
// [Module.Start], which takes one subscription on the Engine's lattice
// ([axocoatl.Engine.Bus], [lattice.Bus.Subscribe] with [SubscribeBuffer]
// events of room; with a JetStream backend a [lattice.Filter].Local one,
// so each event is queued once, by the process that published it); [axocoatl.Engine.Close] calls
// [Module.Stop]. The Module is also an [axocoatl.HTTPModule]: a host
// mounts it at each pattern of [Module.Routes] (the webhook API behind
// [axocoatl.Engine.GuardHTTP]) and registers [Module.Collector] with
// Prometheus. A Go program reads the same state with [Module.Status],
// [Module.Deliveries] and [Module.Retry]. [SendTest] sends one signed test
// delivery without a module, and [Config.Describe] says where a config
// sends without starting anything.
package egress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"runtime/debug"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/internal/lifecycle"
	"github.com/axocoatl/axocoatl-go/lattice"
)

// ProducerName is the produced_by of events egress would publish. Events
// from it are never delivered, so egress cannot feed on itself (it
// publishes none today).
const ProducerName = "egress"

// SubscribeBuffer is the lattice buffer of the module's one subscription
// (the buffer passed to [lattice.Bus.Subscribe]).
// Egress drains it into the webhooks' queues at once; it only has to
// absorb a burst while a batch is being written to the store.
const SubscribeBuffer = 1 << 16

// recentDelivered is how many delivered deliveries per webhook the API
// can show.
const recentDelivered = 100

// ErrStopped is returned by [Module.Start] after [Module.Stop].
var ErrStopped = errors.New("egress: module stopped")

// Module is the webhook egress module. Create it with [New], attach it with
// [axocoatl.Engine.Use], mount it (it is an [http.Handler]) and register
// [Module.Collector] with Prometheus.
type Module struct {
	cfg    Config
	hooks  []*hook // the configured webhooks, fed from the lattice
	byName map[string]*hook
	// push is the hook of [Config].Push (nil when disabled): fed by
	// [Module.Push], never from the lattice, kept in pushBackend (the
	// local backend: with a JetStream backend a queue of its own, in the
	// data dir's store; else the webhooks' own).
	push        *hook
	pushBackend *localBackend
	metrics     *metrics

	// life guards the start/stop state; request handlers hold it read.
	life  sync.RWMutex
	state lifecycle.State
	log   *slog.Logger
	// backend is where deliveries wait (backend.go), once started.
	backend backend
	sub     lattice.Subscription
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	// ingestDone is closed when ingest returns.
	ingestDone chan struct{}
	handler    atomic.Pointer[http.Handler]

	// tracing traces the deliveries with the Engine's tracer (trace.go).
	tracing tracing

	seq    atomic.Uint64 // the last store key handed out
	missed atomic.Uint64 // events the lattice dropped before egress took them
}

// New validates cfg ([Config.Validate]) and returns the module. It starts
// nothing.
func New(cfg Config) (*Module, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &Module{cfg: cfg, byName: map[string]*hook{}, log: slog.New(slog.DiscardHandler)}
	m.metrics = newMetrics(m)
	for _, w := range cfg.Webhooks {
		h := newHook(m, w.withDefaults())
		m.hooks = append(m.hooks, h)
		m.byName[w.Name] = h
	}
	if cfg.Push.Enabled {
		m.push = newPushHook(m, cfg.Push)
		m.byName[PushWebhook] = m.push
	}
	return m, nil
}

// Name implements [axocoatl.Module].
func (m *Module) Name() string { return "egress" }

// Describe lists each webhook's name, exact host and filter (never a
// secret or header value), as [Config.Describe].
func (m *Module) Describe() []WebhookInfo { return m.cfg.Describe() }

// Start implements [axocoatl.Module]. With no webhooks it only records the
// Engine (the API then answers with an empty list). Otherwise it opens the
// store (with DataDir), requeues what the last run left, subscribes to the
// lattice and starts one ingest goroutine and Concurrency senders per
// webhook. It does not wait for any delivery.
func (m *Module) Start(_ context.Context, e *axocoatl.Engine) error {
	m.life.Lock()
	defer m.life.Unlock()
	if err := m.state.CheckStart("egress", ErrStopped); err != nil {
		return err
	}
	m.log = e.Logger().With("module", "egress")
	m.tracing = tracing{tracer: e.Tracer(), prop: e.Propagator()}
	var h http.Handler = m.routes(e)
	if len(m.hooks) == 0 && m.push == nil {
		m.state.MarkStarted()
		m.handler.Store(&h)
		return nil
	}
	b, err := m.openBackend()
	if err != nil {
		return err
	}
	var sub lattice.Subscription
	if len(m.hooks) > 0 {
		if sub, err = e.Bus().Subscribe(b.filter(), SubscribeBuffer); err != nil {
			_ = m.closeBackends(b)
			return fmt.Errorf("egress: subscribe: %w", err)
		}
	}
	m.backend, m.sub = b, sub
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	if p := m.push; p != nil {
		p.client, p.open = p.pushClients()
		m.log.Info("push delivery configured", "webhook", PushWebhook, "signed", p.sign != nil, "durable", m.pushBackend.durable,
			"requeued", len(p.ch), "dead_letters", len(p.dead))
		m.pushBackend.start(ctx, p)
	}
	if sub == nil {
		m.state.MarkStarted()
		m.handler.Store(&h)
		return nil
	}
	for _, h := range m.hooks {
		h.client = h.newClient(m.cfg.Transport)
		info := h.cfg.info()
		m.log.Info("webhook configured", append([]any{"webhook", info.Name, "host", info.Host, "filter", info.Filter,
			"signed", info.Signed}, b.configured(h)...)...)
		b.start(ctx, h)
	}
	m.ingestDone = make(chan struct{})
	m.wg.Go(func() {
		defer close(m.ingestDone)
		m.ingest(ctx)
	})
	m.state.MarkStarted()
	m.handler.Store(&h)
	return nil
}

// Stop implements [axocoatl.Module]: it unsubscribes, cancels the requests
// in flight (with DataDir they are sent again after the next start), ends
// every goroutine, writes the store's last changes and closes it. If ctx
// ends first, Stop still waits for the goroutines (each is past its last
// bounded step) and returns ctx's error.
func (m *Module) Stop(ctx context.Context) error {
	m.life.Lock()
	if !m.state.Stop() || m.cancel == nil {
		m.life.Unlock()
		return nil
	}
	m.life.Unlock()

	if m.sub != nil {
		m.backend.drain(ctx, m)
	}
	m.cancel()
	if m.sub != nil {
		_ = m.sub.Close()
	}
	var errs []error
	if err := lifecycle.Wait(ctx, "egress", &m.wg); err != nil {
		errs = append(errs, err)
	}
	for _, h := range m.allHooks() {
		h.logDrops(true)
		h.client.HTTPClient.CloseIdleConnections()
		if h.open != nil {
			h.open.HTTPClient.CloseIdleConnections()
		}
	}
	if err := m.closeBackends(m.backend); err != nil {
		errs = append(errs, fmt.Errorf("egress: closing the store: %w", err))
	}
	return errors.Join(errs...)
}

// ingest takes events off the subscription as fast as they come, in
// batches, into each matching webhook's queue.
func (m *Module) ingest(ctx context.Context) {
	events := m.sub.Events()
	batch := make([]lattice.Event, 0, 1024)
	var lastMissed uint64
	// Drops are logged at most once a second; the tick logs those of a
	// burst that ended.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			for _, h := range m.hooks {
				h.logDrops(false)
			}
			continue
		case ev, ok := <-events:
			if !ok {
				return
			}
			batch = append(batch[:0], ev)
		}
	fill:
		for len(batch) < cap(batch) {
			select {
			case ev, ok := <-events:
				if !ok {
					break fill
				}
				batch = append(batch, ev)
			default:
				break fill
			}
		}
		now := time.Now()
		for _, h := range m.hooks {
			if evs := h.accept(batch); len(evs) > 0 {
				m.backend.take(ctx, h, evs, now)
			}
		}
		if n := m.sub.Missed(); n != lastMissed {
			m.missed.Add(n - lastMissed)
			m.log.Warn("webhook egress fell behind the lattice: events lost before they were queued",
				"lost", n-lastMissed, "total_lost", n)
			lastMissed = n
		}
	}
}

// nextKey hands out store keys in increasing order.
func (m *Module) nextKey() uint64 { return m.seq.Add(1) }

// hook is one configured webhook at run time.
type hook struct {
	m      *Module
	cfg    Webhook
	sign   *signer
	client *retryablehttp.Client
	// isPush marks the push hook; open is its client for deliveries that
	// may reach private addresses (client is the guarded one).
	isPush bool
	open   *retryablehttp.Client
	// ch holds the deliveries waiting for a sender, at most QueueSize
	// (more only right after a restart that found more stored).
	ch chan *delivery
	// cons is the webhook's shared JetStream consumer (JetStream backend).
	cons jetstream.Consumer

	// pushMu serializes what adds to ch (ingest, retry through the API),
	// so that the room counted is the room there is.
	pushMu sync.Mutex

	mu         sync.Mutex
	live       map[string]*delivery // queued and in flight, by id
	dead       []*delivery          // failed and dead-lettered, oldest first
	recent     []*delivery          // delivered, a ring of recentDelivered
	recentNext int
	inFlight   int
	counts     struct{ delivered, failed, deadLettered, dropped, evicted, enqueued uint64 }
	lastError  string
	lastErrAt  time.Time
	// Drops are logged at most once a second, with their count.
	dropsUnlogged uint64
	dropLoggedAt  time.Time

	// The webhook's metric series, resolved once.
	series struct {
		delivered, failed, deadLettered, dropped prometheus.Counter
		attempts                                 map[string]prometheus.Counter // by result label
		latency                                  prometheus.Observer
	}
}

func newHook(m *Module, w Webhook) *hook {
	h := &hook{m: m, cfg: w, live: map[string]*delivery{}, ch: make(chan *delivery, w.QueueSize)}
	if !w.Secret.IsZero() {
		key, _ := signingKey(w.Secret.Reveal()) // Validate checked it
		h.sign = newSigner(key)
	}
	mt := m.metrics
	h.series.delivered = mt.deliveries.WithLabelValues(w.Name, string(StatusDelivered))
	h.series.failed = mt.deliveries.WithLabelValues(w.Name, string(StatusFailed))
	h.series.deadLettered = mt.deliveries.WithLabelValues(w.Name, string(StatusDeadLettered))
	h.series.dropped = mt.dropped.WithLabelValues(w.Name)
	h.series.attempts = map[string]prometheus.Counter{}
	for _, r := range []string{"2xx", "3xx", "4xx", "5xx", "error"} {
		h.series.attempts[r] = mt.attempts.WithLabelValues(w.Name, r)
	}
	h.series.latency = mt.latency.WithLabelValues(w.Name)
	return h
}

// matches applies the webhook's filter to an event: its type, and its
// class (the publisher's) for the default of coordination events only.
func (w Webhook) matches(ev lattice.Event) bool {
	eventType := ev.Type
	telemetry := ev.EffectiveClass() == lattice.ClassTelemetry
	if len(w.Events) == 0 {
		return !telemetry
	}
	for _, p := range w.Events {
		if p == eventType {
			return true
		}
		if telemetry && p == "*" {
			continue
		}
		if ok, _ := path.Match(p, eventType); ok {
			return true
		}
	}
	return false
}

// pending counts the deliveries queued or in flight.
func (h *hook) pending() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.live)
}

// logDrops logs the drops not logged yet, at most once a second unless
// final.
func (h *hook) logDrops(final bool) {
	h.mu.Lock()
	n, total := h.dropsUnlogged, h.counts.dropped
	if n == 0 || (!final && time.Since(h.dropLoggedAt) < time.Second) {
		h.mu.Unlock()
		return
	}
	h.dropsUnlogged, h.dropLoggedAt = 0, time.Now()
	h.mu.Unlock()
	h.m.log.Warn("webhook queue full: deliveries dropped", "webhook", h.cfg.Name, "dropped", n,
		"total_dropped", total, "queue_size", h.cfg.QueueSize)
}

// Retry errors ([Module.Retry]), mapped to HTTP statuses by the handler.
var (
	ErrWebhookNotFound  = errors.New("egress: no such webhook")
	ErrDeliveryNotFound = errors.New("egress: no such delivery")
	ErrNotRetryable     = errors.New("egress: only failed or dead-lettered deliveries can be retried")
	ErrQueueFull        = errors.New("egress: queue full")
)

// Retry queues a failed or dead-lettered delivery of the named webhook
// again, with its delivery_id and a fresh budget of attempts.
func (m *Module) Retry(webhook, id string) (Delivery, error) {
	h := m.byName[webhook]
	if h == nil {
		return Delivery{}, fmt.Errorf("%w: %q", ErrWebhookNotFound, webhook)
	}
	m.life.RLock()
	defer m.life.RUnlock()
	if !m.state.Running() {
		return Delivery{}, errNotRunning
	}
	return m.backendOf(h).retry(h, id)
}

var errNotRunning = errors.New("egress: module not running")

// WebhookStatus is one webhook's state, as GET /api/webhooks and
// [Module.Status] show it.
type WebhookStatus struct {
	WebhookInfo
	Queued   int `json:"queued"`
	InFlight int `json:"in_flight"`
	// Counters since the module started.
	Delivered    uint64 `json:"delivered"`
	Failed       uint64 `json:"failed"` // failed + dead-lettered
	DeadLettered uint64 `json:"dead_lettered"`
	Dropped      uint64 `json:"dropped"` // queue full
	// DeadLetters is how many failed and dead-lettered deliveries are kept
	// (at most [Webhook].MaxDeadLetters); Evicted counts those discarded
	// beyond it.
	DeadLetters int    `json:"dead_letters"`
	Evicted     uint64 `json:"evicted"`
	// Store is where deliveries wait: "memory", "bbolt" (a data dir) or
	// "jetstream" (a NATS lattice). With jetstream, Queued, InFlight and
	// DeadLetters are the cluster's (every process on the lattice, as
	// the server counts them), the other counters this process's.
	Store string `json:"store"`
	// Enqueued counts the deliveries this process put in the JetStream
	// queue (its own events), with the jetstream store; from then on they
	// survive this process.
	Enqueued uint64 `json:"enqueued,omitempty"`
	// ClusterError says why the cluster's figures could not be read (NATS
	// away); they are then this process's.
	ClusterError string     `json:"cluster_error,omitempty"`
	LastError    string     `json:"last_error,omitempty"`
	LastErrorAt  *time.Time `json:"last_error_at,omitempty"`
}

// Status reports every webhook in config order.
func (m *Module) Status() []WebhookStatus {
	out := make([]WebhookStatus, 0, len(m.hooks)+1)
	for _, h := range m.allHooks() {
		out = append(out, h.status())
	}
	return out
}

// Missed is the number of events the lattice lost for egress before it
// could queue them: dropped from its buffer (it drains a large buffer at
// once, so this stays 0 unless the process is starved) or, on NATS, lost
// on the way as the Bus counts them ([lattice.Subscription.Missed]:
// publishes that failed while NATS was away).
func (m *Module) Missed() uint64 { return m.missed.Load() }

func (h *hook) status() WebhookStatus {
	var cs clusterState
	shared := false
	if b := h.m.backendStateOf(h); b != nil {
		cs, shared = b.shared(h) // outside mu: a network call
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	s := WebhookStatus{WebhookInfo: h.cfg.info(), Queued: len(h.ch), InFlight: h.inFlight,
		Delivered: h.counts.delivered, Failed: h.counts.failed + h.counts.deadLettered,
		DeadLettered: h.counts.deadLettered, Dropped: h.counts.dropped, DeadLetters: len(h.dead),
		Evicted: h.counts.evicted, LastError: h.lastError, Store: h.m.storeKindOf(h), Enqueued: h.counts.enqueued}
	if shared {
		if cs.err != nil {
			s.ClusterError = cs.err.Error()
		} else {
			s.Queued, s.InFlight, s.DeadLetters = cs.queued, cs.inFlight, cs.dead
		}
	}
	if !h.lastErrAt.IsZero() {
		t := h.lastErrAt
		s.LastErrorAt = &t
	}
	return s
}

// storeKind names where deliveries wait (WebhookStatus.Store).
func (m *Module) storeKind() string {
	switch {
	case m.cfg.JetStream != nil:
		return "jetstream"
	case m.cfg.DataDir != "":
		return "bbolt"
	}
	return "memory"
}

// Deliveries lists a webhook's recent deliveries ([Delivery]) with the given
// [Status] (empty: all), newest first, at most limit (0: 100).
func (m *Module) Deliveries(webhook string, status Status, limit int) ([]Delivery, error) {
	h := m.byName[webhook]
	if h == nil {
		return nil, fmt.Errorf("%w: %q", ErrWebhookNotFound, webhook)
	}
	if limit <= 0 {
		limit = 100
	}
	var stored []*delivery
	if b := m.backendStateOf(h); b != nil {
		var err error
		if stored, err = b.stored(h, limit); err != nil {
			return nil, fmt.Errorf("egress: webhook %s: %w", webhook, err)
		}
	}
	h.mu.Lock()
	var all []*delivery
	for _, d := range h.live {
		all = append(all, d)
	}
	all = append(all, h.dead...)
	all = append(all, h.recent...)
	for _, d := range stored {
		if h.live[d.id] == nil { // in flight here: the live record says more
			all = append(all, d)
		}
	}
	var out []Delivery
	for _, d := range all {
		if status == "" || d.status == status {
			out = append(out, d.view(h.cfg.Name))
		}
	}
	h.mu.Unlock()
	// ids are UUIDv7: newest first is descending id order.
	// sort.Slice, not slices.SortFunc: one sorter for every element type,
	// where slices.SortFunc compiles ~20 KB per struct type into the daemon
	// (its size bound: bench/README.md).
	sort.Slice(out, func(i, j int) bool { return out[i].ID > out[j].ID })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// DeliveriesOf lists the deliveries of the events named by eventIDs, to
// every webhook (and [PushWebhook]), that this process keeps: queued, in
// flight, failed and dead-lettered, and the last 100 delivered per
// webhook; oldest first, at most limit (0: 100). It reads memory only,
// never a store over the network, so a view may ask often (a run's
// timeline shows the webhook deliveries its events caused with it).
func (m *Module) DeliveriesOf(eventIDs []string, limit int) []Delivery {
	if len(eventIDs) == 0 {
		return nil
	}
	if limit <= 0 {
		limit = 100
	}
	want := make(map[string]bool, len(eventIDs))
	for _, id := range eventIDs {
		want[id] = true
	}
	var out []Delivery
	for _, h := range m.allHooks() {
		h.mu.Lock()
		take := func(d *delivery) {
			if want[d.eventID] {
				out = append(out, d.view(h.cfg.Name))
			}
		}
		for _, d := range h.live {
			take(d)
		}
		for _, d := range h.dead {
			take(d)
		}
		for _, d := range h.recent {
			take(d)
		}
		h.mu.Unlock()
	}
	// sort.Slice, not slices.SortFunc: one sorter for every element type,
	// where slices.SortFunc compiles ~20 KB per struct type into the daemon
	// (its size bound: bench/README.md).
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

// userAgent is "axocoatl/<version of this module>".
var userAgent = func() string {
	v := "dev"
	if bi, ok := debug.ReadBuildInfo(); ok {
		const mod = "github.com/axocoatl/axocoatl-go"
		if bi.Main.Path == mod && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, d := range bi.Deps {
			if d.Path == mod && d.Version != "" {
				v = d.Version
			}
		}
	}
	return "axocoatl/" + v
}()

// allHooks are the webhooks and the push hook.
func (m *Module) allHooks() []*hook {
	if m.push == nil {
		return m.hooks
	}
	return append(slices.Clip(m.hooks), m.push)
}

// backendOf is where h's deliveries wait; the module is running.
func (m *Module) backendOf(h *hook) backend {
	if h.isPush {
		return m.pushBackend
	}
	return m.backend
}

// backendStateOf is where h's deliveries wait once started, else nil.
// Start sets it (and each hook's cons before it) under life: a reader that
// may run while the module starts (Status, Deliveries, a metrics scrape)
// reads it here, never m.backend, m.pushBackend or h.cons directly before
// it.
func (m *Module) backendStateOf(h *hook) backend {
	m.life.RLock()
	defer m.life.RUnlock()
	if h.isPush {
		if m.pushBackend == nil {
			return nil
		}
		return m.pushBackend
	}
	return m.backend
}

// storeKindOf is where h's deliveries wait (WebhookStatus.Store).
func (m *Module) storeKindOf(h *hook) string {
	if h.isPush {
		if m.cfg.DataDir != "" {
			return "bbolt"
		}
		return "memory"
	}
	return m.storeKind()
}

// closeBackends closes b and the push backend when it is another.
func (m *Module) closeBackends(b backend) error {
	var errs []error
	if b != nil {
		errs = append(errs, b.close(m))
	}
	if m.pushBackend != nil && backend(m.pushBackend) != b {
		errs = append(errs, m.pushBackend.close(m))
	}
	return errors.Join(errs...)
}
