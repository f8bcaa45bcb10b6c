package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// runMCP is `axocoatl mcp serve [--config PATH] [--http ADDR]`: boot the
// agents and the configured modules, then speak MCP on stdin/stdout until
// stdin ends (the requests already read are answered first) or a signal
// arrives. Logs go to stderr only: stdout carries nothing but protocol.
// With --http (or server.mcp_serve_http) it also serves the daemon's HTTP
// routes there (the dashboard and the approvals API among them), under
// the same guard as `serve`: loopback unless server.api_token is set.
func runMCP(ctx context.Context, c *cli, args []string) int {
	const synopsis = "mcp serve [--config PATH] [--http ADDR] | mcp login [--config PATH] [--url DAEMON_URL] <server>"
	if len(args) > 0 && args[0] == "login" {
		return runMCPLogin(ctx, c, args[1:])
	}
	if len(args) == 0 || args[0] != "serve" {
		if len(args) > 0 && isHelp(args[0]) {
			fmt.Fprintf(c.stdout, "usage: axocoatl %s\n\nSpeaks MCP over stdio: one tool agent_<id> per agent.\n"+
				"--http ADDR also serves the dashboard and the approvals API on ADDR (loopback unless server.api_token is set).\n"+
				"mcp login <server> asks the running daemon to start the OAuth login of an mcp_servers entry, prints the URL to open and waits.\n", synopsis)
			return exitOK
		}
		fmt.Fprintf(c.stderr, "usage: axocoatl %s\n", synopsis)
		return exitUsage
	}
	var cf configFlags
	fs := newFlags(c, "mcp serve", synopsis, &cf, false)
	httpAddr := fs.String("http", "", "also serve the dashboard and the HTTP API (approvals) on this host:port, beside stdio (default: server.mcp_serve_http, else none)")
	if code, ok := parseFlags(fs, args[1:]); !ok {
		return code
	}
	cfg, ok := c.load(ctx, cf)
	if !ok {
		return exitFail
	}
	log := cfg.NewLogger(c.stderr)
	// A client that goes away closes our stdout: without this, the first
	// write to it kills the process with SIGPIPE before anything shuts
	// down; with it, the write fails (EPIPE), the session ends and the
	// Engine closes as on any other exit.
	signal.Ignore(syscall.SIGPIPE)
	addr := *httpAddr
	if addr == "" {
		addr = cfg.Server.MCPServeHTTP
	}
	var ln net.Listener
	if addr != "" {
		// The same rules as serve's server.addr: the guard's hosts and the
		// token follow from it.
		cfg.Server.Addr = addr
		if err := cfg.CheckListen(); err != nil {
			printErrors(c.stderr, err)
			return exitFail
		}
		var err error
		if ln, err = net.Listen("tcp", addr); err != nil {
			printErrors(c.stderr, fmt.Errorf("mcp serve --http: %w", err))
			return exitFail
		}
		cfg.SetListenAddr(ln.Addr().String())
	}
	// An MCP client starts one of these per window or session, beside a
	// daemon on the same data dir: it shares the remembered approvals and
	// leaves egress.db to the daemon (its webhook deliveries stay in
	// memory).
	d, err := bootWith(ctx, cfg, log, true)
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		printErrors(c.stderr, err)
		return exitFail
	}
	code := exitOK
	var srv *http.Server
	served := make(chan error, 1)
	if ln != nil {
		h, err := d.rt.Handler()
		if err != nil {
			ln.Close()
			printErrors(c.stderr, errors.Join(err, closeWithin(d, 5*time.Second)))
			return exitFail
		}
		srv = d.httpServer(h)
		go func() { served <- srv.Serve(ln) }()
		d.rt.Approval.DeclareChannels(approvalsAt(baseURL(cfg, ln.Addr())))
	} else {
		// Only the calling client's forms (and, on a shared lattice, the
		// other daemons) can answer: an approval nothing can answer is
		// denied at once rather than after approval.timeout.
		d.rt.Approval.DeclareChannels()
	}
	attrs := []any{"agents", len(cfg.Agents), "config", cfg.Source, "conversations", d.rt.ConversationStore}
	if ln != nil {
		attrs = append(attrs, "http", ln.Addr().String())
	}
	log.Info("axocoatl mcp serve ready", append(attrs, "approvals", approvalChannels(d))...)
	if chans, _ := d.rt.Approval.Channels(); len(chans) == 0 {
		log.Warn("approvals can be answered only by the calling MCP client's forms: a gated tool call from a client without form elicitation is denied at once; " +
			"run with --http 127.0.0.1:PORT (or set server.mcp_serve_http) to answer them on the dashboard, or share a NATS lattice with a daemon")
	}
	err = d.rt.MCPServer.ServeStdio(ctx, c.stdin, c.stdout)
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		err = nil // a signal: the normal way to stop
	}
	if err != nil {
		printErrors(c.stderr, err)
		code = exitFail
	}
	grace := cfg.Server.ShutdownGrace
	if grace <= 0 {
		grace = 30 * time.Second
	}
	if srv != nil {
		gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
		streamsDone := make(chan struct{})
		go func() { _ = d.rt.Shutdown(gctx); close(streamsDone) }()
		if err := srv.Shutdown(gctx); err != nil {
			printErrors(c.stderr, fmt.Errorf("mcp serve --http: %w", err))
		}
		<-streamsDone
		cancel()
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			printErrors(c.stderr, err)
			code = exitFail
		}
	}
	if err := closeWithin(d, grace); err != nil {
		printErrors(c.stderr, err)
		code = exitFail
	}
	return code
}

// approvalChannels says, for the startup log, where approvals can be
// answered.
func approvalChannels(d *daemon) string {
	chans, _ := d.rt.Approval.Channels()
	return strings.Join(append([]string{"the calling MCP client's forms (form elicitation, 2026-07-28 InputRequiredResult)"}, chans...), "; ")
}
