package config

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axocoatl/axocoatl-go/a2aremote"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/builtin"
	"github.com/axocoatl/axocoatl-go/internal/clustersig"
	"github.com/axocoatl/axocoatl-go/internal/redact"
	latticenats "github.com/axocoatl/axocoatl-go/lattice/nats"
	"github.com/axocoatl/axocoatl-go/mcpclient"
)

// Report is what [Config.Doctor] found: one line per check, and the hosts that
// receive requests. Nothing in it contains a secret (hosts, never URLs with
// credentials or header values).
type Report struct {
	mu     sync.Mutex
	lines  []string
	egress map[string][]string // host → who sends there
	failed bool
}

// Failed reports whether any check failed.
func (r *Report) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

func (r *Report) ok(check, detail string)   { r.add("ok  ", check, detail, false) }
func (r *Report) fail(check, detail string) { r.add("FAIL", check, detail, true) }
func (r *Report) warn(check, detail string) { r.add("warn", check, detail, false) }

func (r *Report) add(mark, check, detail string, failed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, fmt.Sprintf("%s %s: %s", mark, check, detail))
	r.failed = r.failed || failed
}

// addEgress records that who sends requests to host (host[:port]).
func (r *Report) addEgress(host, who string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.egress == nil {
		r.egress = map[string][]string{}
	}
	if !slices.Contains(r.egress[host], who) {
		r.egress[host] = append(r.egress[host], who)
	}
}

// Print writes the checks, then exactly which hosts receive egress.
func (r *Report) Print(w io.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.lines {
		fmt.Fprintln(w, l)
	}
	fmt.Fprintln(w)
	if len(r.egress) == 0 {
		fmt.Fprintln(w, "egress: none (this config sends no requests off this machine's processes)")
		return
	}
	fmt.Fprintln(w, "egress: these hosts receive requests:")
	hosts := make([]string, 0, len(r.egress))
	for h := range r.egress {
		hosts = append(hosts, h)
	}
	slices.Sort(hosts)
	for _, h := range hosts {
		fmt.Fprintf(w, "  %s  (%s)\n", h, strings.Join(r.egress[h], ", "))
	}
}

// Doctor checks what a config will reach without booting an Engine: that
// the listen address can be bound, every provider an agent uses (one cheap
// authenticated call each), the lattice, where conversations are kept
// (without opening the store: a running daemon holds it), every MCP server (connect and
// list tools), every remote A2A agent (read and parse its card) and every
// webhook (resolve and connect; see [Config.DoctorWith]),
// concurrently; and it records where egress goes.
func (c *Config) Doctor(ctx context.Context) *Report {
	return c.DoctorWith(ctx, DoctorOptions{})
}

// DoctorWith is [Config.Doctor] with [DoctorOptions]; every webhook's host must resolve and
// accept a connection, and an unsigned webhook is a warning.
func (c *Config) DoctorWith(ctx context.Context, opts DoctorOptions) *Report {
	r := &Report{}
	r.ok("config", fmt.Sprintf("%s (%d agents)", c.Source, len(c.Agents)))
	if err := c.CheckListen(); err != nil {
		r.fail("listen", err.Error())
	} else if ln, err := net.Listen("tcp", c.Server.Addr); err != nil {
		r.fail("listen", fmt.Sprintf("%s cannot be bound: %v (choose another with --addr or AXOCOATL_ADDR)", c.Server.Addr, err))
	} else {
		ln.Close()
		r.ok("listen", c.Server.Addr+authNote(c))
	}
	checkProviders(ctx, c, r)
	checkLattice(ctx, c, r)
	c.conversationsReport(r)
	checkMCPServers(ctx, c, r)
	checkA2AAgents(ctx, c, r)
	checkWebhooks(ctx, c, r, opts)
	checkTelemetry(ctx, c, r)
	return r
}

// doctorDialTimeout bounds doctor's connection to the collector.
const doctorDialTimeout = 3 * time.Second

// checkTelemetry connects to the collector spans go to (when telemetry
// exports) and records its host as egress; it sends no span.
func checkTelemetry(ctx context.Context, c *Config, r *Report) {
	t := c.Telemetry
	host := t.CollectorHost()
	if host == "" {
		return
	}
	r.addEgress(host, "telemetry (OTLP/HTTP spans)")
	d := net.Dialer{Timeout: doctorDialTimeout}
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		r.fail("telemetry", fmt.Sprintf("collector %s cannot be reached: %v (spans would be dropped)", host, err))
		return
	}
	conn.Close()
	r.ok("telemetry", fmt.Sprintf("spans to %s over OTLP/HTTP, service %s, sample ratio %v", host, t.serviceName(), t.ratio()))
}

func authNote(cfg *Config) string {
	s := cfg.Server
	switch {
	case s.Auth.OAuth != nil:
		return fmt.Sprintf(" (API token, %d scoped tokens or a JWT of %s required)", len(s.Tokens), s.Auth.OAuth.Issuer)
	case len(s.Tokens) > 0:
		return fmt.Sprintf(" (API token or one of %d scoped tokens required)", len(s.Tokens))
	case s.APIToken.IsZero():
		return " (no API token)"
	}
	return " (API token required)"
}

// doctorTimeout bounds each provider probe.
const doctorTimeout = 10 * time.Second

// checkProviders probes every provider an agent uses with provider.Check
// (one cheap authenticated call), concurrently.
func checkProviders(ctx context.Context, cfg *Config, r *Report) {
	users := map[string][]string{}
	for _, a := range cfg.Agents {
		kind := a.Provider
		if kind == "" {
			kind = provider.Echo
		}
		users[kind] = append(users[kind], a.ID)
	}
	kinds := make([]string, 0, len(users))
	for k := range users {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	var wg sync.WaitGroup
	for _, kind := range kinds {
		agents := strings.Join(users[kind], ", ")
		check := "provider " + kind
		if kind == provider.Echo {
			r.ok(check, "offline, no network (agents: "+agents+")")
			continue
		}
		pc := cfg.provider(kind)
		base := pc.BaseURL
		if base == "" {
			base = provider.DefaultBaseURL(kind)
		}
		u, err := url.Parse(base)
		if err != nil || u.Host == "" {
			r.fail(check, "base_url is not an absolute URL")
			continue
		}
		r.addEgress(u.Host, "provider "+kind+" for agents "+agents)
		// The key may come from the provider's variable (OPENAI_API_KEY, …).
		warning, err := provider.CheckKey(kind, pc)
		if err != nil {
			r.fail(check, err.Error())
			continue
		}
		if warning != "" {
			r.warn(check, warning)
		}
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, doctorTimeout)
			defer cancel()
			if pc.Timeout == 0 || pc.Timeout > doctorTimeout {
				pc.Timeout = doctorTimeout
			}
			// Check's errors never contain the key (provider.Error).
			if err := builtin.Check(pctx, kind, pc); err != nil {
				r.fail(check, fmt.Sprintf("%s: %v", u.Host, err))
				return
			}
			r.ok(check, fmt.Sprintf("%s answers (agents: %s)", u.Host, agents))
		})
	}
	wg.Wait()
	for kind := range cfg.Providers {
		if _, used := users[kind]; !used {
			r.warn("provider "+kind, "configured but no agent uses it")
		}
	}
}

// checkLattice dials NATS when the lattice runs on it.
func checkLattice(ctx context.Context, cfg *Config, r *Report) {
	if cfg.Lattice.Backend != "nats" {
		r.ok("lattice", "in-memory (this process only)")
		return
	}
	u := cfg.Lattice.NATSURL
	if u == "" {
		u = DefaultNATSURL
	}
	for _, p := range strings.Split(u, ",") {
		if pu, err := url.Parse(strings.TrimSpace(p)); err == nil && pu.Host != "" {
			r.addEgress(pu.Host, "lattice on NATS")
		}
	}
	if cfg.Cluster.Key.IsZero() {
		r.warn("cluster key", "cluster.key is not set: the daemons' NATS messages are not signed; any NATS user who may publish on the lattice's subjects can resolve approvals, run agents and announce daemons (set cluster.key or AXOCOATL_CLUSTER_KEY)")
	} else {
		ids := make([]string, 0, len(cfg.Cluster.AcceptedKeys))
		for _, k := range cfg.Cluster.AcceptedKeys {
			ids = append(ids, clustersig.KeyID(k.Reveal()))
		}
		detail := "messages signed with key id " + clustersig.KeyID(cfg.Cluster.Key.Reveal())
		if len(ids) > 0 {
			detail += ", also accepting key ids " + strings.Join(ids, ", ")
		}
		r.ok("cluster key", detail+" (every daemon must hold the same key, or accept it)")
	}
	bus, err := cfg.Lattice.Open()
	if err != nil {
		// What failed, in words (credentials, TLS, unreachable), without
		// the package's prefix.
		r.fail("lattice", strings.Replace(err.Error(), "lattice/nats: connect: ", "", 1))
		return
	}
	defer bus.Close()
	how := securityNote(cfg.Lattice.Security(), u)
	if len(cfg.Webhooks) == 0 {
		r.ok("lattice", "NATS at "+redact.URLs(u)+" connected"+how)
		return
	}
	// Webhooks on a NATS lattice wait in JetStream: the daemon does not
	// start without it.
	nb, ok := bus.(*latticenats.Bus)
	if !ok {
		r.ok("lattice", "NATS at "+redact.URLs(u)+" connected"+how)
		return
	}
	js, err := jetstream.New(nb.Conn())
	if err == nil {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = js.AccountInfo(actx)
		cancel()
	}
	if err != nil {
		r.fail("lattice", fmt.Sprintf("NATS at %s connected, but its JetStream does not answer (%s): webhooks on a NATS lattice need JetStream: start nats-server with -js",
			redact.URLs(u), redact.URLs(err.Error())))
		return
	}
	r.ok("lattice", "NATS at "+redact.URLs(u)+" connected"+how+", JetStream on (webhooks)")
}

// securityNote says how the lattice connection is secured: which way it
// authenticates (files by path, never a secret) and whether TLS is on.
func securityNote(s latticenats.Security, urls string) string {
	var parts []string
	if s.TLS.Enabled() || strings.Contains(urls, "tls://") {
		tls := "TLS"
		if s.TLS.CAFile != "" {
			tls += ", CA " + s.TLS.CAFile
		}
		if s.TLS.CertFile != "" {
			tls += ", client certificate " + s.TLS.CertFile
		}
		parts = append(parts, tls)
	}
	switch s.Auth.Method() {
	case "creds_file":
		parts = append(parts, "creds file "+s.Auth.CredsFile)
	case "nkey_seed_file":
		parts = append(parts, "nkey seed "+s.Auth.NKeySeedFile)
	case "user":
		parts = append(parts, "user "+s.Auth.User)
	case "token":
		parts = append(parts, "token")
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}

// checkMCPServers connects to every MCP server at once, lists its tools and
// records the hosts of the HTTP servers as egress.
func checkMCPServers(ctx context.Context, cfg *Config, r *Report) {
	scrub := cfg.Secrets()
	tokens, err := cfg.OAuthTokens()
	if err != nil {
		r.fail("mcp oauth tokens", err.Error())
	}
	var wg sync.WaitGroup
	for _, sc := range cfg.MCPServers {
		check := "mcp server " + sc.Name
		if u, err := url.Parse(sc.URL); err == nil && sc.URL != "" {
			r.addEgress(u.Host, check)
		}
		addLauncherEgress(cfg, sc, r)
		if sc.OAuth != nil && sc.OAuth.RedirectURL == "" {
			o := *sc.OAuth
			o.RedirectURL = cfg.OAuthRedirectURL()
			sc.OAuth = &o
		}
		wg.Go(func() {
			tools, err := mcpclient.CheckWithTokens(ctx, sc, scrub, tokens, nil)
			if err != nil {
				r.fail(check, strings.TrimPrefix(err.Error(), check+": "))
				return
			}
			// The transport and target, never env or header values (nor a
			// URL's userinfo, query or key-like path segments).
			r.ok(check, fmt.Sprintf("%s %s, %d tools: %s", sc.Transport(), sc.Target(), len(tools), strings.Join(tools, ", ")))
		})
	}
	wg.Wait()
}

// checkA2AAgents reads every remote A2A agent's card at once: reachable,
// parseable, which generation a call will speak; the card's host and the
// hosts its interfaces name are egress.
func checkA2AAgents(ctx context.Context, cfg *Config, r *Report) {
	scrub := cfg.Secrets()
	var wg sync.WaitGroup
	for _, ac := range cfg.A2AAgents {
		check := "a2a agent " + ac.Name
		if u, err := url.Parse(ac.URL); err == nil {
			r.addEgress(u.Host, check)
		}
		wg.Go(func() {
			info, err := a2aremote.Check(ctx, ac, scrub)
			if err != nil {
				r.fail(check, strings.TrimPrefix(err.Error(), check+": "))
				return
			}
			for _, h := range info.Hosts {
				r.addEgress(h, check)
			}
			// The redacted URL and the card's endpoints, never header values.
			r.ok(check, fmt.Sprintf("%s: card of %q read, speaks A2A %s (%s), tool %s",
				ac.Target(), info.Name, info.Generation, strings.Join(info.Interfaces, "; "), ac.ToolName()))
		})
	}
	wg.Wait()
}
