package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/signal"
	"slices"
	"syscall"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/mcpserver"
)

// Wiring of the mcpserver module: the agents as agent_<id> MCP tools, over
// streamable HTTP at /mcp (serve) and over stdio (`axocoatl mcp serve`).

// MCPServerSection is the mcpserver part of Config (inline): the optional
// `mcp_server:` section, every key of mcpserver.Config (name, version,
// instructions, allowed_origins, progress_interval, session_timeout,
// max_message_bytes). server.allowed_origins apply to /mcp as well.
type MCPServerSection struct {
	MCPServer mcpserver.Config `yaml:"mcp_server"`
}

func mcpServerModule() module {
	return module{name: "mcpserver", routes: mountMCP}
}

// newMCPServer builds the MCP server over the daemon's Engine; Engine.Close
// closes its sessions.
func newMCPServer(ctx context.Context, d *daemon) (*mcpserver.Server, error) {
	cfg := d.cfg.MCPServer
	if cfg.Version == "" {
		cfg.Version, _, _ = buildVersion()
	}
	cfg.AllowedOrigins = append(slices.Clone(d.cfg.Server.AllowedOrigins), cfg.AllowedOrigins...)
	cfg.Logger = d.log
	if cfg.BodyTimeout == 0 {
		cfg.BodyTimeout = d.cfg.Server.BodyTimeout // as the mux bounds /api bodies
	}
	srv, err := mcpserver.New(d.engine, cfg)
	if err != nil {
		return nil, err
	}
	if err := d.engine.Use(ctx, mcpSessions{srv}); err != nil {
		return nil, errors.Join(err, srv.Close())
	}
	return srv, nil
}

// mcpSessions closes the server's sessions when the Engine stops.
type mcpSessions struct{ srv *mcpserver.Server }

func (mcpSessions) Name() string                                  { return "mcpserver" }
func (mcpSessions) Start(context.Context, *axocoatl.Engine) error { return nil }
func (m mcpSessions) Stop(context.Context) error                  { return m.srv.Close() }

// mountMCP serves MCP streamable HTTP at /mcp, behind the API token when
// one is set. The server checks Origin itself (same host, or
// server.allowed_origins / mcp_server.allowed_origins).
//
// GET (the optional standalone SSE stream) is not mounted: the router
// answers 405, which the spec allows and clients handle. That stream only
// carries what the server says outside of a call, here nothing but
// tools/list_changed, and the daemon's agents are fixed at boot; progress
// and results travel on each POST's own stream. An idle GET stream would
// also hold http.Server.Shutdown for the whole grace period.
func mountMCP(d *daemon, m *mux) error {
	srv, err := newMCPServer(context.Background(), d)
	if err != nil {
		return err
	}
	var errs []error
	for _, method := range []string{http.MethodPost, http.MethodDelete} {
		errs = append(errs, m.private(method, "/mcp", srv))
	}
	return errors.Join(errs...)
}

// runMCP is `axocoatl mcp serve [--config PATH]`: boot the agents and the
// configured modules, then speak MCP on stdin/stdout until stdin ends (the
// requests already read are answered first) or a signal arrives. Logs go
// to stderr only: stdout carries nothing but protocol.
func runMCP(ctx context.Context, c *cli, args []string) int {
	const synopsis = "mcp serve [--config PATH]"
	if len(args) == 0 || args[0] != "serve" {
		if len(args) > 0 && isHelp(args[0]) {
			fmt.Fprintf(c.stdout, "usage: axocoatl %s\n\nSpeaks MCP over stdio: one tool agent_<id> per agent.\n", synopsis)
			return exitOK
		}
		fmt.Fprintf(c.stderr, "usage: axocoatl %s\n", synopsis)
		return exitUsage
	}
	var cf configFlags
	fs := newFlags(c, "mcp serve", synopsis, &cf, false)
	if code, ok := parseFlags(fs, args[1:]); !ok {
		return code
	}
	cfg, ok := c.load(ctx, cf)
	if !ok {
		return exitFail
	}
	log := cfg.newLogger(c.stderr)
	// A client that goes away closes our stdout: without this, the first
	// write to it kills the process with SIGPIPE before anything shuts
	// down; with it, the write fails (EPIPE), the session ends and the
	// Engine closes as on any other exit.
	signal.Ignore(syscall.SIGPIPE)
	d, err := bootEngine(ctx, cfg, log)
	if err != nil {
		printErrors(c.stderr, err)
		return exitFail
	}
	code := exitOK
	srv, err := newMCPServer(ctx, d)
	if err == nil {
		log.Info("axocoatl mcp serve ready", "agents", len(cfg.Agents), "config", cfg.Source)
		err = srv.ServeStdio(ctx, c.stdin, c.stdout)
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			err = nil // a signal: the normal way to stop
		}
	}
	if err != nil {
		printErrors(c.stderr, err)
		code = exitFail
	}
	grace := cfg.Server.ShutdownGrace
	if grace <= 0 {
		grace = 30 * time.Second
	}
	if err := closeWithin(d, grace); err != nil {
		printErrors(c.stderr, err)
		code = exitFail
	}
	return code
}
