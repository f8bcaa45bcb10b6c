package main

import (
	"context"
	"errors"
	"fmt"
	"os/signal"
	"syscall"
	"time"
)

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
	log := cfg.NewLogger(c.stderr)
	// A client that goes away closes our stdout: without this, the first
	// write to it kills the process with SIGPIPE before anything shuts
	// down; with it, the write fails (EPIPE), the session ends and the
	// Engine closes as on any other exit.
	signal.Ignore(syscall.SIGPIPE)
	// An MCP client starts one of these per window or session, beside a
	// daemon on the same data dir: it shares the remembered approvals and
	// leaves egress.db to the daemon (its webhook deliveries stay in
	// memory).
	d, err := bootWith(ctx, cfg, log, true)
	if err != nil {
		printErrors(c.stderr, err)
		return exitFail
	}
	code := exitOK
	log.Info("axocoatl mcp serve ready", "agents", len(cfg.Agents), "config", cfg.Source, "conversations", d.rt.ConversationStore)
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
	if err := closeWithin(d, grace); err != nil {
		printErrors(c.stderr, err)
		code = exitFail
	}
	return code
}
