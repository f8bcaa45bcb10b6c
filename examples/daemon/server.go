package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"syscall"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/config"
)

// serveHooks let tests and benchmarks observe a running server.
type serveHooks struct {
	// booted is called with the daemon before serving.
	booted func(d *daemon)
	// listening is called once the listener is bound and the daemon is
	// ready, with the address actually bound (useful with port 0).
	listening func(addr net.Addr)
}

// daemon is an Engine booted from a Config with its modules (config.Build),
// the HTTP API among them.
type daemon struct {
	cfg    *config.Config
	log    *slog.Logger
	rt     *config.Runtime
	engine *axocoatl.Engine
}

// boot builds the Engine and its modules from cfg.
func boot(ctx context.Context, cfg *config.Config, log *slog.Logger) (*daemon, error) {
	return bootWith(ctx, cfg, log, false)
}

// bootWith is boot; shared builds a process that shares the data dir with
// its lock holder (config.BuildOptions.SharedDataDir).
func bootWith(ctx context.Context, cfg *config.Config, log *slog.Logger, shared bool) (*daemon, error) {
	version, _, _ := buildVersion()
	rt, err := cfg.Build(ctx, config.BuildOptions{Logger: log, Version: version, SharedDataDir: shared})
	if err != nil {
		return nil, err
	}
	return &daemon{cfg: cfg, log: log, rt: rt, engine: rt.Engine}, nil
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
	if !cfg.Server.Authenticated() && !config.IsLoopback(cfg.Server.Addr) {
		log.Warn("serving WITHOUT authentication on a non-loopback address (server.allow_unauthenticated)", "addr", cfg.Server.Addr)
	}
	start := time.Now()
	// The data dir first: a second daemon on it fails at once, naming the
	// first, instead of timing out on egress.db.
	lock, err := cfg.LockDataDir()
	if err != nil {
		return err
	}
	defer lock.Close()
	// Listen next: a taken port fails before any agent or MCP child
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
	h, err := d.rt.Handler()
	if err != nil {
		ln.Close()
		return errors.Join(err, closeWithin(d, cfg.Server.ShutdownGrace))
	}
	srv := d.httpServer(h)
	if hooks.booted != nil {
		hooks.booted(d)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	base := baseURL(cfg, ln.Addr())
	d.rt.Approval.DeclareChannels(approvalsAt(base))
	if hooks.listening != nil {
		hooks.listening(ln.Addr())
	}

	// "axocoatl ready" says what /health/ready says: agents booted and
	// every MCP server's first connect ended (each bounded by its timeout;
	// requests are served meanwhile, and runs wait for the servers their
	// agent may use).
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	case <-d.rt.MCPReadyChan():
		log.Info("axocoatl ready", "addr", ln.Addr().String(), "agents", len(cfg.Agents), "config", cfg.Source,
			"auth", cfg.Server.Authenticated(), "conversations", d.rt.ConversationStore, "startup", time.Since(start).Round(time.Microsecond),
			"dashboard", base+"/", "mcp", base+"/mcp", "a2a_card", base+"/.well-known/agent-card.json")
		select {
		case <-ctx.Done():
		case serveErr = <-served:
		}
	}
	log.Info("shutting down", "grace", cfg.Server.ShutdownGrace)
	grace, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.Server.ShutdownGrace)
	defer cancel()
	// End the WebSocket and MCP streams and wait for their close frames
	// (Shutdown does not wait for hijacked connections or streams) while
	// Shutdown closes the listener and waits for in-flight requests.
	streamsDone := make(chan struct{})
	go func() { _ = d.rt.Shutdown(grace); close(streamsDone) }()
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

// httpServer is the daemon's HTTP server for h (the Runtime's handler).
func (d *daemon) httpServer(h http.Handler) *http.Server {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelWarn),
	}
	d.rt.Engine.ConfigureServer(srv) // a client that stops reading a small answer is cut too; silent connections do not hold the shutdown
	return srv
}

// baseURL is where the daemon's pages are reached: the public URL, else
// the bound address.
func baseURL(cfg *config.Config, addr net.Addr) string {
	if cfg.Server.PublicURL != "" {
		return cfg.Server.PublicURL
	}
	return "http://" + addr.String()
}

// approvalsAt names the HTTP channel that answers approvals, for the
// approval module and the startup log.
func approvalsAt(base string) string {
	return "the dashboard " + base + "/ and the approvals API " + base + "/api/approvals"
}

func closeWithin(d *daemon, grace time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	return d.close(ctx)
}
