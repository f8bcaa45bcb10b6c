package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/builtin"
	"github.com/axocoatl/axocoatl-go/lattice"
	latticenats "github.com/axocoatl/axocoatl-go/lattice/nats"
)

// daemon is an Engine booted from a Config. Module wiring files reach the
// config, the logger and the Engine through it.
type daemon struct {
	cfg    *Config
	log    *slog.Logger
	engine *axocoatl.Engine
	// bus is closed after the Engine when the daemon made it (NATS).
	bus lattice.Bus
	// approvals connects the WebSocket stream to the approval module; its
	// start hook sets the funcs. Zero: no approvals (ready lists none,
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

// module is how a protocol module plugs into the daemon. Each has one
// wiring file (mcpclient.go, mcpserver.go, a2a.go, dashboard.go) holding
// its config section and a constructor listed in daemonModules. Every hook
// is optional.
type module struct {
	name string
	// start runs after the agents are registered, for `serve` and for
	// `mcp serve` alike: connect, register tools, d.engine.Use(ctx, m).
	// Whatever it starts must stop in Engine.Close (use a Module).
	start func(ctx context.Context, d *daemon) error
	// routes mounts HTTP handlers (serve only) with m.public / m.private.
	routes func(d *daemon, m *mux) error
	// doctor adds checks to `axocoatl doctor` (no Engine is booted).
	doctor func(ctx context.Context, cfg *Config, r *doctorReport)
}

// daemonModules lists the modules in start order: tool providers first,
// then the doors that expose agents.
func daemonModules() []module {
	return []module{
		mcpClientModule(),
		mcpServerModule(),
		a2aModule(),
		dashboardModule(),
	}
}

// bootEngine builds the Engine: the agents with their providers, then every
// module's start hook. On error nothing is left running.
func bootEngine(ctx context.Context, cfg *Config, log *slog.Logger) (*daemon, error) {
	bus, err := openBus(cfg.Lattice)
	if err != nil {
		return nil, cfg.doc.Errorf("lattice.nats_url", "%v", err)
	}
	eng := axocoatl.New(axocoatl.Options{Logger: log, Bus: bus})
	d := &daemon{cfg: cfg, log: log, engine: eng, bus: bus}
	fail := func(err error) (*daemon, error) {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return nil, errors.Join(err, d.close(closeCtx))
	}
	for i, spec := range cfg.Agents {
		kind := spec.Provider
		if kind == "" {
			kind = provider.Echo
		}
		model, err := builtin.New(kind, cfg.Providers[kind])
		if err != nil {
			return fail(cfg.doc.Errorf(fmt.Sprintf("agents[%d].provider", i), "%v", err))
		}
		if err := eng.AddAgent(spec, model); err != nil {
			return fail(cfg.doc.Errorf(fmt.Sprintf("agents[%d]", i), "%v", err))
		}
	}
	for _, m := range daemonModules() {
		if m.start == nil {
			continue
		}
		if err := m.start(ctx, d); err != nil {
			return fail(fmt.Errorf("%s: %w", m.name, err))
		}
	}
	return d, nil
}

// close stops the Engine, letting in-flight runs finish within ctx, then
// the bus the daemon opened (the Engine does not close a bus passed in).
func (d *daemon) close(ctx context.Context) error {
	err := d.engine.Close(ctx)
	if d.bus != nil {
		err = errors.Join(err, d.bus.Close())
	}
	return err
}

// natsConnectTimeout bounds dialing NATS at boot.
const natsConnectTimeout = 5 * time.Second

// openBus returns the NATS bus when the config asks for it; nil means the
// Engine's own in-memory bus.
func openBus(l LatticeConfig) (lattice.Bus, error) {
	if l.Backend != "nats" {
		return nil, nil
	}
	u := l.NATSURL
	if u == "" {
		u = DefaultNATSURL
	}
	bus, err := latticenats.Connect(u, latticenats.Options{Prefix: l.Prefix},
		natsgo.Name("axocoatl"), natsgo.Timeout(natsConnectTimeout))
	if err != nil {
		return nil, fmt.Errorf("NATS at %s: %w", redactURLs(u), err)
	}
	return bus, nil
}

// redactURLs hides credentials in a comma-separated URL list: passwords,
// and a user name without a password, which is how NATS URLs carry a token
// (nats://TOKEN@host).
func redactURLs(list string) string {
	parts := strings.Split(list, ",")
	for i, p := range parts {
		if u, err := url.Parse(strings.TrimSpace(p)); err == nil {
			if _, hasPassword := u.User.Password(); u.User != nil && !hasPassword && u.User.Username() != "" {
				u.User = url.User("xxxxx")
			}
			parts[i] = u.Redacted()
		} else {
			parts[i] = "(unparsable URL)"
		}
	}
	return strings.Join(parts, ",")
}
