package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/builtin"
)

// doctorReport collects check results. Module doctor hooks add to it;
// nothing added may contain a secret (print hosts, never URLs with
// credentials or header values).
type doctorReport struct {
	mu     sync.Mutex
	lines  []string
	egress map[string][]string // host → who sends there
	failed bool
}

// ok records a passed check.
func (r *doctorReport) ok(check, detail string) { r.add("ok  ", check, detail, false) }

// fail records a failed check; doctor exits 1.
func (r *doctorReport) fail(check, detail string) { r.add("FAIL", check, detail, true) }

// warn records something worth knowing that does not fail.
func (r *doctorReport) warn(check, detail string) { r.add("warn", check, detail, false) }

func (r *doctorReport) add(mark, check, detail string, failed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, fmt.Sprintf("%s %s: %s", mark, check, detail))
	r.failed = r.failed || failed
}

// addEgress records that who sends requests to host (host[:port]).
func (r *doctorReport) addEgress(host, who string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.egress == nil {
		r.egress = map[string][]string{}
	}
	if !slices.Contains(r.egress[host], who) {
		r.egress[host] = append(r.egress[host], who)
	}
}

func (r *doctorReport) print(w io.Writer) {
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

func runDoctor(ctx context.Context, c *cli, args []string) int {
	var cf configFlags
	fs := newFlags(c, "doctor", "doctor [--config PATH]", &cf, false)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	cfg, ok := c.load(ctx, cf)
	if !ok {
		fmt.Fprintln(c.stdout, "FAIL config: see the errors above")
		return exitFail
	}
	r := &doctorReport{}
	r.ok("config", fmt.Sprintf("%s (%d agents)", cfg.Source, len(cfg.Agents)))
	if err := cfg.checkListen(); err != nil {
		r.fail("listen", err.Error())
	} else {
		r.ok("listen", cfg.Server.Addr+authNote(cfg))
	}
	checkProviders(ctx, cfg, r)
	checkLattice(cfg, r)
	for _, m := range daemonModules() {
		if m.doctor != nil {
			m.doctor(ctx, cfg, r)
		}
	}
	r.print(c.stdout)
	if r.failed {
		return exitFail
	}
	return exitOK
}

func authNote(cfg *Config) string {
	if cfg.Server.APIToken.IsZero() {
		return " (no API token)"
	}
	return " (API token required)"
}

// defaultBaseURL is where a provider without base_url sends requests.
func defaultBaseURL(kind string) string {
	switch kind {
	case provider.OpenAI:
		return provider.DefaultOpenAIBaseURL
	case provider.Ollama:
		return provider.DefaultOllamaBaseURL
	case provider.Anthropic:
		return provider.DefaultAnthropicBaseURL
	}
	return ""
}

// doctorTimeout bounds each provider probe.
const doctorTimeout = 10 * time.Second

// checkProviders probes every provider an agent uses with provider.Check
// (one cheap authenticated call), concurrently.
func checkProviders(ctx context.Context, cfg *Config, r *doctorReport) {
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
		pc := cfg.Providers[kind]
		base := pc.BaseURL
		if base == "" {
			base = defaultBaseURL(kind)
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
func checkLattice(cfg *Config, r *doctorReport) {
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
	bus, err := openBus(cfg.Lattice)
	if err != nil {
		r.fail("lattice", err.Error())
		return
	}
	bus.Close()
	r.ok("lattice", "NATS at "+redactURLs(u)+" connected")
}
