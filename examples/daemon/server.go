package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"sync/atomic"
	"syscall"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/config"
	"github.com/axocoatl/axocoatl-go/examples/daemon/dashboard"
	"github.com/axocoatl/axocoatl-go/lattice"
)

// serveHooks let tests and benchmarks observe a running server.
type serveHooks struct {
	// booted is called with the daemon and its router before serving.
	booted func(d *daemon, m *mux)
	// listening is called once the listener is bound and the daemon is
	// ready, with the address actually bound (useful with port 0).
	listening func(addr net.Addr)
}

// daemon is an Engine booted from a Config with its modules (config.Build),
// plus what the daemon's own routes need.
type daemon struct {
	cfg    *config.Config
	log    *slog.Logger
	rt     *config.Runtime
	engine *axocoatl.Engine
	// approvals connects the WebSocket stream to the approval module
	// (tests may put their own). Zero: no approvals (ready lists none,
	// approve commands get an error frame).
	approvals approvalHooks
}

// approvalHooks are what the event stream needs from the approval module.
type approvalHooks struct {
	// Pending lists the pending approvals for the ready frame, each as
	// its JSON shape (the ApprovalRequested payload).
	Pending func(ctx context.Context) []any
	// Resolve takes a decision ("allow" | "deny", remember "once" |
	// "always") from a WebSocket client. Its error text is sent back to
	// the client, so it must not contain secrets.
	Resolve func(ctx context.Context, approvalID, decision, remember string) error
}

// boot builds the Engine and its modules from cfg.
func boot(ctx context.Context, cfg *config.Config, log *slog.Logger) (*daemon, error) {
	version, _, _ := buildVersion()
	rt, err := cfg.Build(ctx, config.BuildOptions{Logger: log, Version: version})
	if err != nil {
		return nil, err
	}
	gate := rt.Approval
	return &daemon{cfg: cfg, log: log, rt: rt, engine: rt.Engine, approvals: approvalHooks{
		Pending: func(context.Context) []any {
			var out []any
			for _, p := range gate.Pending() {
				out = append(out, p)
			}
			return out
		},
		Resolve: func(ctx context.Context, id, decision, remember string) error {
			return gate.Resolve(ctx, id, decision, remember, "websocket")
		},
	}}, nil
}

// close stops the Engine, letting in-flight runs finish within ctx.
func (d *daemon) close(ctx context.Context) error { return d.rt.Close(ctx) }

// serve runs the daemon until ctx ends, then shuts down gracefully:
// the listener closes, streams end, in-flight requests and runs get
// Server.ShutdownGrace to finish.
func serve(ctx context.Context, cfg *config.Config, log *slog.Logger, hooks serveHooks) error {
	if err := cfg.CheckListen(); err != nil {
		return err
	}
	if cfg.Server.APIToken.IsZero() && !config.IsLoopback(cfg.Server.Addr) {
		log.Warn("serving WITHOUT authentication on a non-loopback address (server.allow_unauthenticated)", "addr", cfg.Server.Addr)
	}
	start := time.Now()
	// Listen first: a taken port fails before any agent or MCP child
	// starts, and the bound address (port 0) is known to the modules.
	ln, err := net.Listen("tcp", cfg.Server.Addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("listen: %s is already in use by another process: choose another address with --addr or AXOCOATL_ADDR (or server.addr)", cfg.Server.Addr)
	} else if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	cfg.SetListenAddr(ln.Addr().String())
	d, err := boot(ctx, cfg, log)
	if err != nil {
		ln.Close()
		return err
	}
	m, stopHandlers, ready, err := newHandler(d)
	if err != nil {
		ln.Close()
		return errors.Join(err, closeWithin(d, cfg.Server.ShutdownGrace))
	}
	srv := &http.Server{
		Handler:           m,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	cut := newIdleCutter(writeTimeout(cfg))
	defer cut.stop()
	srv.ConnState = cut.connState
	if hooks.booted != nil {
		hooks.booted(d, m)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	ready.Store(true)
	base := "http://" + ln.Addr().String()
	if cfg.Server.PublicURL != "" {
		base = cfg.Server.PublicURL
	}
	log.Info("axocoatl ready", "addr", ln.Addr().String(), "agents", len(cfg.Agents), "config", cfg.Source,
		"auth", !cfg.Server.APIToken.IsZero(), "startup", time.Since(start).Round(time.Microsecond),
		"dashboard", base+"/", "mcp", base+"/mcp", "a2a_card", base+"/.well-known/agent-card.json")
	if hooks.listening != nil {
		hooks.listening(ln.Addr())
	}

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	ready.Store(false)
	log.Info("shutting down", "grace", cfg.Server.ShutdownGrace)
	grace, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.Server.ShutdownGrace)
	defer cancel()
	// End the WebSocket streams and wait for their close frames (Shutdown
	// does not wait for hijacked connections) while Shutdown closes the
	// listener and waits for in-flight requests.
	streamsDone := make(chan struct{})
	go func() { stopHandlers(grace); close(streamsDone) }()
	shutdownErr := srv.Shutdown(grace)
	<-streamsDone
	if serveErr == nil {
		serveErr = <-served
	}
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	closeErr := d.close(grace)
	if errors.Is(shutdownErr, context.DeadlineExceeded) {
		shutdownErr = fmt.Errorf("requests still running after the %s grace period were cut off", cfg.Server.ShutdownGrace)
	}
	return errors.Join(serveErr, shutdownErr, closeErr)
}

func closeWithin(d *daemon, grace time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	return d.close(ctx)
}

// pathParam is a ServeMux path segment ({id}), :id for httprouter.
var pathParam, restVerb = regexp.MustCompile(`\{(\w+)\}`), regexp.MustCompile(`:\w+$`)

// newHandler builds the router with the daemon's own routes and every
// module's door. stop ends long-lived streams (waiting within its ctx for
// their close frames) and the metrics subscriber.
func newHandler(d *daemon) (m *mux, stop func(context.Context), ready *atomic.Bool, err error) {
	cfg := d.cfg
	m = newMux(d.engine, cfg.Server.BodyTimeout, d.log)
	ready = new(atomic.Bool)
	met, err := newMetrics(d.engine.Bus(), d.rt.Egress.Collector())
	if err != nil {
		return nil, nil, nil, err
	}
	// The ready frame's history: what a new tab shows before live events.
	hist, err := lattice.NewHistory(d.engine.Bus(), 500, 16<<10)
	if err != nil {
		met.close()
		return nil, nil, nil, err
	}
	streamCtx, endStreams := context.WithCancel(context.Background())
	a := &api{d: d, ready: ready, timeout: cfg.Server.RequestTimeout}
	ws := &stream{d: d, ctx: streamCtx, history: hist, writeTimeout: writeTimeout(cfg)}
	stop = func(ctx context.Context) {
		ws.shutdown(ctx, endStreams)
		_ = d.rt.MCPServer.Shutdown(ctx) // ends the /mcp GET streams once the calls are answered
		met.close()
		hist.Close()
	}
	page := dashboard.Handler()
	errs := []error{
		a.mount(m),
		m.private(http.MethodGet, "/metrics", met.handler()),
		// The stream checks the token itself: browsers cannot set headers
		// on a WebSocket and pass ?token= instead.
		m.mount(route{http.MethodGet, "/api/events", false}, ws),
		m.public(http.MethodGet, "/", page),
		m.public(http.MethodHead, "/", page),
	}
	mounted := map[string]bool{}
	for _, r := range d.rt.Routes() { // the modules' doors, guarded by the Engine
		// httprouter reads a colon as a parameter: the A2A REST verbs
		// (message:send, message:stream) share one route, message:verb; the
		// handler routes by the real path.
		p := pathParam.ReplaceAllString(restVerb.ReplaceAllString(r.Pattern, ":verb"), ":$1")
		if !mounted[r.Method+" "+p] {
			mounted[r.Method+" "+p] = true
			errs = append(errs, m.mount(route{r.Method, p, r.Public}, r.Handler))
		}
	}
	if err := errors.Join(errs...); err != nil {
		stop(context.Background()) // nothing is served yet: no stream to wait for
		return nil, nil, nil, err
	}
	return m, stop, ready, nil
}
