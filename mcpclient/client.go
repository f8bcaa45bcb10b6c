// Package mcpclient is a tool source: it connects MCP servers and registers
// each server's tools on the Engine as mcp__<server>__<tool> (see
// [QualifiedName]), so the agents whose allow-list ([agent.Spec].Tools)
// matches them can call them.
//
// # In Go terms
//
// A host describes the servers in a [Config] (one [ServerConfig] each: a
// Command for a stdio child, a URL for streamable HTTP, or a Dial func for a
// server embedded in the host), builds the module with [New] and attaches it
// with [axocoatl.Engine.Use], which calls [Module.Start];
// [axocoatl.Engine.Close] calls [Module.Stop]. The module serves no HTTP: it
// only registers tools. The Engine hooks it uses are
// [axocoatl.Engine.RegisterTool] and [axocoatl.Engine.UnregisterTool] (each
// tool an [axocoatl.Tool] whose Server is the server's name and whose
// Approval carries [ServerConfig].Approval for gates to read),
// [axocoatl.Engine.AddPendingTools] (runs wait for a server still on its
// first connect) and [axocoatl.Engine.Publish] for its events
// ([EventServerConnected], [EventServerDisconnected], [EventToolChanged],
// declared with [Module.Events]). The `mcp_servers:` section of the daemon's
// config file decodes straight into [Config]; nothing here needs the file.
//
// # Supervisors
//
// Each server has one supervisor goroutine, owned by the module and ended by
// [Module.Stop]: it connects (a child process in its own process group over
// an [mcp.IOTransport], or an [mcp.StreamableClientTransport]), lists and registers
// the tools, follows notifications/tools/list_changed (at most one re-list per
// [RelistInterval]), checks the session every [ServerConfig].KeepAlive and
// reconnects with capped exponential backoff ([Config].MinBackoff,
// [Config].MaxBackoff) when the session ends. [Module.Start] never waits for
// a server: a slow or broken one does not delay the Engine or the others; a
// run whose agent may use a server still on its first connect waits for it
// instead, at most the server's timeout. [Module.Ready] waits for every first
// attempt and [Module.Status] reports each server ([ServerStatus]).
//
// # Calls
//
// A call ([axocoatl.ToolCall], through [axocoatl.Engine.CallTool] and so
// through every gate) routes the qualified name to the live session of its
// server, bounded by [ServerConfig].Timeout ([ErrTimeout]); while a server is
// down its tools stay registered and fail at once with [ErrServerDown].
//
// # Questions
//
// The client declares form elicitation: a server that asks for input during
// a tool call (a 2025-11-25 elicitation/create, a 2026-07-28
// InputRequiredResult) has its question put with
// [axocoatl.Engine.AskQuestion] (the approval module answers it: the
// dashboard, the approvals API, the WebSocket, the run's door), tied to the
// call it arose in where the protocol allows (see docs/mcp.md, "Servers
// that ask"); the call's timeout is held while it waits. No answer, or
// nobody to ask, is a decline.
//
// # Bounds and secrets
//
// A server's listing is bounded by [ServerConfig].MaxTools,
// [ServerConfig].MaxListPages and [ServerConfig].MaxListBytes; going over one
// disconnects that server with [ErrOverBound] and leaves the others alone.
// Env and header values are secrets ([secret.Secret]): they, and the host's own
// credentials in [Config].Scrub, are removed from everything a server says
// (results, errors, stderr, logs). [Check] is the one-shot probe behind the
// daemon's `doctor`.
package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/internal/lifecycle"
	"github.com/axocoatl/axocoatl-go/secret"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Errors of tool calls and connections; check them with [errors.Is].
var (
	// ErrServerDown: the call's server has no live session right now.
	ErrServerDown = errors.New("mcp server is down")
	// ErrTimeout: the call did not finish within the server's timeout.
	ErrTimeout = errors.New("mcp tool call timed out")
	// ErrConnect: connecting or listing tools failed.
	ErrConnect = errors.New("connect failed")
	// ErrOverBound: a server went over one of its bounds
	// ([ServerConfig].MaxTools, MaxListPages, MaxListBytes) and was
	// disconnected.
	ErrOverBound = errors.New("mcp server over a bound")
	// ErrStopped: the module is stopped.
	ErrStopped = errors.New("mcp client stopped")
)

// Module is the MCP client module. Create it with [New] and attach it with
// [axocoatl.Engine.Use].
type Module struct {
	cfg   Config
	oauth map[string]*oauthClient // by server name, for servers with oauth
	// logins are the logins started over HTTP (login.go).
	logins logins

	mu      sync.Mutex
	life    lifecycle.State
	servers []*server
	// names serializes the servers' checks and claims of Engine tool
	// names: two servers can qualify to the same name (a + b__c and a__b + c).
	names  sync.Mutex
	cancel context.CancelFunc
	// stopped ends with the module; http serves its routes (both set by
	// Start).
	stopped context.Context
	http    http.Handler
	wg      sync.WaitGroup
}

// New validates cfg and returns the module.
func New(cfg Config) (*Module, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &Module{cfg: cfg.withDefaults(), oauth: map[string]*oauthClient{},
		logins: logins{byState: map[string]*login{}, last: map[string]*login{}}}
	for _, sc := range cfg.Servers {
		if sc.OAuth == nil {
			continue
		}
		oc, err := newOAuthClient(sc, m.cfg, nil)
		if err != nil {
			return nil, fmt.Errorf("mcp server %s: %w", sc.Name, err)
		}
		m.oauth[sc.Name] = oc
	}
	return m, nil
}

// Name implements [axocoatl.Module].
func (m *Module) Name() string { return "mcpclient" }

// Start implements [axocoatl.Module]. It logs each server with its transport
// and starts one supervisor per server; it does not wait for any of them
// (see [Module.Ready]).
func (m *Module) Start(_ context.Context, e *axocoatl.Engine) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.life.CheckStart("mcpclient", ErrStopped); err != nil {
		return err
	}
	m.life.MarkStarted()
	// Supervisors live until Stop, not until the caller's ctx ends.
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.stopped = ctx
	m.http = m.routes(e)
	log := e.Logger()
	for _, oc := range m.oauth {
		oc.setLogger(log)
	}
	for _, sc := range m.cfg.Servers {
		s := newServer(ctx, sc, m.cfg, e, log, &m.names, m.oauth[sc.Name])
		m.servers = append(m.servers, s)
		log.Info("mcp server configured", "server", sc.Name, "transport", sc.Transport(), "target", sc.Target())
		m.wg.Go(func() { s.run(ctx) })
	}
	return nil
}

// Stop implements [axocoatl.Module]: it ends every supervisor, closes every
// session, kills what is left of each child's process group and
// unregisters the tools. If ctx ends first, Stop still waits for the
// goroutines (which are then past their last bounded step) and returns
// ctx's error.
func (m *Module) Stop(ctx context.Context) error {
	m.mu.Lock()
	if !m.life.Stop() {
		m.mu.Unlock()
		return nil
	}
	cancel := m.cancel
	m.mu.Unlock()

	cancel()
	return lifecycle.Wait(ctx, "mcpclient", &m.wg)
}

// Ready waits until every server has finished its first connect attempt,
// successful or not, or until ctx ends. It returns the servers' connect
// errors joined (each names its server).
func (m *Module) Ready(ctx context.Context) error {
	m.mu.Lock()
	servers := slices.Clone(m.servers)
	m.mu.Unlock()
	var errs []error
	for _, s := range servers {
		select {
		case <-s.firstAttempt:
		case <-ctx.Done():
			return fmt.Errorf("mcpclient: waiting for server %s: %w", s.cfg.Name, ctx.Err())
		}
		if st := s.status(); !st.Connected && st.Error != "" {
			errs = append(errs, fmt.Errorf("mcp server %s: %s", s.cfg.Name, st.Error))
		}
	}
	return errors.Join(errs...)
}

// ServerStatus is the state of one configured server.
type ServerStatus struct {
	Name      string `json:"name"`
	Transport string `json:"transport"` // stdio | http | custom
	Connected bool   `json:"connected"`
	// ProtocolVersion is the MCP version the session negotiated (2026-07-28
	// when the server answered server/discover, else the version of its
	// initialize); empty while disconnected.
	ProtocolVersion string   `json:"protocol_version,omitempty"`
	Tools           []string `json:"tools"`           // qualified names, sorted
	Error           string   `json:"error,omitempty"` // why it is down, secrets redacted
	// NeedsLogin: the server is down because its OAuth authorization code
	// grant needs a user to log in ([Module.Login], `axocoatl mcp login`).
	NeedsLogin bool `json:"needs_login,omitempty"`
}

// ErrNoOAuth: [Module.Login] on a server that has no `oauth:`, or none of
// that name.
var ErrNoOAuth = errors.New("no mcp server with oauth of that name")

// Login runs the OAuth authorization code flow of one server with fetch,
// which sends the user to the URL it is given and returns what the
// authorization server redirected back with. On success the tokens are
// stored ([Config].Tokens) and the server reconnects at once. The login is
// bounded by ctx only: a user takes the time they take.
func (m *Module) Login(ctx context.Context, server string, fetch CodeFetcher) error {
	oc := m.oauth[server]
	if oc == nil {
		return fmt.Errorf("%w: %q", ErrNoOAuth, server)
	}
	var url string
	for _, sc := range m.cfg.Servers {
		if sc.Name == server {
			url = sc.URL
		}
	}
	if err := oc.login(ctx, url, fetch); err != nil {
		return err
	}
	m.mu.Lock()
	servers := slices.Clone(m.servers)
	m.mu.Unlock()
	for _, s := range servers {
		if s.cfg.Name == server {
			select {
			case s.wake <- struct{}{}:
			default:
			}
		}
	}
	return nil
}

// Status reports every configured server in config order.
func (m *Module) Status() []ServerStatus {
	m.mu.Lock()
	servers := slices.Clone(m.servers)
	m.mu.Unlock()
	out := make([]ServerStatus, 0, len(servers))
	for _, s := range servers {
		out = append(out, s.status())
	}
	return out
}

// Check connects to one server, lists its tools and disconnects: the
// `doctor` probe. It returns the qualified tool names, sorted. The whole
// check is bounded by the server's timeout (and ctx), twice that for a
// server that never answers server/discover: when that probe times out,
// Check tries initialize once more, as the [Module] does. Errors name the
// server and never contain env or header values, nor the host credentials
// in scrub (see [Config].Scrub).
func Check(ctx context.Context, cfg ServerConfig, scrub []secret.Secret, log *slog.Logger) ([]string, error) {
	return CheckWithTokens(ctx, cfg, scrub, nil, log)
}

// CheckWithTokens is [Check] for a server with `oauth:`: it uses the
// tokens in tokens (nil: none, so an authorization code server reports
// [ErrNeedsLogin]); it never starts a login, and stores a refreshed token
// only in tokens.
func CheckWithTokens(ctx context.Context, cfg ServerConfig, scrub []secret.Secret, tokens TokenStore, log *slog.Logger) ([]string, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("mcp server %s: %w", cfg.Name, err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r, tooShort := newRedactor(cfg, scrub)
	warnTooShort(log, cfg.Name, tooShort)
	log = r.Logger(log)
	d := newDialer(cfg, log, r, nil)
	defer d.close()
	if cfg.OAuth != nil {
		oc, err := newOAuthClient(cfg, Config{Tokens: tokens}, log)
		if err != nil {
			return nil, fmt.Errorf("mcp server %s: %w", cfg.Name, err)
		}
		oc.probe = true
		d.oauth = oc
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(parent, cfg.timeout())
	defer cancel()
	c := mcp.NewClient(clientImpl, &mcp.ClientOptions{Logger: log, Capabilities: &mcp.ClientCapabilities{}})
	cs, err := connect(ctx, c, d, nil)
	if err != nil && nextLegacy(false, err) && parent.Err() == nil {
		cancel()
		ctx, cancel = context.WithTimeout(parent, cfg.timeout())
		defer cancel()
		cs, err = connect(ctx, c, d, &mcp.ClientSessionOptions{ProtocolVersion: legacyVersion})
	}
	if err != nil {
		return nil, fmt.Errorf("mcp server %s: %w: %w", cfg.Name, ErrConnect, r.Error(err))
	}
	defer func() {
		_ = cs.Close()
		d.reap()
	}()
	tools, err := listTools(ctx, cs, cfg)
	if err != nil {
		return nil, fmt.Errorf("mcp server %s: %w: listing tools: %w", cfg.Name, ErrConnect, r.Error(err))
	}
	names := make([]string, 0, len(tools))
	for q := range qualifyAll(cfg.Name, toolNames(tools)) {
		names = append(names, q)
	}
	sort.Strings(names)
	return names, nil
}

var clientImpl = &mcp.Implementation{Name: "axocoatl", Version: "0.1.0"}

// connect makes a transport and initializes a session on it.
// so picks the era (nil: server/discover first, then initialize).
func connect(ctx context.Context, c *mcp.Client, d *dialer, so *mcp.ClientSessionOptions) (*mcp.ClientSession, error) {
	t, err := d.transport(ctx)
	if err != nil {
		return nil, err
	}
	// A child that has not answered when ctx ends is killed at once, so a
	// failed attempt never waits for the transport's gentle shutdown.
	stop := context.AfterFunc(ctx, d.reap)
	cs, err := c.Connect(ctx, t, so)
	stop()
	if err != nil {
		d.reap()
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			err = fmt.Errorf("no MCP handshake within %s: %w", d.cfg.timeout(), context.DeadlineExceeded)
		case strings.Contains(err.Error(), "invalid character"):
			err = fmt.Errorf("the server's output is not MCP JSON-RPC: %w", err)
		}
		return nil, d.explain(err)
	}
	return cs, nil
}

// listedTool is one tool of a listing, with the JSON of its schema and
// annotations made once.
type listedTool struct {
	tool        *mcp.Tool
	schema      json.RawMessage
	annotations json.RawMessage
}

// listTools reads the server's tools page by page, within the server's
// bounds on pages, tools and bytes: a hostile or broken server (nextCursor
// forever, 100,000 tools) costs at most those, and gets an error naming the
// bound and the count.
func listTools(ctx context.Context, cs *mcp.ClientSession, cfg ServerConfig) ([]listedTool, error) {
	var tools []listedTool
	maxTools, maxPages, maxBytes := cfg.maxTools(), cfg.maxListPages(), cfg.maxListBytes()
	size := 0
	params := &mcp.ListToolsParams{}
	for page := 1; ; page++ {
		if page > maxPages {
			return nil, fmt.Errorf("%w: tools/list: more than max_list_pages (%d) pages, %d tools so far", ErrOverBound, maxPages, len(tools))
		}
		res, err := cs.ListTools(ctx, params)
		if n, ok := pageOverBound(err); ok {
			return nil, fmt.Errorf("%w: tools/list: %d tools by page %d, over max_tools (%d)", ErrOverBound, len(tools)+n, page, maxTools)
		}
		if err != nil {
			return nil, err
		}
		if len(tools)+len(res.Tools) > maxTools {
			return nil, fmt.Errorf("%w: tools/list: %d tools by page %d, over max_tools (%d)", ErrOverBound, len(tools)+len(res.Tools), page, maxTools)
		}
		for _, t := range res.Tools {
			lt := listedTool{tool: t}
			if t.InputSchema != nil {
				lt.schema, _ = json.Marshal(t.InputSchema)
			}
			if t.Annotations != nil {
				lt.annotations, _ = json.Marshal(t.Annotations)
			}
			size += len(t.Name) + len(t.Title) + len(t.Description) + len(lt.schema) + len(lt.annotations)
			if size > maxBytes {
				return nil, fmt.Errorf("%w: tools/list: %d bytes of tool definitions by tool %d, over max_list_bytes (%d)", ErrOverBound, size, len(tools)+1, maxBytes)
			}
			tools = append(tools, lt)
		}
		if res.NextCursor == "" {
			return tools, nil
		}
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}
}

func toolNames(tools []listedTool) []string {
	out := make([]string, len(tools))
	for i, t := range tools {
		out[i] = t.tool.Name
	}
	return out
}
