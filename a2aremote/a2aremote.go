// Package a2aremote is a tool source: it makes remote A2A agents tools of the
// Engine. Each configured agent becomes the tool a2a__<name>
// ([AgentConfig.ToolName]), whose input is {"input": "…"} and whose result is
// the remote agent's answer.
//
// # In Go terms
//
// A host lists the agents in a [Config] (one [AgentConfig] each: a name, the
// agent's URL, headers, bounds), builds the module with [New] and attaches it
// with [axocoatl.Engine.Use], which calls [Module.Start];
// [axocoatl.Engine.Close] calls [Module.Stop]. The module serves no HTTP.
// The Engine hooks it uses are [axocoatl.Engine.RegisterTool] and
// [axocoatl.Engine.UnregisterTool] (each tool an [axocoatl.Tool] whose
// Approval carries [AgentConfig].Approval for gates to read) and
// [axocoatl.Engine.Publish] for its events ([EventAgentConnected],
// [EventAgentDisconnected], declared with [Module.Events]). The
// `a2a_agents:` section of the daemon's config file decodes straight into
// [Config]; nothing here needs the file. [Module.Ready] waits for every first
// card read, [Module.Status] reports each agent ([AgentStatus]) and [Check]
// is the one-shot probe behind the daemon's `doctor`.
//
// # Cards and generations
//
// Each agent's card ([a2a1.AgentCard]) is read from [CardURL] (the base
// URL's /.well-known/agent-card.json, or the card's own URL) and a client
// ([a2aclient.Client]) is built with a2a-go/v2 on the newest generation the
// card offers ([Generation]): A2A 1.0, or 0.3 through transports of this
// package's own (an [a2aclient.Transport] over JSON-RPC or HTTP+JSON).
//
// Tools are registered at [Module.Start], before any card is read, and called
// through [axocoatl.Engine.CallTool] like every other tool: the agent's
// allow-list ([agent.Spec].Tools) and the interceptor chain (the approval
// gate, which reads [axocoatl.Tool].Approval) apply. A remote that cannot be
// reached at Start does not delay the Engine: one goroutine per agent, owned
// by the module and ended by [Module.Stop], reads its card again with capped
// exponential backoff ([Config].MinBackoff doubling to [Config].MaxBackoff,
// ±20% jitter) until it succeeds; meanwhile the tool fails at once with
// [ErrUnavailable] and the reason, and once the card is read the tool is
// registered again with the card's description. The card is read once: a
// remote that moves its endpoint needs the module restarted.
//
// # Calls
//
// A call sends one message — a blocking [a2aclient.Client.SendMessage]
// naming a new context when the remote lists tasks by context (A2A 1.0
// [a2aclient.Client.ListTasks], probed when the card is read), so that a call
// ending early finds its task; else [a2aclient.Client.SendStreamingMessage]
// when the card says the agent streams, so the remote task's id is known from
// its first event — waits for the task's end within [AgentConfig].Timeout,
// and gives the model the text of its artifacts (else of its final message).
// A task that fails, is rejected or cancelled ([ErrTaskFailed]), a transport
// error or the timeout ([ErrTimeout]) is a failed tool call with the reason.
// When the caller's context ends (its run was cancelled), the timeout passes
// or the call fails otherwise while the remote task is still running, the
// task is cancelled with [a2aclient.Client.CancelTask] (bounded by
// [CancelTimeout]). A remote that does neither gets a blocking SendMessage;
// cancelling it closes the request, and its task, whose id is known only
// with the answer, is not sent a CancelTask.
//
// # Bounds and secrets
//
// [AgentConfig].MaxResponseBytes bounds each HTTP response (a whole SSE
// stream included, else [ErrResponseTooLarge]), [DefaultMaxCardBytes] each
// card, [AgentConfig].MaxOutputBytes the text handed to the model and
// [AgentConfig].MaxConcurrent the calls in flight per agent (more wait for a
// slot within their timeout). Header values (secrets, [secret.Secret]), the
// URL's credentials and the host's secrets ([Config].Scrub) are scrubbed from
// results, errors, events and logs; no redirect is followed, so headers go
// only where the card says the agent is.
package a2aremote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/internal/lifecycle"
	"github.com/axocoatl/axocoatl-go/internal/redact"
	"github.com/axocoatl/axocoatl-go/internal/retry"
	"github.com/axocoatl/axocoatl-go/internal/scrub"
	"github.com/axocoatl/axocoatl-go/internal/textsafe"
	"github.com/axocoatl/axocoatl-go/lattice"
	"github.com/axocoatl/axocoatl-go/secret"
)

// Errors of calls; check them with [errors.Is].
var (
	// ErrUnavailable: the agent's card has not been read (yet).
	ErrUnavailable = errors.New("remote a2a agent unavailable")
	// ErrTimeout: the call did not end within the agent's timeout.
	ErrTimeout = errors.New("remote a2a agent call timed out")
	// ErrTaskFailed: the remote task ended failed, rejected or cancelled,
	// or needs authentication.
	ErrTaskFailed = errors.New("remote a2a task did not complete")
	// ErrBadInput: the tool's arguments are not {"input": "<text>"}. It is
	// [axocoatl.ErrBadInput], kept under this name for its callers.
	ErrBadInput = axocoatl.ErrBadInput
	// ErrStopped: the module is stopped.
	ErrStopped = errors.New("a2a remote module stopped")
)

// inputSchema is the input of every a2a__ tool.
var inputSchema = json.RawMessage(`{"type":"object","properties":{"input":{"type":"string"}},"required":["input"]}`)

// producer is the produced_by of the module's events.
const producer = "a2aremote"

// Module is the remote A2A agents module. Create it with [New] and attach it
// with [axocoatl.Engine.Use].
type Module struct {
	cfg Config
	// transport is the base RoundTripper of every agent's HTTP client:
	// the module's own, so that Stop can close its idle connections (and
	// their goroutines) without touching other users of a shared one.
	transport *http.Transport

	mu     sync.Mutex
	life   lifecycle.State
	agents []*remote
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New validates cfg and returns the module.
func New(cfg Config) (*Module, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Module{cfg: cfg}, nil
}

// Name implements [axocoatl.Module].
func (m *Module) Name() string { return "a2aremote" }

// Start implements [axocoatl.Module]: it registers every agent's tool and
// starts reading the cards in the background (see [Module.Ready]).
func (m *Module) Start(_ context.Context, e *axocoatl.Engine) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.life.CheckStart("a2aremote", ErrStopped); err != nil {
		return err
	}
	m.life.MarkStarted()
	life, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.transport = newTransport()
	log := e.Logger()
	for _, ac := range m.cfg.Agents {
		r := newRemote(ac, m.cfg, e, log, m.transport)
		if err := e.RegisterTool(r.tool(nil)); err != nil {
			cancel()
			m.wg.Wait()
			m.unregister()
			m.transport.CloseIdleConnections()
			return fmt.Errorf("a2a agent %s: %w", ac.Name, err)
		}
		m.agents = append(m.agents, r)
		log.Info("a2a agent configured", "agent", ac.Name, "tool", ac.ToolName(), "target", ac.Target())
		m.wg.Go(func() { r.resolveLoop(life) })
	}
	return nil
}

func (m *Module) unregister() {
	for _, r := range m.agents {
		r.eng.UnregisterTool(r.cfg.ToolName())
	}
}

// Stop implements [axocoatl.Module]: calls in flight are cancelled (their
// remote tasks too), card reads end, and the tools are unregistered.
func (m *Module) Stop(ctx context.Context) error {
	m.mu.Lock()
	if !m.life.Stop() {
		m.mu.Unlock()
		return nil
	}
	cancel := m.cancel
	m.mu.Unlock()

	for _, r := range m.agents {
		r.mu.Lock()
		r.stopping = true
		for _, cancelCall := range r.inflight {
			cancelCall(errStopping)
		}
		r.mu.Unlock()
	}
	cancel()
	done := make(chan struct{})
	go func() {
		m.wg.Wait()
		for _, r := range m.agents {
			r.calls.Wait()
		}
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		<-done
		err = fmt.Errorf("a2aremote: stop: %w", ctx.Err())
	}
	m.unregister()
	m.transport.CloseIdleConnections()
	return err
}

// Ready waits until every agent's first card read has finished,
// successfully or not, or ctx ends. It returns the failures joined (each
// names its agent).
func (m *Module) Ready(ctx context.Context) error {
	m.mu.Lock()
	agents := slices.Clone(m.agents)
	m.mu.Unlock()
	var errs []error
	for _, r := range agents {
		select {
		case <-r.firstAttempt:
		case <-ctx.Done():
			return fmt.Errorf("a2aremote: waiting for agent %s: %w", r.cfg.Name, ctx.Err())
		}
		if st := r.status(); !st.Resolved {
			errs = append(errs, fmt.Errorf("a2a agent %s: %s", r.cfg.Name, st.Error))
		}
	}
	return errors.Join(errs...)
}

// AgentStatus is the state of one configured remote agent.
type AgentStatus struct {
	Name string `json:"name"`
	Tool string `json:"tool"`
	// URL is the configured URL, redacted.
	URL string `json:"url"`
	// Resolved: the card was read and a client built.
	Resolved bool `json:"resolved"`
	// Generation is the A2A version spoken: "1.0" or "0.3".
	Generation string `json:"generation,omitempty"`
	// Error says why the card is not read yet, secrets redacted.
	Error string `json:"error,omitempty"`
}

// Status reports every configured agent in config order.
func (m *Module) Status() []AgentStatus {
	m.mu.Lock()
	agents := slices.Clone(m.agents)
	m.mu.Unlock()
	out := make([]AgentStatus, 0, len(agents))
	for _, r := range agents {
		out = append(out, r.status())
	}
	return out
}

// CardInfo is what [Check] found.
type CardInfo struct {
	Name        string
	Description string
	// Generation is "1.0" or "0.3": what a call will speak.
	Generation string
	// Interfaces are the card's endpoints as "BINDING VERSION URL", URLs
	// redacted.
	Interfaces []string
	// Hosts are the hosts calls go to (the card's interfaces).
	Hosts     []string
	Streaming bool
}

// Check reads one agent's card and builds a client from it, without
// calling the agent: the `doctor` probe. Bounded by [ResolveTimeout] and
// ctx. Errors name the agent and contain no header value nor any of scrub.
func Check(ctx context.Context, ac AgentConfig, scrub []secret.Secret) (CardInfo, error) {
	if err := ac.Validate(); err != nil {
		return CardInfo{}, fmt.Errorf("a2a agent %s: %w", ac.Name, err)
	}
	red, _ := newRedactor(ac, scrub)
	tr := newTransport()
	defer tr.CloseIdleConnections()
	card, _, gen, err := resolve(ctx, ac, newHTTPClient(ac, tr, nil))
	if err != nil {
		return CardInfo{}, fmt.Errorf("a2a agent %s: %w", ac.Name, red.Error(err))
	}
	// doctor prints what the card says on the operator's terminal: its
	// text is cleaned of control characters like the tool description.
	info := CardInfo{Name: cleanText(card.Name), Description: cleanText(card.Description), Generation: gen, Streaming: card.Capabilities.Streaming}
	for _, iface := range card.SupportedInterfaces {
		info.Interfaces = append(info.Interfaces, cleanText(fmt.Sprintf("%s %s %s", iface.ProtocolBinding, iface.ProtocolVersion, red.String(redactURL(iface.URL)))))
		if h := hostOf(iface.URL); h != "" && !slices.Contains(info.Hosts, h) {
			info.Hosts = append(info.Hosts, h)
		}
	}
	return info, nil
}

// resolve reads the card and builds the client, bounded by [ResolveTimeout].
func resolve(ctx context.Context, ac AgentConfig, hc *http.Client) (*a2a1.AgentCard, *a2aclient.Client, string, error) {
	ctx, cancel := context.WithTimeout(ctx, ResolveTimeout)
	defer cancel()
	cardURL, err := ac.cardURL()
	if err != nil {
		return nil, nil, "", err
	}
	card, err := fetchCard(ctx, hc, cardURL)
	if err != nil {
		return nil, nil, "", fmt.Errorf("reading the card at %s: %w", redactURL(cardURL), err)
	}
	gen := Generation(card)
	if gen == "" {
		return nil, nil, "", fmt.Errorf("the card at %s offers no interface this client speaks (A2A 1.0 or 0.3 over JSONRPC or HTTP+JSON)", redactURL(cardURL))
	}
	c, err := newClient(ctx, card, hc)
	if err != nil {
		return nil, nil, "", fmt.Errorf("the card at %s: %w", redactURL(cardURL), err)
	}
	return card, c, gen, nil
}

// remote is one configured agent.
type remote struct {
	cfg  AgentConfig
	mcfg Config
	eng  *axocoatl.Engine
	log  *slog.Logger
	red  *scrub.Scrubber
	hc   *http.Client
	// sem bounds the calls in flight (max_concurrent).
	sem chan struct{}
	// calls counts calls in flight, for Stop to wait for their cancels.
	calls sync.WaitGroup

	firstAttempt chan struct{}
	firstOnce    sync.Once

	mu        sync.Mutex // guards the fields below; never held across a remote call
	client    *a2aclient.Client
	streaming bool
	// findable: the remote lists tasks by context (A2A 1.0 ListTasks),
	// so a call can be a blocking SendMessage and still find its task to
	// cancel it (see call).
	findable   bool
	generation string
	lastErr    string
	stopping   bool // Stop began: no new call starts
	// inflight holds the cancel of each call in progress, by a number of
	// its own: Stop cancels them (with errStopping).
	inflight map[uint64]context.CancelCauseFunc
	lastCall uint64
}

func newRemote(ac AgentConfig, mcfg Config, e *axocoatl.Engine, log *slog.Logger, base http.RoundTripper) *remote {
	red, tooShort := newRedactor(ac, mcfg.Scrub)
	warnTooShort(log, ac.Name, tooShort)
	return &remote{
		cfg: ac, mcfg: mcfg, eng: e, log: log,
		red:          red,
		hc:           newHTTPClient(ac, base, e.Propagator()),
		sem:          make(chan struct{}, ac.maxConcurrent()),
		firstAttempt: make(chan struct{}),
		inflight:     make(map[uint64]context.CancelCauseFunc),
		lastErr:      "its card has not been read yet",
	}
}

// tool is the Engine tool of the agent; card nil: not read yet.
func (r *remote) tool(card *a2a1.AgentCard) axocoatl.Tool {
	desc := fmt.Sprintf("Remote A2A agent %q at %s. Its card could not be read yet, so calls fail until it is. Input: the request as text.", r.cfg.Name, r.cfg.Target())
	if card != nil {
		desc = describeCard(card)
	}
	return axocoatl.Tool{
		Name:        r.cfg.ToolName(),
		Description: desc,
		InputSchema: inputSchema,
		Server:      r.cfg.Name,
		Approval:    r.cfg.Approval,
		Call:        r.call,
	}
}

// describeCard is the tool description from the card: its name and
// description, then its skills, cleaned of what a human reviewing the tool
// would not see, at most maxDescription bytes.
func describeCard(card *a2a1.AgentCard) string {
	var b strings.Builder
	b.WriteString(cleanText(card.Name))
	if d := cleanText(card.Description); d != "" {
		b.WriteString(": ")
		b.WriteString(d)
	}
	for i, s := range card.Skills {
		if i == 0 {
			b.WriteString("\nSkills:")
		}
		b.WriteString("\n- ")
		b.WriteString(cleanText(s.Name))
		if d := cleanText(s.Description); d != "" {
			b.WriteString(": ")
			b.WriteString(d)
		}
		if b.Len() > maxDescription {
			break
		}
	}
	return textsafe.Cut(b.String(), maxDescription)
}

// cleanText is the card's text as the model may read it: stripped of
// what a human reviewing the tool would not see ([textsafe.Clean]).
func cleanText(s string) string { return strings.TrimSpace(textsafe.Clean(s)) }

// resolveLoop reads the card until it succeeds or the module stops.
func (r *remote) resolveLoop(life context.Context) {
	defer r.firstOnce.Do(func() { close(r.firstAttempt) })
	for failures := 0; ; failures++ {
		card, c, gen, err := resolve(life, r.cfg, r.hc)
		if life.Err() != nil {
			return
		}
		if err == nil {
			r.up(life, card, c, gen)
			return
		}
		r.down(life, err, failures)
		r.firstOnce.Do(func() { close(r.firstAttempt) })
		if !retry.Sleep(life, backoff(r.mcfg, failures+1)) {
			return
		}
	}
}

func (r *remote) up(ctx context.Context, card *a2a1.AgentCard, c *a2aclient.Client, gen string) {
	findable := gen == "1.0" && r.canFind(ctx, c)
	r.mu.Lock()
	r.client, r.generation, r.streaming, r.findable, r.lastErr = c, gen, card.Capabilities.Streaming, findable, ""
	r.mu.Unlock()
	if err := r.eng.RegisterTool(r.tool(card)); err != nil {
		r.log.Warn("a2a agent tool not registered", "agent", r.cfg.Name, "error", err)
	}
	r.log.Info("a2a agent card read", "agent", r.cfg.Name, "tool", r.cfg.ToolName(), "generation", gen, "streaming", card.Capabilities.Streaming)
	r.publish(ctx, EventAgentConnected, agentEvent{Agent: r.cfg.Name, Tool: r.cfg.ToolName(), URL: r.cfg.Target(), Generation: gen})
}

// down records why the card is not read; a failure that repeats the last
// one is logged at debug only.
func (r *remote) down(ctx context.Context, err error, failures int) {
	msg := r.red.Error(err).Error()
	r.mu.Lock()
	repeat := failures > 0 && r.lastErr == msg
	r.lastErr = msg
	r.mu.Unlock()
	if repeat {
		r.log.Debug("a2a agent card unreadable again", "agent", r.cfg.Name, "error", msg)
		return
	}
	r.log.Warn("a2a agent card unreadable; retrying with backoff", "agent", r.cfg.Name, "target", r.cfg.Target(), "error", msg)
	r.publish(ctx, EventAgentDisconnected, agentEvent{Agent: r.cfg.Name, Tool: r.cfg.ToolName(), URL: r.cfg.Target(), Error: msg})
}

type agentEvent struct {
	Agent      string `json:"agent"`
	Tool       string `json:"tool"`
	URL        string `json:"url"`
	Generation string `json:"generation,omitempty"`
	Error      string `json:"error,omitempty"`
}

func (r *remote) publish(ctx context.Context, typ string, payload any) {
	err := r.eng.Publish(context.WithoutCancel(ctx), typ, producer, payload)
	if err != nil && !errors.Is(err, lattice.ErrClosed) {
		r.log.Warn("publish failed", "type", typ, "error", err)
	}
}

func (r *remote) status() AgentStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return AgentStatus{Name: r.cfg.Name, Tool: r.cfg.ToolName(), URL: r.cfg.Target(), Resolved: r.client != nil, Generation: r.generation, Error: r.lastErr}
}

// backoff is MinBackoff doubled per consecutive failure, capped at
// MaxBackoff, with ±20% jitter.
func backoff(c Config, failures int) time.Duration {
	return retry.Backoff(c.minBackoff(), c.maxBackoff(), failures)
}

func redactURL(u string) string { return redact.URL(u) }

// hostOf is the host[:port] of an absolute URL, "" when it has none.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Host
}
