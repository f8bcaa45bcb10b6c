// Package httpapi is an Engine's operator door as a Module: the HTTP API
// (agents, execute, conversations, tools, custom events), the health checks, Prometheus
// metrics, the WebSocket event stream GET /api/events, the run timelines
// GET /api/runs/{id}/timeline ([TimelineResponse]: a run's model calls,
// tool calls, approval waits and webhook deliveries, built from lattice
// events and the [Timeline] sources, tracing off or on) and the dashboard
// page. It is what the daemon serves besides the protocol modules, and what
// a host embedding the library mounts to get the same (config.Runtime's
// Mount does).
//
// The module meets the others only through the Engine (agents, tools, the
// lattice, the HTTP guard) and through the hooks of its [Config] (readiness,
// tool listing, approvals), which the host composes (config.Build does).
//
// In Go terms: [New] takes a [Config] whose zero value is an API over the
// Engine alone and returns a [*Module], an [axocoatl.HTTPModule].
// [axocoatl.Engine.Use] calls [Module.Start], which subscribes the
// /metrics counters and the event history to the Engine's lattice
// ([axocoatl.Engine.Bus]); [axocoatl.Engine.Close] calls [Module.Stop]. A
// host mounts the Module (an [http.Handler] that answers 503 until
// started) on its own mux at each pattern of [Module.Routes], and calls
// [Module.Shutdown] beside [http.Server.Shutdown] so that event streams
// end with a close frame. It is a door: POST /api/agents/{id}/execute ends
// in [axocoatl.Engine.ExecuteRequest] with [axocoatl.SourceAPI] (a turn of
// a conversation when the body names one; /api/conversations reads and
// deletes them in [axocoatl.Engine.Conversations]), every
// route guarded by the Engine's one guard ([axocoatl.Engine.GuardHTTP]);
// and an observer: the
// metrics and the WebSocket stream subscribe to the lattice with a
// [lattice.Filter]. The dashboard page is package dashboard's
// [dashboard.Handler].
package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/httpapi/dashboard"
	"github.com/axocoatl/axocoatl-go/internal/jsonio"
	"github.com/axocoatl/axocoatl-go/internal/lifecycle"
	"github.com/axocoatl/axocoatl-go/lattice"
)

// Defaults of zero [Config] fields.
const (
	DefaultRequestTimeout = 5 * time.Minute
	// DefaultHistoryEvents is how many recent events a new event stream
	// gets in its ready frame.
	DefaultHistoryEvents = 500
	// DefaultHistoryPayload bounds the payload of one history event; a
	// larger one is kept without its payload.
	DefaultHistoryPayload = 16 << 10
)

// Config configures the [Module] made by [New]. The zero value is usable: an API over the
// Engine alone, always ready, no approvals.
type Config struct {
	// RequestTimeout bounds one execute request (the run is cancelled
	// after it, with 504). Zero: [DefaultRequestTimeout].
	RequestTimeout time.Duration
	// Ready reports whether what the host waits for at boot is done (the
	// first connect of its MCP servers): GET /health/ready answers 503
	// until it is, and from [Module.Shutdown] on. Zero: ready once
	// started.
	Ready func() bool
	// MCPServers is the "mcp_servers" list of GET /health/ready (each
	// server's state). Zero: an empty list.
	MCPServers func() any
	// Tools is the "tools" list of GET /api/tools. Zero: the Engine's
	// tools ([axocoatl.Engine.Tools]: name, description, server).
	Tools func() any
	// Approvals connect the event stream to an approval gate. Zero: none
	// (the ready frame lists none, approve commands get an error frame).
	Approvals Approvals
	// Collectors are registered on the /metrics registry beside the
	// module's own counters (another module's, egress's). Zero: none.
	Collectors []prometheus.Collector
	// ReservedEvents are event types clients may not publish besides those
	// the Engine and its started modules declare ([axocoatl.Engine.Declared]):
	// the events of modules this host did not start but another daemon on
	// a shared lattice may (config passes every module's). Zero: none.
	ReservedEvents []string
	// HistoryEvents bounds the recent events of the ready frame (a
	// [lattice.History]). Zero: [DefaultHistoryEvents].
	HistoryEvents int
	// TimelineRuns bounds the runs whose timeline GET
	// /api/runs/{id}/timeline keeps. Zero: [DefaultTimelineRuns].
	TimelineRuns int
	// TimelineRows bounds the rows of one run's timeline from its events,
	// and again its webhook deliveries. Zero: [DefaultTimelineRows].
	TimelineRows int
	// Timeline connects the run timelines to the approval gate and the
	// webhooks ([Timeline]). Zero: model calls, tool calls and the run's
	// outcome only.
	Timeline Timeline
	// Logger receives the module's logs. Zero: the Engine's.
	Logger *slog.Logger
}

// Approvals are what the event stream needs from an approval gate.
type Approvals struct {
	// Pending lists the pending approvals for the ready frame, each as its
	// JSON shape (the ApprovalRequested payload).
	Pending func(ctx context.Context) []any
	// Resolve takes a decision ("allow" | "deny", remember "once" |
	// "always") from a WebSocket client. Its error text is sent back to
	// the client, so it must not contain secrets.
	Resolve func(ctx context.Context, approvalID, decision, remember string) error
	// Answer takes a question's answer from a WebSocket client: decision
	// "allow" with content (checked against the question's schema) or
	// "deny". Nil: questions are answered with Resolve (allow takes the
	// schema's defaults). Its error text is sent back to the client.
	Answer func(ctx context.Context, approvalID, decision string, content map[string]any) error
}

// Validate checks the config.
func (c Config) Validate() error {
	switch {
	case c.RequestTimeout < 0:
		return errors.New("httpapi: RequestTimeout must not be negative")
	case c.HistoryEvents < 0:
		return errors.New("httpapi: HistoryEvents must not be negative")
	case c.TimelineRuns < 0:
		return errors.New("httpapi: TimelineRuns must not be negative")
	case c.TimelineRows < 0:
		return errors.New("httpapi: TimelineRows must not be negative")
	}
	return nil
}

// Module serves the API. Create it with [New] and pass it to
// [axocoatl.Engine.Use]; it is an [axocoatl.HTTPModule].
type Module struct {
	cfg Config

	mu   sync.Mutex
	life lifecycle.State
	// reserved is Config.ReservedEvents as a set.
	reserved map[string]bool
	eng      *axocoatl.Engine
	log      *slog.Logger
	handler  atomic.Pointer[http.Handler]
	ready    atomic.Bool
	met      *metrics
	hist     *lattice.History
	// timelines are the latest runs' timelines (GET /api/runs/{id}/timeline).
	timelines *timelines
	stream    *stream
	// endStreams cancels the streams' context (Shutdown).
	endStreams context.CancelFunc
}

// New returns a Module; it serves once started by [axocoatl.Engine.Use].
func New(cfg Config) (*Module, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.HistoryEvents == 0 {
		cfg.HistoryEvents = DefaultHistoryEvents
	}
	if cfg.TimelineRuns == 0 {
		cfg.TimelineRuns = DefaultTimelineRuns
	}
	if cfg.TimelineRows == 0 {
		cfg.TimelineRows = DefaultTimelineRows
	}
	m := &Module{cfg: cfg, reserved: make(map[string]bool, len(cfg.ReservedEvents))}
	for _, t := range cfg.ReservedEvents {
		m.reserved[t] = true
	}
	return m, nil
}

// Name, Start and Stop make the Module an [axocoatl.Module].
func (m *Module) Name() string { return "httpapi" }

// Start subscribes the metrics counter, the history and the run timelines
// to the Engine's lattice and builds the routes.
func (m *Module) Start(_ context.Context, e *axocoatl.Engine) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.life.CheckStart("httpapi", nil); err != nil {
		return err
	}
	m.eng, m.log = e, m.cfg.Logger
	if m.log == nil {
		m.log = e.Logger()
	}
	met, err := newMetrics(e.Bus(), m.isReserved, m.cfg.Collectors...)
	if err != nil {
		return err
	}
	hist, err := lattice.NewHistory(e.Bus(), m.cfg.HistoryEvents, DefaultHistoryPayload)
	if err != nil {
		met.close()
		return err
	}
	tl, err := newTimelines(e.Bus(), m.cfg.TimelineRuns, m.cfg.TimelineRows, m.cfg.Timeline)
	if err != nil {
		met.close()
		hist.Close()
		return err
	}
	streamCtx, end := context.WithCancel(context.Background())
	m.met, m.hist, m.timelines, m.endStreams = met, hist, tl, end
	m.stream = &stream{m: m, ctx: streamCtx, history: hist, writeTimeout: e.HTTPWriteTimeout()}
	mux := http.NewServeMux()
	for _, d := range m.table() {
		h := d.serve
		if !d.guarded {
			h = e.GuardHTTP(axocoatl.HTTPRoute{Scope: d.Scope, MaxBodyBytes: d.MaxBodyBytes}, h)
		}
		mux.Handle(d.Method+" "+d.Pattern, h)
	}
	var h http.Handler = mux
	m.handler.Store(&h)
	m.ready.Store(true)
	m.life.MarkStarted()
	return nil
}

// isReserved reports whether only the runtime publishes eventType.
func (m *Module) isReserved(eventType string) bool {
	return m.reserved[eventType] || m.eng.Declared(eventType)
}

// ServeHTTP serves the module's [Module.Routes]. Before [Module.Start] it
// answers 503 not_started.
func (m *Module) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := m.handler.Load()
	if h == nil {
		jsonio.WriteError(w, http.StatusServiceUnavailable, "not_started", "httpapi: module not started: pass it to Engine.Use")
		return
	}
	(*h).ServeHTTP(w, r)
}

// Shutdown begins a graceful stop: GET /health/ready answers 503, new
// event streams are refused, and the open ones end with a 1001 close frame;
// it waits within ctx for their close frames ([http.Server.Shutdown] does
// not wait for hijacked connections). Call it beside http.Server.Shutdown.
func (m *Module) Shutdown(ctx context.Context) {
	m.ready.Store(false)
	m.mu.Lock()
	s, end := m.stream, m.endStreams
	m.mu.Unlock()
	if s != nil {
		s.shutdown(ctx, end)
	}
}

// Stop is [Module.Shutdown], then it ends the metrics counter, the
// history and the run timelines.
func (m *Module) Stop(ctx context.Context) error {
	m.Shutdown(ctx)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.life.Stop() {
		m.met.close()
		m.hist.Close()
		m.timelines.Close()
	}
	return nil
}

// door is one route with its handler; guarded handlers check the request
// themselves (the WebSocket, which also takes its token from the query).
type door struct {
	axocoatl.Route
	serve   http.Handler
	guarded bool
}

// Routes are the module's doors ([axocoatl.Route], each with the
// [axocoatl.Scope] it needs):
//
//	GET|HEAD /health, /health/live, /health/ready   public
//	GET      /api/agents, /api/agents/{id}, /api/tools   read
//	POST     /api/agents/{id}/execute               execute: {"input": "…", "conversation_id"?}
//	GET      /api/conversations                     read: ?agent=&limit=&cursor=, newest first
//	GET      /api/conversations/{id}                read: ?from=&limit=: its messages
//	DELETE   /api/conversations/{id}                execute
//	POST     /api/events                            admin: a custom event
//	GET      /api/events                            read: the WebSocket event stream
//	GET      /api/runs/{id}/timeline                read: a run's model calls, tool calls, approval waits, webhooks
//	GET      /api/whoami                            public: the caller's identity
//	GET      /metrics                               read, by a token that sees every agent
//	GET      /.well-known/oauth-protected-resource[/…]  public, with server.auth.oauth (once started)
//	GET|HEAD /{$}                                   the dashboard, public
//
// A caller whose identity sees only some agents sees only those agents,
// their conversations and their events. Bodies are bounded to 1 MiB.
func (m *Module) Routes() []axocoatl.Route {
	var out []axocoatl.Route
	for _, d := range m.table() {
		out = append(out, d.Route)
	}
	return out
}

// table is the one list of the module's routes.
func (m *Module) table() []door {
	get, head, post, del := http.MethodGet, http.MethodHead, http.MethodPost, http.MethodDelete
	public := func(method, pattern string, h http.HandlerFunc) door {
		return door{Route: axocoatl.Route{Method: method, Pattern: pattern, Scope: axocoatl.ScopePublic}, serve: h}
	}
	scoped := func(scope axocoatl.Scope, method, pattern string, h http.HandlerFunc) door {
		return door{Route: axocoatl.Route{Method: method, Pattern: pattern, Scope: scope}, serve: h}
	}
	read, exec := axocoatl.ScopeRead, axocoatl.ScopeExecute
	var ds []door
	for _, p := range []string{"/health", "/health/live"} {
		ds = append(ds, public(get, p, m.health), public(head, p, m.health))
	}
	ds = append(ds,
		public(get, "/health/ready", m.healthReady),
		public(head, "/health/ready", m.healthReady),
		scoped(read, get, "/api/agents", m.listAgents),
		scoped(read, get, "/api/agents/{id}", m.getAgent),
		scoped(exec, post, "/api/agents/{id}/execute", m.execute),
		scoped(read, get, "/api/conversations", m.listConversations),
		scoped(read, get, "/api/conversations/{id}", m.getConversation),
		scoped(exec, del, "/api/conversations/{id}", m.deleteConversation),
		scoped(axocoatl.ScopeAdmin, post, "/api/events", m.publishEvent),
		scoped(read, get, "/api/tools", m.listTools),
		scoped(read, get, "/api/runs/{id}/timeline", m.getTimeline),
		scoped(read, get, "/metrics", m.serveMetrics),
		public(get, "/api/whoami", m.whoami),
		// The stream checks the token itself: browsers cannot set headers
		// on a WebSocket and pass it as a subprotocol or ?token= instead.
		door{Route: axocoatl.Route{Method: get, Pattern: "/api/events", Scope: read}, serve: http.HandlerFunc(m.serveStream), guarded: true},
	)
	if m.eng != nil && m.eng.HTTP().OAuth != nil { // the doors are OAuth protected resources
		ds = append(ds,
			public(get, axocoatl.WellKnownProtectedResource, m.eng.ServeProtectedResource),
			public(get, axocoatl.WellKnownProtectedResource+"/{path...}", m.eng.ServeProtectedResource))
	}
	page := dashboard.Handler()
	return append(ds, public(get, "/{$}", page.ServeHTTP), public(head, "/{$}", page.ServeHTTP))
}
