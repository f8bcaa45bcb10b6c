package config

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/a2a"
	"github.com/axocoatl/axocoatl-go/a2aremote"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/builtin"
	"github.com/axocoatl/axocoatl-go/approval"
	"github.com/axocoatl/axocoatl-go/cluster"
	"github.com/axocoatl/axocoatl-go/conversation"
	"github.com/axocoatl/axocoatl-go/egress"
	"github.com/axocoatl/axocoatl-go/httpapi"
	"github.com/axocoatl/axocoatl-go/internal/httpguard"
	"github.com/axocoatl/axocoatl-go/internal/jsonio"
	"github.com/axocoatl/axocoatl-go/internal/redact"
	"github.com/axocoatl/axocoatl-go/lattice"
	latticenats "github.com/axocoatl/axocoatl-go/lattice/nats"
	"github.com/axocoatl/axocoatl-go/mcpclient"
	"github.com/axocoatl/axocoatl-go/mcpserver"
	"github.com/axocoatl/axocoatl-go/secret"
)

// Runtime is an [axocoatl.Engine] built from a [Config] by [Config.Build],
// with the modules the config asks for started on it. Modules a config does
// not use are nil.
type Runtime struct {
	Engine *axocoatl.Engine
	// MCPClient connects mcp_servers; nil when there are none.
	MCPClient *mcpclient.Module
	// A2ARemote makes a2a_agents tools a2a__<name>; nil when there are
	// none.
	A2ARemote *a2aremote.Module
	// MCPServer serves the agents as MCP tools (/mcp and stdio).
	MCPServer *mcpserver.Server
	// A2A serves the A2A doors.
	A2A *a2a.Handler
	// Approval gates tool calls on a human's verdict (its routes are
	// /api/approvals…).
	Approval *approval.Module
	// Egress delivers events to the webhooks; with none configured it
	// starts nothing and sends nothing.
	Egress *egress.Module
	// Cluster shares the agents with the other daemons on the NATS
	// lattice; nil with the in-memory lattice.
	Cluster *cluster.Module
	// HTTPAPI serves the HTTP API (agents, execute, tools, events), the
	// health checks, metrics, the event WebSocket and the dashboard.
	HTTPAPI *httpapi.Module

	// ConversationStore says what keeps the conversations, and where:
	// "bolt <path>", "memory (…)", … (the startup log prints it).
	ConversationStore string

	// bus is closed after the Engine when Build opened it (NATS).
	bus lattice.Bus
	// convs is closed after the Engine.
	convs conversation.Store
	// tracerProvider exports the spans (telemetry:); shut down, flushing,
	// last of all. Nil when telemetry is off.
	tracerProvider *sdktrace.TracerProvider
	// mcpReady is closed when every MCP server finished its first connect
	// attempt; the goroutine that waits for it ends by then or on Close
	// (stopWaiting, waited).
	mcpReady    chan struct{}
	stopWaiting context.CancelFunc
	waited      chan struct{}
}

// BuildOptions tune [Config.Build]. The zero value is usable.
type BuildOptions struct {
	// Logger receives the Engine's and the modules' logs. Zero: discard.
	Logger *slog.Logger
	// Version is what the MCP server reports when mcp_server.version is
	// unset. Zero: the mcpserver default.
	Version string
	// SharedDataDir builds a process that shares server.data_dir with the
	// one holding its lock ([Config.LockDataDir]), as `mcp serve` does: it
	// shares the remembered approvals and keeps its webhook deliveries in
	// memory rather than in the holder's egress.db (they do not outlive
	// the process). Zero: the deliveries are kept in egress.db.
	SharedDataDir bool
}

// Build makes the Engine of c: its lattice, its HTTP guard, the agents with
// their providers, then the modules (the MCP client and the remote A2A
// agents first, so that their tools exist for the doors). MCP servers
// connect and A2A cards are read in the background: Runtime's
// MCPClient.Ready ([mcpclient.Module.Ready]) and A2ARemote.Ready
// ([a2aremote.Module.Ready]) wait for their first attempts. On error
// nothing is left running.
func (c *Config) Build(ctx context.Context, opts BuildOptions) (*Runtime, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	bus, err := c.Lattice.open(c.Cluster.Key, c.Cluster.AcceptedKeys, log)
	if err != nil {
		return nil, c.natsError(err)
	}
	if c.Lattice.Backend == "nats" && c.Cluster.Key.IsZero() {
		log.Warn("cluster.key is not set: the daemons' NATS messages are not signed, and any NATS user who may publish on the lattice's subjects can resolve approvals, run agents and announce daemons (set cluster.key or AXOCOATL_CLUSTER_KEY on every daemon; see the trust model in docs/cluster.md)")
	}
	convs, where, err := c.openConversations(ctx, bus, opts, log)
	if err != nil {
		if bus != nil {
			err = errors.Join(err, bus.Close())
		}
		return nil, err
	}
	rt := &Runtime{bus: bus, convs: convs, ConversationStore: where}
	engineOpts := axocoatl.Options{Logger: log, Bus: bus, HTTP: c.HTTPOptions(), MaxRuns: c.Server.MaxConcurrentRuns, Conversations: convs,
		CaptureContent: c.Telemetry.CaptureContent}
	// Off (the default), no provider is made: nothing starts, nothing is
	// dialed, and the Engine uses otel's global (a host's, or a no-op).
	if tp, err := c.Telemetry.TracerProvider(); err != nil {
		return nil, errors.Join(err, rt.closeStores())
	} else if tp != nil {
		rt.tracerProvider = tp
		engineOpts.TracerProvider = tp
		logTelemetry(log, c.Telemetry)
	}
	rt.Engine = axocoatl.New(engineOpts)
	fail := func(err error) (*Runtime, error) {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return nil, errors.Join(err, rt.Close(closeCtx))
	}
	for i, spec := range c.Agents {
		kind := spec.Provider
		if kind == "" {
			kind = provider.Echo
			spec.Provider = kind
		}
		model, err := builtin.New(kind, c.provider(kind))
		if err != nil {
			return fail(c.errorf(fmt.Sprintf("agents[%d].provider", i), "%v", err))
		}
		if err := rt.Engine.AddAgent(spec, model); err != nil {
			return fail(c.errorf(fmt.Sprintf("agents[%d]", i), "%v", err))
		}
	}
	// The gate first: it must stand before any tool can be called.
	apCfg := c.Approval
	apCfg.DataDir, apCfg.Logger = c.Server.DataDir, log
	if rt.Approval, err = approval.New(apCfg); err == nil {
		err = rt.Engine.Use(ctx, rt.Approval)
	}
	if err != nil {
		return fail(fmt.Errorf("approval: %w", err))
	}
	egCfg := egress.Config{Webhooks: c.Webhooks, DataDir: c.Server.DataDir, Push: c.Push}
	if opts.SharedDataDir {
		egCfg.DataDir = "" // egress.db is the lock holder's
	}
	if nb, ok := bus.(*latticenats.Bus); ok {
		c.watchNATS(nb, log)
		// On NATS, webhooks share one durable queue across the daemons.
		js := c.Lattice.JetStream
		egCfg.JetStream = &egress.JetStream{Conn: nb.Conn(), Prefix: nb.Prefix(), Stream: js.Stream,
			Consumer: js.Consumer, AckWait: js.AckWait, Keys: nb.Keyring()}
	}
	if rt.Egress, err = egress.New(egCfg); err == nil {
		err = rt.Engine.Use(ctx, rt.Egress)
	}
	if err != nil {
		return fail(fmt.Errorf("webhooks: %w", err))
	}
	if len(c.MCPServers) > 0 {
		// A stdio server inheriting the environment can read the daemon's
		// own credentials: whatever a server says is scrubbed of them all.
		mc := mcpclient.Config{Servers: c.MCPServers, Scrub: c.Secrets(), RedirectURL: c.OAuthRedirectURL()}
		if mc.Tokens, err = c.OAuthTokens(); err != nil {
			return fail(fmt.Errorf("mcp_servers: %w", err))
		}
		m, err := mcpclient.New(mc)
		if err != nil {
			return fail(fmt.Errorf("mcp_servers: %w", err))
		}
		if err := rt.Engine.Use(ctx, m); err != nil {
			return fail(err)
		}
		rt.MCPClient = m
		rt.mcpReady, rt.waited = make(chan struct{}), make(chan struct{})
		var waitCtx context.Context
		waitCtx, rt.stopWaiting = context.WithCancel(context.Background())
		go func() {
			defer close(rt.waited)
			if m.Ready(waitCtx) == nil || waitCtx.Err() == nil {
				close(rt.mcpReady)
			}
		}()
	}
	if len(c.A2AAgents) > 0 {
		// A remote may echo what it was sent: what it says is scrubbed of
		// every secret of the config, not only its own headers.
		m, err := a2aremote.New(a2aremote.Config{Agents: c.A2AAgents, Scrub: c.Secrets()})
		if err != nil {
			return fail(fmt.Errorf("a2a_agents: %w", err))
		}
		if err := rt.Engine.Use(ctx, m); err != nil {
			return fail(err)
		}
		rt.A2ARemote = m
	}
	mcpCfg := c.MCPServer
	mcpCfg.DataDir = c.Server.DataDir // the requestState key
	if mcpCfg.Version == "" {
		mcpCfg.Version = opts.Version
	}
	if rt.MCPServer, err = mcpserver.New(mcpCfg); err == nil {
		err = rt.Engine.Use(ctx, rt.MCPServer)
	}
	if err != nil {
		return fail(fmt.Errorf("mcp_server: %w", err))
	}
	if rt.A2A, err = a2a.New(c.A2A); err == nil {
		err = rt.Engine.Use(ctx, rt.A2A)
	}
	if err != nil {
		return fail(fmt.Errorf("a2a: %w", err))
	}
	if rt.HTTPAPI, err = httpapi.New(c.httpAPIConfig(rt, log)); err == nil {
		err = rt.Engine.Use(ctx, rt.HTTPAPI)
	}
	if err != nil {
		return fail(fmt.Errorf("http api: %w", err))
	}
	if bus != nil {
		// Last, so that it stops first: the others hear of the departure
		// before the doors close.
		clCfg := c.Cluster
		clCfg.Logger = log
		// The bus's keys: one Keyring, one count of refusals.
		clCfg.Key, clCfg.AcceptedKeys = "", nil
		if rt.Cluster, err = cluster.New(clCfg); err == nil {
			err = rt.Engine.Use(ctx, rt.Cluster)
		}
		if err != nil {
			return fail(err)
		}
	}
	return rt, nil
}

// httpAPIConfig composes the HTTP API with the other modules: readiness
// and tools from the MCP client, the approval gate for the event stream,
// egress's counters on /metrics, and the module events clients may not
// publish.
func (c *Config) httpAPIConfig(rt *Runtime, log *slog.Logger) httpapi.Config {
	gate := rt.Approval
	return httpapi.Config{
		RequestTimeout: c.Server.RequestTimeout,
		Ready:          rt.MCPReady,
		MCPServers: func() any {
			if s := rt.MCPStatus(); s != nil {
				return s
			}
			return []mcpclient.ServerStatus{}
		},
		Tools: func() any { return rt.Tools() },
		Approvals: httpapi.Approvals{
			Pending: func(ctx context.Context) []any {
				var out []any
				who := axocoatl.IdentityFrom(ctx)
				for _, p := range gate.Pending() {
					if who.SeesAgent(p.AgentID) {
						out = append(out, p)
					}
				}
				return out
			},
			Resolve: func(ctx context.Context, id, decision, remember string) error {
				return gate.Resolve(ctx, id, decision, remember, "websocket")
			},
			Answer: func(ctx context.Context, id, decision string, content map[string]any) error {
				_, err := gate.Answer(ctx, id, decision, content, "websocket")
				return err
			},
		},
		Collectors: c.collectors(rt),
		// A run's timeline: its approval waits from the gate's events,
		// the webhook deliveries its events caused from egress.
		Timeline: httpapi.Timeline{
			ApprovalRequested: approval.EventRequested,
			ApprovalResolved:  approval.EventResolved,
			Deliveries: func(_ context.Context, eventIDs []string, limit int) []httpapi.WebhookDelivery {
				return webhookDeliveries(rt.Egress.DeliveriesOf(eventIDs, limit))
			},
		},
		// The MCP client's and the remote agents' events are the runtime's
		// even where this daemon starts neither module: another daemon on
		// the lattice may, and its dashboard must not show forged ones.
		ReservedEvents: moduleEvents(new(mcpclient.Module), new(a2aremote.Module)),
		Logger:         log,
	}
}

// webhookDeliveries are egress's deliveries as a run's timeline shows them.
func webhookDeliveries(ds []egress.Delivery) []httpapi.WebhookDelivery {
	out := make([]httpapi.WebhookDelivery, len(ds))
	for i, d := range ds {
		w := httpapi.WebhookDelivery{Webhook: d.Webhook, EventType: d.EventType, Status: string(d.Status), CreatedAt: d.CreatedAt}
		for _, a := range d.Attempts {
			// An attempt is recorded when it ends.
			latency := time.Duration(a.LatencyMS * float64(time.Millisecond))
			w.Attempts = append(w.Attempts, httpapi.WebhookAttempt{Start: a.At.Add(-latency), StatusCode: a.StatusCode,
				Latency: latency, Error: a.Error})
		}
		out[i] = w
	}
	return out
}

// collectors are the modules' metrics on /metrics: egress's, and on NATS
// the refused cluster messages (axocoatl_cluster_rejected_total).
func (c *Config) collectors(rt *Runtime) []prometheus.Collector {
	out := []prometheus.Collector{rt.Egress.Collector()}
	if nb, ok := rt.bus.(*latticenats.Bus); ok {
		out = append(out, nb.Collector())
	}
	return out
}

// watchNATS logs the connection's losses and returns (the URL redacted).
func (c *Config) watchNATS(nb *latticenats.Bus, log *slog.Logger) {
	nc := nb.Conn()
	buf := c.Lattice.ReconnectBufferBytes
	if buf == 0 {
		buf = DefaultReconnectBuffer
	}
	nc.SetDisconnectErrHandler(func(nc *natsgo.Conn, err error) {
		msg := "connection closed"
		if err != nil {
			msg = redact.URLs(err.Error())
		}
		log.Warn("NATS connection lost: reconnecting; events published meanwhile are buffered, beyond the buffer they fail and count as missed",
			"reason", msg, "reconnect_buffer_bytes", buf, "failed_publishes", nb.Failed())
	})
	nc.SetErrorHandler(natsErrorLogger(log, natsErrorEvery))
	nc.SetReconnectHandler(func(nc *natsgo.Conn) {
		log.Info("NATS connection back", "url", redact.URLs(nc.ConnectedUrl()), "failed_publishes", nb.Failed())
	})
}

// natsErrorEvery is the least time between two "NATS error" log lines of
// one error.
const natsErrorEvery = 10 * time.Second

// natsErrorKinds bounds the errors rate-limited each on its own; the ones
// beyond share one limit.
const natsErrorKinds = 16

// natsErrorLogger logs NATS's asynchronous errors (without a handler
// nats.go prints them, a write to a server that went away, on stderr,
// bypassing the daemon's logger). A peer flooding a subscription makes
// one slow-consumer error per burst: each error (by its text) is logged
// at most once per every, its line counting the same errors not logged
// since its last; a flood of one error does not hide another (a
// permissions violation).
func natsErrorLogger(log *slog.Logger, every time.Duration) natsgo.ErrHandler {
	type limit struct {
		last       time.Time
		suppressed int
	}
	var (
		mu     sync.Mutex
		limits = map[string]*limit{}
	)
	return func(_ *natsgo.Conn, sub *natsgo.Subscription, err error) {
		text := err.Error()
		mu.Lock()
		l := limits[text]
		if l == nil {
			if len(limits) >= natsErrorKinds {
				text = "" // the others
				l = limits[text]
			}
			if l == nil {
				l = &limit{}
				limits[text] = l
			}
		}
		now := time.Now()
		if !l.last.IsZero() && now.Sub(l.last) < every {
			l.suppressed++
			mu.Unlock()
			return
		}
		l.last = now
		n := l.suppressed
		l.suppressed = 0
		mu.Unlock()
		attrs := []any{"error", redact.URLs(err.Error()), "not_logged_since_last", n}
		if sub != nil {
			attrs = append(attrs, "subject", sub.Subject)
		}
		log.Warn("NATS error", attrs...)
	}
}

// Route is one HTTP door of a module ([axocoatl.Route]) with the handler
// that serves it (the module's, which guards it: Host, token, Origin,
// bounds).
type Route struct {
	axocoatl.Route
	Handler http.Handler
}

// HTTPModules are the started modules that serve HTTP
// ([axocoatl.HTTPModule]), in the order of [Runtime.Routes]: the MCP server, A2A, approval, egress, the MCP
// client (when there are mcp_servers), the HTTP API.
func (rt *Runtime) HTTPModules() []axocoatl.HTTPModule {
	ms := []axocoatl.HTTPModule{rt.MCPServer, rt.A2A, rt.Approval, rt.Egress}
	if rt.MCPClient != nil {
		// Its OAuth logins and callback; none without OAuth servers.
		ms = append(ms, rt.MCPClient)
	}
	return append(ms, rt.HTTPAPI)
}

// Routes lists every module's HTTP doors, from each module's own list
// (its Routes method), at the daemon's paths.
func (rt *Runtime) Routes() []Route {
	var routes []Route
	for _, m := range rt.HTTPModules() {
		for _, r := range m.Routes() {
			routes = append(routes, Route{r, m})
		}
	}
	return routes
}

// Mount routes every module's HTTP doors ([Runtime.Routes]) on mux: the protocols,
// the HTTP API, health, metrics, the event WebSocket and the dashboard at
// "/". A route mux already has (a host's own "GET /{$}") is an error that
// names it; the routes before it stay mounted.
func (rt *Runtime) Mount(mux *http.ServeMux) error {
	for _, r := range rt.Routes() {
		if err := handle(mux, r.Method+" "+r.Pattern, r.Handler); err != nil {
			return err
		}
	}
	return nil
}

// handle is mux.Handle with its panic on a conflicting pattern turned into
// an error.
func handle(mux *http.ServeMux, pattern string, h http.Handler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("route %s: %v", pattern, p)
		}
	}()
	mux.Handle(pattern, h)
	return nil
}

// Handler is every route ([Runtime.Routes]) on a router of its own: what the daemon
// serves. A path no route has answers 404, a path with other methods 405
// with Allow, both in the JSON error shape and with the unread body
// drained under server.body_timeout; a handler that panics answers 500 and
// is logged, the process stays up.
//
// The router is net/http's ServeMux, which reads the modules' patterns as
// they are written. httprouter, which the daemon used before, cannot: it
// reads ':' as a parameter, so the A2A REST paths (/a2a/message:send)
// cannot be written in its syntax, and every {id} had to be rewritten.
func (rt *Runtime) Handler() (http.Handler, error) {
	mux := http.NewServeMux()
	if err := rt.Mount(mux); err != nil {
		return nil, err
	}
	body := rt.Engine.HTTP().BodyTimeout
	if body == 0 {
		body = DefaultBodyTimeout
	}
	log := rt.Engine.Logger()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p) // net/http's way to abort a response
				}
				// A bug in one handler answers 500 and is logged.
				log.Error("handler panicked", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(p))
				jsonio.WriteError(w, http.StatusInternalServerError, "internal", "internal error")
			}
		}()
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		httpguard.ArmBodyDeadline(w, r, body)
		if allow := allowed(mux, r); allow != "" {
			w.Header().Set("Allow", allow)
			jsonio.WriteError(w, http.StatusMethodNotAllowed, "method_not_allowed", "method not allowed on this route")
			return
		}
		jsonio.WriteError(w, http.StatusNotFound, "not_found", "no such route")
	}), nil
}

// allowed lists the methods mux has a route for at r's path.
func allowed(mux *http.ServeMux, r *http.Request) string {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := *r
		probe.Method = m
		if _, pattern := mux.Handler(&probe); pattern != "" {
			allow = append(allow, m)
		}
	}
	return strings.Join(allow, ", ")
}

// Shutdown ends the long-lived streams (the event WebSockets with a 1001
// close frame, the MCP GET streams once their calls are answered), waiting
// within ctx: [http.Server.Shutdown] waits for neither. Call it beside
// http.Server.Shutdown, then [Runtime.Close].
func (rt *Runtime) Shutdown(ctx context.Context) error {
	rt.HTTPAPI.Shutdown(ctx)
	return rt.MCPServer.Shutdown(ctx)
}

// Close stops the Engine (in-flight runs may finish within ctx, then are
// cancelled; modules stop) and then the bus Build opened.
func (rt *Runtime) Close(ctx context.Context) error {
	if rt.stopWaiting != nil {
		rt.stopWaiting()
		<-rt.waited
	}
	err := rt.Engine.Close(ctx)
	err = errors.Join(err, rt.closeStores())
	if rt.tracerProvider != nil {
		// Last: the spans of the shutdown itself are flushed too, within
		// a bound of its own (a collector that is gone must not hold the
		// exit).
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), TelemetryShutdownTimeout)
		defer cancel()
		if terr := rt.tracerProvider.Shutdown(flushCtx); terr != nil {
			err = errors.Join(err, fmt.Errorf("telemetry: flushing spans: %w", terr))
		}
	}
	return err
}

// closeStores closes the conversation store and the bus Build opened.
func (rt *Runtime) closeStores() error {
	var err error
	if rt.convs != nil {
		err = errors.Join(err, rt.convs.Close())
	}
	if rt.bus != nil {
		err = errors.Join(err, rt.bus.Close())
	}
	return err
}

// natsConnectTimeout bounds dialing NATS at boot.
const natsConnectTimeout = 5 * time.Second

// natsReconnectWait is the pause between reconnect attempts (nats.go adds
// up to 100ms of jitter).
const natsReconnectWait = time.Second

// Open returns the NATS bus ([latticenats.Bus]) when the section asks for
// it (the caller closes it); nil means the Engine's own in-memory bus
// ([lattice.Memory]).
func (l LatticeConfig) Open() (lattice.Bus, error) { return l.open("", nil, nil) }

// open is Open with the cluster's keys (cluster.key, cluster.accepted_keys)
// and the logger of the refusals.
func (l LatticeConfig) open(key secret.Secret, accepted []secret.Secret, log *slog.Logger) (lattice.Bus, error) {
	if l.Backend != "nats" {
		return nil, nil
	}
	u := l.NATSURL
	if u == "" {
		u = DefaultNATSURL
	}
	buf := l.ReconnectBufferBytes
	if buf == 0 {
		buf = DefaultReconnectBuffer
	}
	node := l.node()
	// Once connected, the client never gives up: it reconnects forever and
	// buffers publishes (within buf) meanwhile, so that losing NATS stops
	// nothing and everything resumes when it returns.
	bus, err := latticenats.Connect(u, latticenats.Options{Prefix: l.Prefix, Node: node, Security: l.Security(),
		Key: key, AcceptedKeys: accepted, Logger: log,
		// The run telemetry no daemon acts on goes unsigned (marked
		// unverified where it is taken): the same list on every daemon.
		ObserveOnly: axocoatl.ObserveOnlyEvents()},
		natsgo.Name("axocoatl/"+node), natsgo.Timeout(natsConnectTimeout),
		natsgo.MaxReconnects(-1), natsgo.ReconnectWait(natsReconnectWait), natsgo.ReconnectBufSize(buf))
	if err != nil {
		return nil, fmt.Errorf("NATS at %s: %w", redact.URLs(u), err)
	}
	return bus, nil
}

// natsError is a failure to connect to NATS as a [*FieldError] at the key
// to fix (lattice.auth.… for refused credentials, lattice.tls for TLS,
// else lattice.nats_url) that still matches the lattice/nats sentinels
// ([latticenats.ErrBadCredentials], …) with errors.Is.
func (c *Config) natsError(err error) error {
	key := "lattice.nats_url"
	l := c.Lattice
	switch {
	case errors.Is(err, latticenats.ErrBadCredentials) && l.Auth.Method() != "":
		key = "lattice.auth." + l.Auth.Method()
	case errors.Is(err, latticenats.ErrTLSFailed) && l.TLS.Enabled():
		key = "lattice.tls"
	}
	var fe *FieldError
	if !errors.As(c.errorf(key, "%v", err), &fe) {
		return err
	}
	return &natsFieldError{FieldError: fe, err: err}
}

// natsFieldError is a [*FieldError] that unwraps to the error it reports.
type natsFieldError struct {
	*FieldError
	err error
}

func (e *natsFieldError) Unwrap() []error { return []error{e.FieldError, e.err} }

// node is lattice.node, or the host name with a random suffix (two daemons
// on one host must not share a name).
func (l LatticeConfig) node() string {
	if l.Node != "" {
		return l.Node
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "axocoatl"
	}
	host = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '-'
	}, host)
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%.40s-%x", host, b)
}

// MCPReady reports whether every MCP server has finished its first connect
// attempt (successful or not, each bounded by its timeout); true when there
// are none. Until then, agents run without those servers' tools.
func (rt *Runtime) MCPReady() bool {
	if rt.mcpReady == nil {
		return true
	}
	select {
	case <-rt.mcpReady:
		return true
	default:
		return false
	}
}

// OAuthCallbackPath is the daemon's route the authorization servers of
// mcp_servers with oauth send the user back to.
const OAuthCallbackPath = mcpclient.CallbackPath

// OAuthRedirectURL is server.public_url + [OAuthCallbackPath]: the
// redirect of the mcp_servers whose oauth sets no redirect_url. Empty
// when the public URL is not known.
func (c *Config) OAuthRedirectURL() string {
	if c.Server.PublicURL == "" {
		return ""
	}
	return strings.TrimRight(c.Server.PublicURL, "/") + OAuthCallbackPath
}

// OAuthTokens is the store of the mcp_servers' OAuth tokens: files in
// data_dir/mcp-oauth sealed with server.oauth_token_key; nil without a key.
func (c *Config) OAuthTokens() (mcpclient.TokenStore, error) {
	if c.Server.OAuthTokenKey.IsZero() {
		return nil, nil
	}
	return mcpclient.NewFileTokenStore(filepath.Join(c.Server.DataDir, "mcp-oauth"), c.Server.OAuthTokenKey)
}

// MCPStatus reports each MCP server ([mcpclient.Module.Status]; nil when
// there are none).
func (rt *Runtime) MCPStatus() []mcpclient.ServerStatus {
	if rt.MCPClient == nil {
		return nil
	}
	return rt.MCPClient.Status()
}

// ToolInfo is a registered tool as an operator sees it.
type ToolInfo struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Server is the MCP server (or other source) the tool comes from; ""
	// for a host's own tools.
	Server string `json:"server,omitempty"`
	// ServerState is "connected", "disconnected" or (an MCP server whose
	// OAuth wants a user to log in) "needs login" for an MCP server's
	// tool, "connected" or "disconnected" for a remote A2A agent's
	// (connected: its card was read), "" otherwise.
	ServerState string `json:"server_state,omitempty"`
	// Agents are this daemon's agents whose tools: allow-list admits the
	// tool (another daemon's agents run there, with its tools).
	Agents []string `json:"agents"`
}

// Tools lists every registered tool ([axocoatl.Engine.Tools]) with its source, that source's state
// and the agents that may call it, sorted by name.
func (rt *Runtime) Tools() []ToolInfo {
	states := map[string]string{}
	for _, s := range rt.MCPStatus() {
		states[s.Name] = "disconnected"
		if s.Connected {
			states[s.Name] = "connected"
		} else if s.NeedsLogin {
			states[s.Name] = "needs login"
		}
	}
	a2aStates := map[string]string{}
	if rt.A2ARemote != nil {
		for _, s := range rt.A2ARemote.Status() {
			a2aStates[s.Tool] = "disconnected"
			if s.Resolved {
				a2aStates[s.Tool] = "connected"
			}
		}
	}
	agents := rt.Engine.Agents()
	tools := rt.Engine.Tools()
	out := make([]ToolInfo, 0, len(tools))
	for _, t := range tools {
		state, remote := a2aStates[t.Name]
		if !remote {
			state = states[t.Server]
		}
		info := ToolInfo{Name: t.Name, Description: t.Description, Server: t.Server, ServerState: state, Agents: []string{}}
		for _, a := range agents {
			// Another daemon's agent runs there, with that daemon's tools.
			if a.Node == "" && a.AllowsTool(t.Name) {
				info.Agents = append(info.Agents, a.ID)
			}
		}
		out = append(out, info)
	}
	return out
}

// moduleEvents lists the event types the modules declare.
func moduleEvents(ms ...axocoatl.EventDeclarer) []string {
	var types []string
	for _, m := range ms {
		for t := range m.Events() {
			types = append(types, t)
		}
	}
	return types
}
