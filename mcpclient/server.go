package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/internal/retry"
	"github.com/axocoatl/axocoatl-go/internal/scrub"
	"github.com/axocoatl/axocoatl-go/lattice"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stableAfter is how long a session must have lived for its end to restart
// the backoff from MinBackoff rather than continue growing it.
const stableAfter = 10 * time.Second

// producer is the produced_by of the module's events.
const producer = "mcpclient"

// server supervises one configured MCP server.
type server struct {
	cfg    ServerConfig
	mcfg   Config
	eng    *axocoatl.Engine
	log    *slog.Logger
	redact *scrub.Scrubber
	dial   *dialer
	client *mcp.Client

	refresh      chan struct{} // tools/list_changed arrived
	wake         chan struct{} // reconnect now (a login succeeded)
	broken       chan struct{} // a call saw brokenCS die
	brokenCS     atomic.Pointer[mcp.ClientSession]
	firstAttempt chan struct{} // closed after the first connect attempt
	firstOnce    sync.Once
	// pendingDone tells the Engine that runs need not wait for this
	// server's tools any more ([axocoatl.Engine.AddPendingTools]).
	pendingDone func()
	refreshes   atomic.Int64 // tool lists re-read after list_changed
	// legacy makes the next connect start with initialize (2025-11-25)
	// instead of the server/discover probe; only run touches it (see
	// connect).
	legacy bool

	// calls bounds the in-flight calls by the timeout and by the module's
	// life (Stop cancels them: a session's Close waits for its calls).
	calls *calls
	// names is the module's lock over claiming Engine tool names: held from
	// the check that a name is free to its registration (never across a
	// remote call).
	names *sync.Mutex

	// stopped ends with the module; sessions holds a ctx per live session
	// that ends with it: a question the server asked on it is withdrawn
	// then (see elicit), so that closing a session never waits for a human.
	stopped    context.Context
	sessionsMu sync.Mutex
	sessions   map[*mcp.ClientSession]sessionLife

	mu      sync.Mutex // guards the fields below; never held across a remote call
	session *mcp.ClientSession
	tools   map[string]*regTool // registered, by qualified name
	lastErr string              // why the server is down, redacted
}

func newServer(stopped context.Context, cfg ServerConfig, mcfg Config, e *axocoatl.Engine, log *slog.Logger, names *sync.Mutex, oa *oauthClient) *server {
	r, tooShort := newRedactor(cfg, mcfg.Scrub)
	warnTooShort(log, cfg.Name, tooShort)
	log = r.Logger(log)
	s := &server{
		calls:        newCalls(),
		names:        names,
		cfg:          cfg,
		mcfg:         mcfg,
		eng:          e,
		log:          log,
		redact:       r,
		dial:         newDialer(cfg, log, r, e.Propagator()),
		refresh:      make(chan struct{}, 1),
		wake:         make(chan struct{}, 1),
		broken:       make(chan struct{}, 1),
		firstAttempt: make(chan struct{}),
		lastErr:      "not connected yet",
		stopped:      stopped,
		sessions:     map[*mcp.ClientSession]sessionLife{},
	}
	s.pendingDone = e.AddPendingTools(axocoatl.PendingTools{Source: cfg.Name, Prefix: toolPrefix(cfg.Name), Wait: cfg.timeout()})
	s.dial.onListChanged = s.signalRefresh
	s.dial.oauth = oa
	context.AfterFunc(stopped, s.calls.stop)
	s.client = mcp.NewClient(clientImpl, &mcp.ClientOptions{
		Logger: log.With("mcp_server", cfg.Name),
		// No roots: server-everything would otherwise ask for them.
		Capabilities: &mcp.ClientCapabilities{},
		// Two failed pings in a row close the session; the supervisor,
		// waiting on it, then reconnects. One miss is tolerated: a server
		// that handles requests one at a time may be inside a long call.
		// The go-sdk pings only in the 2025-11-25 era; serve checks a
		// 2026-07-28 session itself (see probeEvery).
		KeepAlive:                 cfg.keepAlive(),
		KeepAliveFailureThreshold: 2,
		// Runs on the session's reader: only signal the supervisor.
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { s.signalRefresh() },
		// Declares form elicitation; see elicit.go.
		ElicitationHandler: s.elicit,
	})
	s.client.AddSendingMiddleware(noListCache)
	return s
}

// firstDone marks the end of the first connect attempt, after its tools
// (if any) are registered: Ready returns, and runs that waited for the
// server go on.
func (s *server) firstDone() {
	s.firstOnce.Do(func() {
		close(s.firstAttempt)
		s.pendingDone()
	})
}

// toolPrefix begins every qualified name of server's tools (a name cut for
// length keeps at least this much of it).
func toolPrefix(server string) string {
	p := "mcp__" + sanitize(server) + "__"
	if keep := MaxToolNameLen - hashLen - 1; len(p) > keep {
		p = p[:keep]
	}
	return p
}

// noListCache keeps the go-sdk from caching tools/list results (the
// 2026-07-28 era's ttlMs): the module lists tools only when it wants the
// server's answer (on connect, after tools/list_changed, and as the health
// check of a 2026-07-28 session, which a cached answer would pass however
// hung the server is).
func noListCache(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if r, ok := res.(*mcp.ListToolsResult); ok && r != nil {
			r.TTLMs = 0
		}
		return res, err
	}
}

// signalRefresh asks the supervisor for a re-list; signals that arrive
// while one is pending are merged.
func (s *server) signalRefresh() {
	select {
	case s.refresh <- struct{}{}:
	default:
	}
}

// run is the supervisor: connect, serve, reconnect with backoff, until ctx
// ends. On return the session is closed, the child reaped and the tools
// unregistered.
func (s *server) run(ctx context.Context) {
	defer s.shutdown()
	failures := 0
	for {
		start := time.Now()
		cs, err := s.connect(ctx)
		if ctx.Err() != nil {
			if cs != nil {
				s.closeSession(cs)
			}
			return
		}
		if err != nil {
			s.down(ctx, err, "connect failed")
			s.firstDone()
			failures++
		} else {
			s.up(ctx, cs)
			s.firstDone()
			err = s.serve(ctx, cs)
			s.closeSession(cs)
			if ctx.Err() != nil {
				return
			}
			s.down(ctx, err, "disconnected")
			if time.Since(start) >= stableAfter {
				failures = 0
			}
			failures++
		}
		if !s.sleep(ctx, s.backoff(failures)) {
			return
		}
	}
}

// sleep waits d, or until a wake, or until ctx ends (false).
func (s *server) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.wake:
	case <-ctx.Done():
		return false
	}
	return true
}

// backoff is MinBackoff doubled per consecutive failure, capped at
// MaxBackoff, with ±20% jitter so that servers failing together (a network
// outage) do not retry in lockstep.
func (s *server) backoff(failures int) time.Duration {
	return retry.Backoff(s.mcfg.MinBackoff, s.mcfg.MaxBackoff, failures)
}

// connect makes one bounded attempt: session plus first tool list.
//
// The go-sdk probes server/discover first and falls back to initialize
// only when the server answers it with an error: a server of the older era
// that never answers a method it does not know would time every attempt
// out. So after a probe that timed out, the next attempt starts with
// initialize; after an initialize that failed in any way, with the probe
// again (a server that speaks only 2026-07-28 refuses initialize, and one
// that is merely slow to start connects either way).
func (s *server) connect(ctx context.Context) (*mcp.ClientSession, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout())
	defer cancel()
	var so *mcp.ClientSessionOptions
	if s.legacy {
		so = &mcp.ClientSessionOptions{ProtocolVersion: legacyVersion}
	}
	cs, err := connect(ctx, s.client, s.dial, so)
	if err != nil {
		s.legacy = nextLegacy(s.legacy, err)
		return nil, err
	}
	s.openSession(cs)
	tools, err := listTools(ctx, cs, s.cfg)
	if err != nil {
		s.closeSession(cs)
		return nil, fmt.Errorf("listing tools: %w", err)
	}
	s.setTools(ctx, tools)
	return cs, nil
}

// up publishes a connected session.
func (s *server) up(ctx context.Context, cs *mcp.ClientSession) {
	s.mu.Lock()
	s.session = cs
	s.lastErr = ""
	names := s.toolNamesLocked()
	s.mu.Unlock()
	s.log.Info("mcp server connected", "server", s.cfg.Name, "transport", s.cfg.Transport(), "protocol_version", protocolVersion(cs), "tools", len(names))
	s.publish(ctx, EventServerConnected, names, "")
}

// down records why the server is unavailable; its tools stay registered and
// fail at once until it is back.
//
// A server that keeps failing the same way is reported once (warning and
// McpServerDisconnected); later identical failures are logged at debug.
func (s *server) down(ctx context.Context, err error, what string) {
	err = s.redact.Error(err)
	s.mu.Lock()
	repeat := s.session == nil && s.lastErr == err.Error()
	s.session = nil
	s.lastErr = err.Error()
	names := s.toolNamesLocked()
	s.mu.Unlock()
	if repeat {
		s.log.Debug("mcp server "+what+" again", "server", s.cfg.Name, "error", err)
		return
	}
	s.log.Warn("mcp server "+what, "server", s.cfg.Name, "transport", s.cfg.Transport(), "error", err)
	s.publish(ctx, EventServerDisconnected, names, err.Error())
}

// serve waits for the session to end, following list_changed meanwhile.
//
// Re-lists are coalesced: at most one is in flight (this loop runs them),
// notifications that arrive meanwhile are merged into one pending signal,
// and two re-lists are at least [RelistInterval] apart. A re-list that goes
// over a bound ends the session like any other failure.
//
// A 2026-07-28 session is checked here every KeepAlive, as the go-sdk pings
// only sessions of the older era: see probeEvery.
func (s *server) serve(ctx context.Context, cs *mcp.ClientSession) error {
	ended := make(chan error, 1)
	go func() { ended <- cs.Wait() }() // ends when the session closes, which closeSession ensures
	relist := time.NewTimer(0)
	relist.Stop()
	pending := false
	var last time.Time
	var probe <-chan time.Time
	if every := s.probeEvery(cs); every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		probe = t.C
	}
	missed := 0
	defer func() {
		relist.Stop()
		s.endSession(cs) // its questions first: Close waits for their handlers
		_ = cs.Close()
		<-ended
	}()
	for {
		select {
		case <-probe:
			pctx, cancel := context.WithTimeout(ctx, s.cfg.keepAlive()/2)
			tools, err := listTools(pctx, cs, s.cfg)
			cancel()
			switch {
			case ctx.Err() != nil:
				return ctx.Err()
			case errors.Is(err, ErrOverBound):
				return fmt.Errorf("listing tools: %w", err)
			case err != nil:
				missed++
				s.log.Debug("mcp server check failed", "server", s.cfg.Name, "missed", missed, "error", s.redact.Error(err))
				if missed >= 2 {
					return fmt.Errorf("session ended: %d tool listings in a row unanswered within %s (the %s era has no ping): %w", missed, s.cfg.keepAlive()/2, protocolVersion(cs), s.redact.Error(err))
				}
			default:
				missed = 0
				s.setTools(ctx, tools)
			}
		case <-ctx.Done():
			return ctx.Err()
		case err := <-ended:
			ended <- err // for the deferred receive
			if err == nil {
				err = mcp.ErrConnectionClosed
			}
			return fmt.Errorf("session ended: %w", s.dial.explain(err))
		case <-s.broken:
			if s.brokenCS.Load() == cs {
				return fmt.Errorf("session ended: %w", mcp.ErrConnectionClosed)
			}
		case <-s.refresh:
			if !pending {
				pending = true
				relist.Reset(max(0, RelistInterval-time.Since(last)))
			}
		case <-relist.C:
			pending = false
			last = time.Now()
			lctx, cancel := context.WithTimeout(ctx, s.cfg.timeout())
			tools, err := listTools(lctx, cs, s.cfg)
			cancel()
			if errors.Is(err, ErrOverBound) {
				return fmt.Errorf("listing tools: %w", err)
			}
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("mcp server tool refresh failed", "server", s.cfg.Name, "error", s.redact.Error(err))
				}
				continue
			}
			s.setTools(ctx, tools)
			s.refreshes.Add(1)
		}
	}
}

// probeEvery is how often serve checks a session itself: every KeepAlive
// for a session of the 2026-07-28 era (which has no ping: the go-sdk's
// KeepAlive does nothing there), never for an older one (the go-sdk pings
// it).
func (s *server) probeEvery(cs *mcp.ClientSession) time.Duration {
	if !statelessEra(protocolVersion(cs)) {
		return 0
	}
	return s.cfg.keepAlive()
}

// protocolVersion is the MCP version a session negotiated.
func protocolVersion(cs *mcp.ClientSession) string {
	if r := cs.InitializeResult(); r != nil {
		return r.ProtocolVersion
	}
	return ""
}

// nextLegacy says whether the attempt after a failed connect starts with
// initialize (see server.connect).
func nextLegacy(legacy bool, err error) bool {
	return !legacy && errors.Is(err, context.DeadlineExceeded)
}

// legacyVersion is the newest MCP version of the handshake era.
const legacyVersion = "2025-11-25"

// statelessEra reports whether a protocol version is of the 2026-07-28 era
// (no initialize, no sessions, no ping). Versions are dates: they compare
// as strings.
func statelessEra(v string) bool { return v >= "2026-07-28" }

func (s *server) closeSession(cs *mcp.ClientSession) {
	s.endSession(cs)
	_ = cs.Close()
	s.dial.reap()
}

// shutdown runs when the supervisor ends (Stop).
func (s *server) shutdown() {
	s.mu.Lock()
	cs := s.session
	s.session = nil
	s.lastErr = ErrStopped.Error()
	tools := s.tools
	s.tools = nil
	s.mu.Unlock()
	if cs != nil {
		s.closeSession(cs)
	}
	s.dial.reap()
	s.dial.close()
	s.names.Lock()
	for q := range tools {
		s.eng.UnregisterTool(q)
	}
	s.names.Unlock()
	s.firstDone()
}

// regTool is what the server registered under one qualified name: the
// definition, to tell a changed tool from an unchanged one without asking
// the Engine, and the Engine's fingerprint of it.
type regTool struct {
	bare        string
	description string
	schema      json.RawMessage
	annotations json.RawMessage
	fingerprint string
}

// setTools registers what changed in the listing: new and changed tools are
// registered, tools gone are unregistered, unchanged ones are left alone.
// A re-list thus costs what changed, never a pass over every tool of the
// Engine. A changed definition (description or schema) is published as
// [EventToolChanged] with the old and new fingerprints.
func (s *server) setTools(ctx context.Context, tools []listedTool) {
	next := qualifyAll(s.cfg.Name, toolNames(tools))
	byBare := make(map[string]*listedTool, len(tools))
	for i := range tools {
		byBare[tools[i].tool.Name] = &tools[i]
	}
	s.mu.Lock()
	prev := s.tools
	s.mu.Unlock()

	// A name another server (or the host) already holds is not taken over:
	// server names may contain "_", so mcp__a__b__c can arise twice. The
	// check and the claim are one step for the module's servers.
	s.names.Lock()
	defer s.names.Unlock()
	reg := make(map[string]*regTool, len(next))
	var added, removed int
	var changes []toolChange
	for q, bare := range next {
		lt := byBare[bare]
		desc := cleanDescription(lt.tool.Description)
		if desc == "" {
			desc = cleanDescription(lt.tool.Title)
		}
		old, had := prev[q]
		if had && old.bare == bare && old.description == desc && bytes.Equal(old.schema, lt.schema) && bytes.Equal(old.annotations, lt.annotations) {
			reg[q] = old
			continue
		}
		if !had {
			if t, taken := s.eng.Tool(q); taken && t.Server != s.cfg.Name {
				s.log.Warn("mcp tool name already taken; tool skipped", "server", s.cfg.Name, "tool", bare, "name", q, "owner", t.Server)
				continue
			}
		}
		if err := s.eng.RegisterTool(s.engineTool(q, bare, desc, lt)); err != nil {
			s.log.Warn("mcp tool not registered", "server", s.cfg.Name, "tool", q, "error", err)
			continue
		}
		r := &regTool{bare: bare, description: desc, schema: lt.schema, annotations: lt.annotations}
		if t, ok := s.eng.Tool(q); ok {
			r.fingerprint = t.Fingerprint()
		}
		reg[q] = r
		if !had {
			added++
			continue
		}
		if old.fingerprint != r.fingerprint {
			c := toolChange{Server: s.cfg.Name, Tool: q, OldFingerprint: old.fingerprint, NewFingerprint: r.fingerprint, Changed: []string{}}
			if old.description != desc {
				c.Changed = append(c.Changed, "description")
			}
			if !bytes.Equal(old.schema, lt.schema) {
				c.Changed = append(c.Changed, "schema")
			}
			changes = append(changes, c)
		}
	}
	for q := range prev {
		if _, ok := reg[q]; !ok {
			s.eng.UnregisterTool(q)
			removed++
		}
	}
	s.mu.Lock()
	s.tools = reg
	s.mu.Unlock()
	if prev != nil && (added > 0 || removed > 0) {
		s.log.Info("mcp server tools changed", "server", s.cfg.Name, "added", added, "removed", removed, "tools", len(reg))
	}
	for _, c := range changes {
		s.log.Warn("mcp tool definition changed", "server", s.cfg.Name, "tool", c.Tool, "changed", c.Changed,
			"old_fingerprint", c.OldFingerprint, "new_fingerprint", c.NewFingerprint)
		s.publishEvent(ctx, EventToolChanged, c)
	}
}

// toolChange is the payload of [EventToolChanged].
type toolChange struct {
	Server         string   `json:"server"`
	Tool           string   `json:"tool"`
	OldFingerprint string   `json:"old_fingerprint"`
	NewFingerprint string   `json:"new_fingerprint"`
	Changed        []string `json:"changed"` // "description", "schema"
}

func (s *server) engineTool(q, bare, desc string, lt *listedTool) axocoatl.Tool {
	spanName := "tools/call " + bare // once per tool, not per call
	return axocoatl.Tool{
		Name:        q,
		Description: desc,
		Server:      s.cfg.Name,
		Approval:    s.cfg.Approval,
		InputSchema: lt.schema,
		Annotations: lt.annotations,
		Call: func(ctx context.Context, call axocoatl.ToolCall) (axocoatl.ToolResult, error) {
			return s.call(ctx, q, bare, spanName, call)
		},
	}
}

// call runs one tool call of q, the tool's name in the Engine, on the live
// session (spanName: its span's, "tools/call <bare>"). No lock is held
// while the request is in flight.
func (s *server) call(ctx context.Context, q, bare, spanName string, call axocoatl.ToolCall) (axocoatl.ToolResult, error) {
	args := call.Arguments
	s.mu.Lock()
	cs, why := s.session, s.lastErr
	s.mu.Unlock()
	if cs == nil {
		return axocoatl.ToolResult{}, fmt.Errorf("%w: %s (tool %s): %s", ErrServerDown, s.cfg.Name, bare, why)
	}
	params := &mcp.CallToolParams{Name: bare}
	if len(args) > 0 && string(args) != "null" {
		params.Arguments = args
	}
	timeout := s.cfg.timeout()
	// A client span, its trace context in _meta (and the HTTP headers).
	ctx, span := s.startSpan(ctx, cs, q, bare, spanName, call, params)
	info := &callInfo{call: call}
	cctx, id := s.calls.startCall(ctx, timeout, info)
	defer s.calls.end(id)
	// The go-sdk answers a 2026-07-28 InputRequiredResult inside this
	// call, so its elicitation handler sees this ctx and finds the call.
	res, err := cs.CallTool(context.WithValue(cctx, callKey{}, info), params)
	if err != nil {
		// Each failure is told to the span with the error returned (the
		// Engine's execute_tool takes its kind for that error only).
		var ret error
		var kind string
		switch cause := context.Cause(cctx); {
		case ctx.Err() != nil && cause != errStopping:
			// The caller cancelled (a client's cancel, the run's end): not
			// a failure of the server, and not a sign that its session is
			// dead. Checkable with errors.Is(err, context.Canceled), or
			// DeadlineExceeded when the caller's deadline passed (the
			// run's timeout): error.type "timeout" then, as the Engine
			// names it, not a cancel.
			kind = "canceled"
			if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
				kind = "timeout"
			}
			ret = fmt.Errorf("mcp server %s: tool %s: %w", s.cfg.Name, bare, ctx.Err())
		case cause == errStopping:
			ret, kind = fmt.Errorf("%w: mcp server %s: tool %s cancelled", ErrStopped, s.cfg.Name, bare), "stopped"
		case cause == errDeadline && ctx.Err() == nil:
			ret, kind = fmt.Errorf("%w: mcp server %s: tool %s: no result within %s: %w", ErrTimeout, s.cfg.Name, bare, timeout, context.DeadlineExceeded), "timeout"
		case sessionDead(err):
			ret, kind = fmt.Errorf("%w: %s (tool %s): %w", ErrServerDown, s.cfg.Name, bare, s.redact.Error(err)), "session_closed"
			s.brokenCS.Store(cs)
			select {
			case s.broken <- struct{}{}:
			default:
			}
		default:
			ret, kind = fmt.Errorf("mcp server %s: tool %s: %w", s.cfg.Name, bare, s.redact.Error(err)), "_OTHER"
		}
		endSpan(span, nil, ret, kind)
		return axocoatl.ToolResult{}, ret
	}
	endSpan(span, res, nil, "")
	// Every result, successful or failed, is scrubbed here, before the
	// model, an event, a log or an answer sees it: a server may quote the
	// credentials it was sent or could read (get-env of server-everything
	// prints the whole inherited environment).
	out := toResult(res)
	out.Content = s.redact.String(out.Content)
	if out.Structured != nil {
		out.Structured = s.redact.Bytes(out.Structured)
	}
	return out, nil
}

type serverEvent struct {
	Server string   `json:"server"`
	Tools  []string `json:"tools"`
	Error  string   `json:"error,omitempty"`
}

func (s *server) publish(ctx context.Context, typ string, tools []string, errMsg string) {
	if tools == nil {
		tools = []string{}
	}
	s.publishEvent(ctx, typ, serverEvent{Server: s.cfg.Name, Tools: tools, Error: errMsg})
}

func (s *server) publishEvent(ctx context.Context, typ string, payload any) {
	err := s.eng.Publish(context.WithoutCancel(ctx), typ, producer, payload)
	if err != nil && !errors.Is(err, lattice.ErrClosed) {
		s.log.Warn("publish failed", "type", typ, "error", err)
	}
}

func (s *server) toolNamesLocked() []string {
	names := make([]string, 0, len(s.tools))
	for q := range s.tools {
		names = append(names, q)
	}
	sort.Strings(names)
	return names
}

func (s *server) status() ServerStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := ServerStatus{
		Name:      s.cfg.Name,
		Transport: s.cfg.Transport(),
		Connected: s.session != nil,
		Tools:     s.toolNamesLocked(),
		Error:     s.lastErr,
	}
	if s.session == nil && s.dial.oauth != nil {
		st.NeedsLogin = s.dial.oauth.needsLogin()
	}
	if s.session != nil {
		st.ProtocolVersion = protocolVersion(s.session)
	}
	return st
}

// sessionDead reports errors that mean the session is gone: the connection
// closed (a child that died mid-call gives EOF), the HTTP session expired,
// or the HTTP server no longer accepts connections.
func sessionDead(err error) bool {
	var opErr *net.OpError
	// EPIPE: a stdio child that died as the call was written to it.
	return errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, mcp.ErrSessionMissing) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &opErr) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, os.ErrClosed)
}

// warnTooShort names the configured secrets too short to be scrubbed
// (see [MinRedactLen]).
func warnTooShort(log *slog.Logger, server string, keys []string) {
	for _, k := range keys {
		log.Warn("mcp server secret too short to redact: it is not scrubbed from what the server says",
			"server", server, "key", k, "min_length", MinRedactLen)
	}
}
