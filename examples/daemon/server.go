package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// serveHooks let tests and benchmarks observe a running server.
type serveHooks struct {
	// booted is called with the daemon and its router before serving.
	booted func(d *daemon, m *mux)
	// listening is called once the listener is bound and the daemon is
	// ready, with the address actually bound (useful with port 0).
	listening func(addr net.Addr)
}

// serve runs the daemon until ctx ends, then shuts down gracefully:
// the listener closes, streams end, in-flight requests and runs get
// Server.ShutdownGrace to finish.
func serve(ctx context.Context, cfg *Config, log *slog.Logger, hooks serveHooks) error {
	if err := cfg.checkListen(); err != nil {
		return err
	}
	if cfg.Server.APIToken.IsZero() && !isLoopback(cfg.Server.Addr) {
		log.Warn("serving WITHOUT authentication on a non-loopback address (server.allow_unauthenticated)", "addr", cfg.Server.Addr)
	}
	start := time.Now()
	// Listen first: a taken port fails before any agent or MCP child
	// starts, and the bound address (port 0) is known to the modules.
	ln, err := net.Listen("tcp", cfg.Server.Addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if !cfg.publicURLSet {
		cfg.Server.PublicURL = defaultPublicURL(ln.Addr().String())
	}
	d, err := bootEngine(ctx, cfg, log)
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
	if hooks.booted != nil {
		hooks.booted(d, m)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	ready.Store(true)
	log.Info("axocoatl ready", "addr", ln.Addr().String(), "agents", len(cfg.Agents), "config", cfg.Source,
		"auth", !cfg.Server.APIToken.IsZero(), "startup", time.Since(start).Round(time.Microsecond))
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

// newHandler builds the router with the daemon's own routes and every
// module's. stop ends long-lived streams (waiting within its ctx for their
// close frames) and the metrics subscriber.
func newHandler(d *daemon) (m *mux, stop func(context.Context), ready *atomic.Bool, err error) {
	cfg := d.cfg
	m = newMux(cfg.Server.APIToken, cfg.Server.AllowedOrigins, d.log)
	m.hosts = newHostGuard(cfg.Server)
	m.bodyTimeout = cfg.Server.BodyTimeout
	ready = new(atomic.Bool)
	met, err := newMetrics(d.engine.Bus())
	if err != nil {
		return nil, nil, nil, err
	}
	streamCtx, endStreams := context.WithCancel(context.Background())
	a := &api{d: d, ready: ready, timeout: cfg.Server.RequestTimeout, bodyTimeout: cfg.Server.BodyTimeout}
	ws := &stream{d: d, auth: m.auth, origins: cfg.Server.AllowedOrigins, ctx: streamCtx}
	stop = func(ctx context.Context) { ws.shutdown(ctx, endStreams); met.close() }
	errs := []error{
		a.mount(m),
		m.private(http.MethodGet, "/metrics", met.handler()),
		// Private, but the stream checks the token itself: browsers
		// cannot set headers on a WebSocket and pass ?token= instead.
		m.mount(route{http.MethodGet, "/api/events", false}, ws),
	}
	for _, mod := range daemonModules() {
		if mod.routes != nil {
			if err := mod.routes(d, m); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", mod.name, err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		stop(context.Background()) // nothing is served yet: no stream to wait for
		return nil, nil, nil, err
	}
	return m, stop, ready, nil
}
