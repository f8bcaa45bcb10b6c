// Package mcpserver is a door: it exposes an Engine's agents as MCP tools,
// one tool per agent, named agent_<id> ([ToolPrefix]), taking
// {"input": "..."} and returning the agent's output as text. An optional
// "conversation_id" argument makes a call a turn of a conversation
// ([axocoatl.Request].ConversationID): "new" starts one, and the result's
// _meta[[MetaConversationID]] is the id to pass to continue it. It speaks MCP
// over stdio ([Server.ServeStdio]) and over streamable HTTP ([Server] is an
// [http.Handler], to mount at [Path] or anywhere on any mux).
//
// # In Go terms
//
// A host fills a [Config] (its zero value is usable), builds the [Server]
// with [New] and attaches it with [axocoatl.Engine.Use], which calls
// [Server.Start] (the Server is the [axocoatl.Module]); [axocoatl.Engine.Close]
// calls [Server.Stop], which ends every session. Then it mounts the Server on
// its mux, or hands it the process's stdin and stdout, or both: one Server
// serves any number of sessions on both transports. [Server.Routes] lists the
// HTTP doors for hosts that compose routes ([axocoatl.Route]).
//
// The Engine hooks it uses: every tools/call ends in
// [axocoatl.Engine.ExecuteRequest] with [axocoatl.SourceMCP]; the tool list
// follows [axocoatl.Engine.Agents] and is refreshed by
// [axocoatl.Engine.WatchAgents] (a client with a GET stream gets
// tools/list_changed); progress comes from the run's own events
// ([axocoatl.Request].OnEventSync: its text deltas, [agent.RunToolStarted]
// and [agent.RunToolFinished]); every HTTP
// request passes the Engine's guard ([axocoatl.Engine.GuardHTTP]); and a gate
// that asks the caller (approval) reaches the calling client through the
// [axocoatl.UserPrompter] put on the run's context
// ([axocoatl.WithUserPrompter]), as MCP form elicitation.
//
// It is built on the official go-sdk's [mcp.Server] ([Server.MCP]); what this
// package adds is the bridge to [axocoatl.Engine.ExecuteRequest], progress
// notifications while a run is going, the Engine's HTTP guard, bounds on
// every incoming message ([Config].MaxMessageBytes, MaxMessageValues,
// MaxMessageDepth, MaxBytesInFlight, MaxSessions), and a stdio framing layer
// that answers malformed input with JSON-RPC errors instead of ending the
// session.
//
// Two eras of the protocol are served side by side, on both transports:
//
//   - 2026-07-28, the stateless era: no initialize, a server/discover probe,
//     the protocol version and client capabilities in each request's _meta.
//     Over HTTP every request stands alone (no Mcp-Session-Id, no GET
//     stream), so any Server with the same agents can answer it.
//   - 2025-11-25 and older, the handshake era: initialize, then a session
//     (over HTTP, the Mcp-Session-Id header and a GET stream).
//
// A client picks: one that prefers 2026-07-28 (go-sdk v1.8, mcp-go v1.2)
// probes server/discover and gets it; one that sends initialize gets the
// version it asked for, or 2025-11-25. See [ProtocolVersions].
//
// # Cancellation, progress and elicitation in each era
//
// Progress is the same in both: a tools/call with a progressToken gets
// notifications/progress when the run starts, for each tool it calls,
// every [Config].ProgressInterval, and with the answer's text so far (its
// last [ProgressTextBytes], at most every [ProgressTextInterval]), on the
// call's own stream (stdio, or the POST's SSE response). Only such a call
// listens to the run: one without a token has its model asked for a plain
// answer. Cancellation ends the run in both: in the handshake
// era by notifications/cancelled (stdio and HTTP); in the stateless era by
// notifications/cancelled on stdio, and over HTTP by the client closing the
// call's POST (go-sdk's client does both; the POST's end is what counts, as
// a notification on another POST reaches no session). Elicitation (the
// approval gate, or a question, asking the calling client's user) takes
// each era's shape: in the handshake era an elicitation request mid-call;
// in the stateless era, which forbids requests from server to client
// mid-call, an InputRequiredResult (SEP-2322) with a form elicitation and
// an integrity-protected requestState, answered by the client's retry of
// the call with its inputResponses, while the run waits, owned by the
// Server ([Config].InputTimeout, [Config].MaxInputCalls; see mrtr.go). A
// client that declares no form elicitation cannot be asked: the gate is
// told at once ([ErrNoElicitation]) and decides through its other
// channels, or denies the call at once when it has none.
package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sync/semaphore"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/internal/cfgerr"
	"github.com/axocoatl/axocoatl-go/internal/lifecycle"
	"github.com/axocoatl/axocoatl-go/lattice"
)

// ToolPrefix starts the name of every agent tool: agent_<id>.
const ToolPrefix = "agent_"

// ProtocolVersion2026 is the stateless era of MCP (no initialize, no
// sessions); every older version in [ProtocolVersions] is of the handshake
// era. Versions are dates, so they compare as strings.
const ProtocolVersion2026 = "2026-07-28"

// ProtocolVersions returns the MCP versions the server negotiates, newest
// first: the stateless era's, then the handshake era's.
func ProtocolVersions() []string {
	return []string{ProtocolVersion2026, "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}
}

// statelessEra reports whether a protocol version is of the stateless era.
func statelessEra(v string) bool { return v >= ProtocolVersion2026 }

// Defaults applied to a zero [Config].
const (
	DefaultName             = "axocoatl"
	DefaultVersion          = "dev"
	DefaultProgressInterval = 5 * time.Second
	DefaultSessionTimeout   = 30 * time.Minute
	DefaultMaxMessageBytes  = 4 << 20
	DefaultMaxSessions      = 1000
	DefaultMaxMessageValues = 10000
	DefaultMaxMessageDepth  = 64
	DefaultMaxBytesInFlight = 64 << 20
)

// Errors returned by the package; check them with [errors.Is].
var (
	// ErrClosed is returned by [Server.ServeStdio] after [Server.Close].
	ErrClosed = errors.New("mcpserver: closed")
	// ErrInvalidConfig is [axocoatl.ErrInvalidConfig], kept under this
	// name for the callers that check errors.Is(err,
	// mcpserver.ErrInvalidConfig).
	ErrInvalidConfig = axocoatl.ErrInvalidConfig
)

// inputSchema is the schema of every agent tool, byte for byte as the
// contract gives it: the input, and the conversation handle that the
// 2026-07-28 era carries between calls as an argument (no session holds
// state for a client).
var inputSchema = json.RawMessage(`{"type":"object","properties":{"input":{"type":"string"},` +
	`"conversation_id":{"type":"string","description":"Optional. \"new\" starts a conversation with the agent; pass the conversation_id a result returned to continue it. Absent: a one-shot call, remembered nowhere."}},` +
	`"required":["input"]}`)

// Config configures a [Server]. The zero value is usable; every field's comment
// says what zero means.
type Config struct {
	// Name is the serverInfo.name clients see. Zero: "axocoatl".
	Name string `yaml:"name"`
	// Version is the serverInfo.version clients see. Zero: "dev".
	Version string `yaml:"version"`
	// Instructions are sent to clients at initialization. Zero: a sentence
	// saying each agent is a tool taking {"input": "..."}.
	Instructions string `yaml:"instructions"`
	// ProgressInterval is how often a running call reports that it is still
	// running, when the client asked for progress (a progressToken); tool
	// calls of the run are reported as they happen, the answer's text at
	// most every [ProgressTextInterval]. Zero: 5s. Negative: no periodic
	// reports, tool calls and text only.
	ProgressInterval time.Duration `yaml:"progress_interval"`
	// SessionTimeout closes HTTP sessions that see no request for this long.
	// Zero: 30m. Negative: never.
	SessionTimeout time.Duration `yaml:"session_timeout"`
	// MaxMessageBytes bounds one incoming JSON-RPC message: a stdio line or
	// an HTTP request body (a larger declared body gets 413). Zero: 4 MiB.
	MaxMessageBytes int64 `yaml:"max_message_bytes"`
	// MaxMessageValues bounds the JSON values of one incoming message: the
	// message itself, every object member and every array element, at any
	// depth (_meta, params and arguments alike). A message costs its
	// decoder per value more than per byte (88,000 _meta keys in 3.6 MiB
	// took the go-sdk nine times their bytes of memory, and 44 times in
	// allocations, to decode); one over the bound gets a
	// -32600 error naming it, before anything decodes it. Zero: 10,000.
	// Negative: no bound.
	MaxMessageValues int `yaml:"max_message_values"`
	// MaxMessageDepth bounds the nesting of objects and arrays in one
	// incoming message; a deeper one gets a -32600 error naming it. Zero:
	// 64. Negative: no bound of this server's (the go-sdk refuses more
	// than 1,000 levels). At most 999.
	MaxMessageDepth int `yaml:"max_message_depth"`
	// MaxBytesInFlight bounds the bytes of HTTP request bodies held at once
	// across requests, from their reading until their POST is answered
	// (what a body costs is held that long: its decoded message lives as
	// long as the call). A POST waits for room before its body is read
	// (its declared Content-Length, or MaxMessageBytes when undeclared,
	// until the body is read), for at most the Engine's body timeout
	// ([axocoatl.HTTPOptions].BodyTimeout), then gets 503 with a -32000
	// error. A subscriptions/listen holds its room until its stream ends,
	// as its message lives that long. Zero: 64 MiB, or MaxMessageBytes
	// when that is larger. Negative: no bound. At least MaxMessageBytes.
	MaxBytesInFlight int64 `yaml:"max_bytes_in_flight"`
	// MaxSessions bounds the HTTP sessions open at once: handshake-era
	// sessions (each holds memory until DELETE or SessionTimeout) and
	// 2026-07-28 subscriptions/listen streams (each holds a session while
	// the client keeps it open). An initialize or a subscriptions/listen
	// beyond it gets 503. Zero: 1000. Negative: no bound. (A stdio
	// session's listens have their own bound, [MaxStdioListens].)
	MaxSessions int `yaml:"max_sessions"`
	// ResumeBufferBytes bounds the messages kept, across all sessions, so
	// that a 2025-11-25 client whose SSE stream broke can GET the rest with
	// Last-Event-ID: each POST answered over SSE then begins with a
	// priming event (an id, and retry: 1000, the milliseconds to wait
	// before resuming), sent with the call's first message or alone once
	// the call has taken 100 ms. Beyond it the streams touched longest ago are
	// dropped whole (each counts its bytes, 32 bytes per message and 256
	// per POST's stream; the bound is passed by at most the message being
	// added), and resuming one of those gets a 400. Zero: 4 MiB.
	// Negative: no resumption and no priming event. (The 2026-07-28 era
	// has no resumption.)
	ResumeBufferBytes int64 `yaml:"resume_buffer_bytes"`
	// InputTimeout is how long a 2026-07-28 call's run waits between rounds
	// for its client to come back with its inputResponses, after an
	// InputRequiredResult; its requestState expires then (or when the
	// approval it asks about expires, if sooner) and the run ends; a run
	// a stdio session started ends with the session. Zero: 5m.
	InputTimeout time.Duration `yaml:"input_timeout"`
	// MaxInputCalls bounds the 2026-07-28 calls whose runs wait between
	// rounds at once; a run's question beyond it is not put to its client
	// (the gate's other channels answer, or it is denied). Zero: 100.
	MaxInputCalls int `yaml:"max_input_calls"`
	// DataDir keeps the key of the 2026-07-28 requestStates
	// ([StateKeyFile], created 0600 on first use). Set by the host (the
	// daemon passes its data dir), not read from the config file. Zero: a
	// key in memory, new at each start.
	DataDir string `yaml:"-"`
	// Logger receives the server's logs. Zero: the Engine's logger.
	Logger *slog.Logger `yaml:"-"`
}

// Validate checks the config. Its errors are [*axocoatl.ConfigError] values
// naming the key, without a package prefix: hosts put them at the key's
// position ("axocoatl.yaml:12: mcp_server.max_message_bytes: …").
func (c Config) Validate() error {
	if c.MaxMessageBytes < 0 {
		return cfgerr.Errorf("max_message_bytes", "must not be negative")
	}
	if c.InputTimeout < 0 {
		return cfgerr.Errorf("input_timeout", "must not be negative")
	}
	if c.MaxInputCalls < 0 {
		return cfgerr.Errorf("max_input_calls", "must not be negative")
	}
	if c.MaxMessageDepth > 999 {
		return cfgerr.Errorf("max_message_depth", "must be at most 999 (the go-sdk refuses 1,000 levels), not %d", c.MaxMessageDepth)
	}
	msg := c.MaxMessageBytes
	if msg == 0 {
		msg = DefaultMaxMessageBytes
	}
	if c.MaxBytesInFlight > 0 && c.MaxBytesInFlight < msg {
		return cfgerr.Errorf("max_bytes_in_flight", "%d must be at least max_message_bytes (%d): a message of that size could never be read", c.MaxBytesInFlight, msg)
	}
	return nil
}

func (c Config) withDefaults(e *axocoatl.Engine) Config {
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.Version == "" {
		c.Version = DefaultVersion
	}
	if c.Instructions == "" {
		c.Instructions = "Each tool agent_<id> runs the Axocoatl agent <id> on the text in its \"input\" argument and returns the agent's answer. " +
			"To hold a conversation, pass \"conversation_id\": \"new\", then the conversation_id the result returns."
	}
	if c.ProgressInterval == 0 {
		c.ProgressInterval = DefaultProgressInterval
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = DefaultSessionTimeout
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.MaxSessions == 0 {
		c.MaxSessions = DefaultMaxSessions
	}
	if c.MaxMessageValues == 0 {
		c.MaxMessageValues = DefaultMaxMessageValues
	}
	if c.MaxMessageDepth == 0 {
		c.MaxMessageDepth = DefaultMaxMessageDepth
	}
	if c.ResumeBufferBytes == 0 {
		c.ResumeBufferBytes = DefaultResumeBufferBytes
	}
	if c.MaxBytesInFlight == 0 {
		c.MaxBytesInFlight = max(DefaultMaxBytesInFlight, c.MaxMessageBytes) // room for one message at least
	}
	if c.InputTimeout == 0 {
		c.InputTimeout = DefaultInputTimeout
	}
	if c.MaxInputCalls == 0 {
		c.MaxInputCalls = DefaultMaxInputCalls
	}
	if c.Logger == nil {
		c.Logger = e.Logger()
	}
	return c
}

// Server exposes an Engine's agents as MCP tools. It is an
// [axocoatl.Module]: create it with [New], start it with [axocoatl.Engine.Use]
// (which binds it to that Engine), and [axocoatl.Engine.Close] stops it,
// ending every session. It is safe for concurrent use; one Server serves any
// number of stdio and HTTP sessions at once. Until it is started, HTTP
// requests get 503 and ServeStdio an error.
type Server struct {
	cfg Config

	// life is marked started once by Start; engine, log, mcp and http are
	// written before it and read only after it. Close stops it.
	life   lifecycle.State
	engine *axocoatl.Engine
	log    *slog.Logger
	mcp    *mcp.Server
	http   http.Handler

	// mu guards tools: the agent ids already registered as tools, and the
	// start. Agents added to the Engine later are picked up on the next
	// tools/list or on a call of their tool (see syncTools).
	mu    sync.RWMutex
	tools map[string]bool
	// nodes says where each tool's agent runs ("" here), to replace the
	// tool when a cluster's agent moves; stopWatch ends the Engine watch
	// that keeps the tools in step with the agents.
	nodes     map[string]string
	stopWatch func()

	// posts counts HTTP POSTs being served (calls and their streams), so
	// Shutdown can let them finish before it ends the sessions.
	posts sync.WaitGroup
	// postMu orders posts.Add against Shutdown's Wait (an Add from zero
	// must not race a Wait): Shutdown sets draining under it, and a POST
	// is counted only while draining is false.
	postMu   sync.Mutex
	draining bool
	// listens counts the open 2026-07-28 subscriptions/listen streams,
	// and initializing the initialize POSTs being served: MaxSessions
	// bounds them with the handshake era's sessions (reserveSession).
	listens      atomic.Int64
	initializing atomic.Int64
	// bodyBytes holds MaxBytesInFlight's room (nil: no bound).
	bodyBytes *semaphore.Weighted
	// resume keeps the handshake era's SSE messages for Last-Event-ID
	// (nil: ResumeBufferBytes negative).
	resume *resumeStore
	// streams holds the cancel of every long-lived HTTP request (a GET
	// stream, a subscriptions/listen): Close ends them, including one that
	// arrived while Close was closing the sessions (its session did not
	// exist yet), which would otherwise stay open for the HTTP server's
	// whole grace period.
	streamMu   sync.Mutex
	streams    map[uint64]context.CancelFunc
	lastStream uint64
	// openStreams counts the registered streams' handlers, for Close to
	// wait until they are out of the go-sdk: closing a session that is
	// still being connected races inside it.
	openStreams sync.WaitGroup
	// inputs holds the 2026-07-28 calls' runs between their rounds (see
	// mrtr.go).
	inputs inputs
}

// ErrNotStarted is returned by [Server.ServeStdio] before the [Server] is
// started ([Server.Start]).
var ErrNotStarted = errors.New("mcpserver: module not started: pass it to Engine.Use")

// New returns a Server; pass it to [axocoatl.Engine.Use] to serve that
// Engine's agents.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, tools: map[string]bool{}}
	s.inputs.instance = lattice.NewID(time.Now())
	return s, nil
}

// Name, [Server.Start] and [Server.Stop] make the Server an [axocoatl.Module].
func (s *Server) Name() string { return "mcpserver" }

// Start binds the Server to e and builds its MCP server ([Server.MCP]); it starts no
// goroutine (sessions start with their transports).
func (s *Server) Start(_ context.Context, e *axocoatl.Engine) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.life.CheckStart("mcpserver", ErrClosed); err != nil {
		return err
	}
	cfg := s.cfg.withDefaults(e)
	s.cfg = cfg
	s.engine = e
	s.log = cfg.Logger.With("module", "mcpserver")
	if cfg.MaxBytesInFlight > 0 {
		s.bodyBytes = semaphore.NewWeighted(cfg.MaxBytesInFlight)
	}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: cfg.Name, Title: "Axocoatl agents", Version: cfg.Version}, &mcp.ServerOptions{
		Instructions: cfg.Instructions,
		// The go-sdk logs every connection at Info; keep its warnings only.
		Logger: slog.New(minLevel{s.log.Handler(), slog.LevelWarn}),
		// Tools are advertised even before any agent exists, with
		// listChanged, so that clients hear about agents added later. No
		// logging capability: the server sends no log notifications.
		Capabilities:              &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
		SupportedProtocolVersions: ProtocolVersions(),
	})
	s.mcp.AddReceivingMiddleware(s.syncMiddleware, s.identityMiddleware)
	s.syncToolsLocked()
	s.stopWatch = e.WatchAgents(s.syncTools)

	sessionTimeout := cfg.SessionTimeout
	if sessionTimeout < 0 {
		sessionTimeout = 0 // the go-sdk's "never"
	}
	sdkLog := slog.New(minLevel{s.log.Handler(), slog.LevelWarn})
	getServer := func(*http.Request) *mcp.Server { return s.mcp }
	// Two go-sdk handlers, one per era: the go-sdk serves 2026-07-28 over
	// HTTP only from a stateless handler, and the handshake era's sessions
	// (and their server-to-client requests: elicitation) only from a
	// stateful one. ServeHTTP routes each request by its era.
	sessionOpts := mcp.StreamableHTTPOptions{
		SessionTimeout:      sessionTimeout,
		MaxRequestBodyBytes: cfg.MaxMessageBytes,
		Logger:              sdkLog,
		// The Engine's guard checks Host and Origin for every door alike
		// (the go-sdk's own check would refuse the public_url host on a
		// loopback listener that the other doors accept).
		DisableLocalhostProtection: true,
	}
	if cfg.ResumeBufferBytes > 0 {
		// With a store the go-sdk primes each POST's SSE answer with an
		// event id (2025-11-25) and replays from it on a GET with
		// Last-Event-ID: the id promises a resumption the store keeps.
		s.resume = newResumeStore(cfg.ResumeBufferBytes)
		sessionOpts.EventStore = s.resume
	}
	sessions := mcp.NewStreamableHTTPHandler(getServer, &sessionOpts)
	statelessOpts := mcp.StreamableHTTPOptions{
		Stateless:                  true,
		MaxRequestBodyBytes:        cfg.MaxMessageBytes,
		Logger:                     sdkLog,
		DisableLocalhostProtection: true,
		// In this era the POST is the call: a client that cancels closes
		// it, and that must cancel the run (a notifications/cancelled on
		// another POST reaches no session).
		PropagateRequestCancellation: true,
	}
	stateless := mcp.NewStreamableHTTPHandler(getServer, &statelessOpts)
	// A stateless request that asked for no progress gets its answer as
	// plain JSON: nothing else can come on its stream (see post.quiet),
	// and a client reads JSON for less than an SSE stream.
	statelessOpts.JSONResponse = true
	statelessJSON := mcp.NewStreamableHTTPHandler(getServer, &statelessOpts)
	s.http = e.GuardHTTP(axocoatl.HTTPRoute{Scope: axocoatl.ScopeRead, MaxBodyBytes: cfg.MaxMessageBytes}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.life.Stopped() { // inside the guard: the unread body is drained under its deadline
			writeHTTPError(w, http.StatusServiceUnavailable, "server closed")
			return
		}
		sdk := sessions
		era2026 := statelessEra(r.Header.Get(headerProtocolVersion))
		if era2026 {
			sdk = stateless
		}
		if r.Method == http.MethodGet {
			ctx, end, ok := s.openStream(r.Context())
			if !ok {
				writeHTTPError(w, http.StatusServiceUnavailable, "server closed")
				return
			}
			defer end()
			r = r.WithContext(ctx)
		}
		if r.Method == http.MethodPost {
			if !s.beginPost() {
				writeHTTPError(w, http.StatusServiceUnavailable, "server shutting down")
				return
			}
			p, ok := s.precheckPOST(w, r, era2026)
			if !ok {
				s.posts.Done()
				return
			}
			// A listen holds its room while its stream is open too: the
			// go-sdk keeps its body and decoded message that long (given
			// back once read, 1,000 listens of 4 MiB held some 12 GiB).
			defer s.unholdBytes(p.held)
			if era2026 && p.quiet {
				sdk = statelessJSON
				w = &jsonAnswerWriter{ResponseWriter: w}
			}
			if p.listen {
				// A subscriptions/listen stream lasts as long as the
				// client wants: Shutdown does not wait for it (Close
				// ends it).
				s.posts.Done()
				ctx, end, ok := s.openStream(r.Context())
				if !ok {
					p.release()
					writeHTTPError(w, http.StatusServiceUnavailable, "server closed")
					return
				}
				defer end()
				r = r.WithContext(ctx)
			} else {
				defer s.posts.Done()
			}
			switch {
			case p.release != nil && p.listen:
				defer p.release()
			case p.release != nil:
				// An initialize's slot goes back when its answer starts:
				// its session is listed by then, and a client holding the
				// answer must not find it counted twice (a handler
				// descheduled after answering refused a listen that fitted).
				ra := &releaseOnAnswer{ResponseWriter: w, release: p.release}
				defer ra.answered()
				w = ra
			}
		}
		if r.Method == http.MethodPost && !era2026 && s.resume != nil {
			pw := &primeWriter{ResponseWriter: w}
			defer pw.finish()
			w = pw
		}
		serveSDK(sdk, w, r)
	}))
	s.life.MarkStarted()
	return nil
}

// frameLimits are the message bounds of the config, for checkFrame.
func (s *Server) frameLimits() frameLimits {
	return frameLimits{values: max(s.cfg.MaxMessageValues, 0), depth: max(s.cfg.MaxMessageDepth, 0)}
}

// openStream registers a long-lived request for Close to end; ok false:
// Close began.
func (s *Server) openStream(parent context.Context) (ctx context.Context, end func(), ok bool) {
	s.streamMu.Lock()
	defer s.streamMu.Unlock()
	if s.life.Stopped() {
		return nil, nil, false
	}
	ctx, cancel := context.WithCancel(parent)
	s.lastStream++
	id := s.lastStream
	if s.streams == nil {
		s.streams = map[uint64]context.CancelFunc{}
	}
	s.streams[id] = cancel
	s.openStreams.Add(1) // under streamMu while not closed: Close's Wait comes after
	return ctx, func() {
		s.streamMu.Lock()
		delete(s.streams, id)
		s.streamMu.Unlock()
		cancel()
		s.openStreams.Done()
	}, true
}

// streamsEndWithin bounds how long Close waits for the streams it ended to
// leave their handlers (they return as soon as their context ends).
const streamsEndWithin = 5 * time.Second

// beginPost counts a POST for Shutdown to wait for, unless Shutdown began
// (then the POST is refused: it would not be waited for).
func (s *Server) beginPost() bool {
	s.postMu.Lock()
	defer s.postMu.Unlock()
	if s.draining {
		return false
	}
	s.posts.Add(1)
	return true
}

// Stop is [Server.Close].
func (s *Server) Stop(context.Context) error { return s.Close() }

// MCP returns the underlying go-sdk server once started, to serve it over
// another transport ([mcp.NewInMemoryTransports] in tests, a custom one in a
// host); nil before. Add nothing to it: its tools mirror the Engine's agents.
func (s *Server) MCP() *mcp.Server {
	if !s.life.Started() {
		return nil
	}
	return s.mcp
}

// Shutdown lets the HTTP requests in flight (calls and their answers)
// finish, within ctx, then ends every session — the GET streams that wait
// for notifications included, which [http.Server.Shutdown] would otherwise
// wait on for its whole grace period. A POST that arrives once Shutdown
// began gets 503. Call it beside [http.Server.Shutdown].
func (s *Server) Shutdown(ctx context.Context) error {
	s.postMu.Lock()
	s.draining = true
	s.postMu.Unlock()
	done := make(chan struct{})
	go func() { s.posts.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return s.Close()
}

// Close ends every open session (stdio and HTTP); calls in flight are
// cancelled. Further HTTP requests get 503 and [Server.ServeStdio] returns [ErrClosed].
// Close does not close the Engine.
func (s *Server) Close() error {
	s.mu.Lock()
	s.life.Stop()
	s.mu.Unlock()
	// After closed is set: a stream that registers from now on is refused.
	s.streamMu.Lock()
	for _, cancel := range s.streams {
		cancel()
	}
	s.streamMu.Unlock()
	ended := make(chan struct{})
	go func() { s.openStreams.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(streamsEndWithin):
	}
	s.closeInputs(streamsEndWithin)
	if !s.life.Started() {
		return nil
	}
	s.stopWatch() // outside s.mu: a sync in progress takes it
	var errs []error
	for ss := range s.mcp.Sessions() {
		if err := ss.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// syncMiddleware registers the tools of newly added agents before the
// requests that can see them: tools/list, and a call of a tool not yet known.
func (s *Server) syncMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "tools/list":
			s.syncTools()
		case "tools/call":
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && strings.HasPrefix(p.Name, ToolPrefix) {
				s.mu.RLock()
				known := s.tools[strings.TrimPrefix(p.Name, ToolPrefix)]
				s.mu.RUnlock()
				if !known {
					s.syncTools()
				}
			}
		}
		return next(ctx, method, req)
	}
}

// syncTools makes the tools match the Engine's agents: a tool for every
// agent that has none yet, and, as agents of other daemons of a cluster
// come and go, their tools added, moved or removed (clients hear
// tools/list_changed). It runs on each tools/list, on a call of an unknown
// tool and whenever the Engine's agent set changes ([axocoatl.Engine.WatchAgents]).
func (s *Server) syncTools() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.life.Stopped() {
		return
	}
	s.syncToolsLocked()
}

func (s *Server) syncToolsLocked() {
	agents := s.engine.Agents()
	if s.nodes == nil {
		s.nodes = map[string]string{}
	}
	seen := make(map[string]bool, len(agents))
	for _, a := range agents {
		seen[a.ID] = true
		if s.tools[a.ID] && s.nodes[a.ID] == a.Node {
			continue
		}
		s.tools[a.ID] = true
		s.nodes[a.ID] = a.Node
		// AddTool does no I/O (the go-sdk sends tools/list_changed to the
		// sessions from a timer, 10 ms later) and never takes s.mu, so
		// holding s.mu here is cheap and safe; it keeps a concurrent call of
		// the new tool from finding it marked known but not yet added. An
		// agent that moved to another daemon replaces its tool.
		s.mcp.AddTool(toolFor(a), s.callAgent(a.ID))
	}
	var gone []string
	for id := range s.tools {
		if !seen[id] { // a remote agent whose daemon left
			gone = append(gone, ToolPrefix+id)
			delete(s.tools, id)
			delete(s.nodes, id)
		}
	}
	if len(gone) > 0 {
		s.mcp.RemoveTools(gone...)
	}
}

// toolFor describes an agent as an MCP tool.
func toolFor(a axocoatl.AgentInfo) *mcp.Tool {
	desc := a.Description
	if desc == "" {
		desc = a.Name
	}
	return &mcp.Tool{
		Name:        ToolPrefix + a.ID,
		Title:       a.Name,
		Description: desc,
		InputSchema: inputSchema,
		Annotations: annotationsFor(a),
		Meta:        nodeMeta(a),
	}
}

// annotationsFor says what running the agent does. A run is never read-only
// (it starts a task, publishes events and may call tools) nor idempotent (a
// model answers afresh each time). It is destructive when the agent may call
// tools, which can do anything; open-world when it talks to a model service
// or tools outside the process. Only a model that declares itself offline
// (agent.Offline, as the echo model does) makes an agent neither: a model
// the Engine knows nothing about is assumed to reach the world.
func annotationsFor(a axocoatl.AgentInfo) *mcp.ToolAnnotations {
	mayCallTools := a.Tools == nil || len(a.Tools) > 0
	offline := a.Offline
	destructive := mayCallTools && !offline
	openWorld := !offline
	return &mcp.ToolAnnotations{
		Title:           a.Name,
		ReadOnlyHint:    false,
		DestructiveHint: &destructive,
		IdempotentHint:  false,
		OpenWorldHint:   &openWorld,
	}
}

// MetaTaskID is the _meta key of a call result that carries the Engine's
// task id, to find the run's events on the lattice.
const MetaTaskID = "axocoatl/task_id"

// MetaConversationID is the _meta key of a call result that carries the
// conversation the call was a turn of (its conversation_id argument, or
// the new one's id); absent for a one-shot call.
const MetaConversationID = "axocoatl/conversation_id"

// callAgent bridges a tools/call of agent_<id> to Engine.ExecuteRequest.
func (s *Server) callAgent(agentID string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
		// The caller's trace continues in the run (trace.go).
		ctx, span := s.startSpan(ctx, req)
		defer func() { endSpan(span, res, err) }()
		input, err := axocoatl.ParseInput(req.Params.Arguments)
		if err != nil {
			return errorResult(err.Error(), nil), nil
		}
		convID, err := conversationArg(req.Params.Arguments)
		if err != nil {
			return errorResult(err.Error(), nil), nil
		}
		taskID := lattice.NewID(time.Now())
		// Only a call that asked for progress listens to the run: a call
		// without a token has its model asked for a plain answer.
		var onEvent func(agent.RunEvent)
		if token := req.Params.GetProgressToken(); token != nil {
			text := newAnswerTail()
			// On the model's goroutine (OnEventSync): observe copies the
			// delta and wakes the reporter, which writes; no goroutine of
			// the Engine's between them.
			onEvent = text.observe
			stop := s.reportProgress(ctx, req.Session, token, agentID, taskID, text)
			defer stop()
		}
		run := func(ctx context.Context, p axocoatl.UserPrompter) *mcp.CallToolResult {
			if p != nil {
				ctx = axocoatl.WithUserPrompter(ctx, p)
			}
			// ctx is cancelled by the go-sdk when the client sends
			// notifications/cancelled for this request or the session
			// ends, and that cancels the run.
			//
			// The conversation ids of this door are the server's handles:
			// an unknown one is an error (CreateConversation false), never
			// a conversation started under a name the client made up.
			res, err := s.engine.ExecuteRequest(ctx, axocoatl.Request{AgentID: agentID, Input: input, Source: axocoatl.SourceMCP, TaskID: taskID, ConversationID: convID, OnEventSync: onEvent})
			return callResult(taskID, res, err)
		}
		// The caller's identity: the Engine runs only agents it sees, and
		// only for a caller with the execute scope.
		ctx = axocoatl.WithIdentity(ctx, requestIdentity(req))
		// A 2026-07-28 client that can show forms is asked through
		// InputRequiredResults (mrtr.go); its run outlives the request.
		if statelessEra(req.ProtocolVersion()) && inputCapable(req) {
			return s.callWithInput(ctx, req, run)
		}
		if req.Params.RequestState != "" {
			return nil, stateError(fmt.Errorf("%w: this call carries a requestState but its client declares no form elicitation", ErrStateReplayed))
		}
		// A client of the handshake era that can show forms is asked to
		// approve gated tool calls of the run (see elicitPrompter).
		return run(ctx, elicitPrompter(req)), nil
	}
}

// callResult is the tools/call result of a run.
func callResult(taskID string, res axocoatl.Result, err error) *mcp.CallToolResult {
	meta := mcp.Meta{MetaTaskID: taskID}
	var result *mcp.CallToolResult
	if err != nil {
		result = errorResult(err.Error(), meta)
	} else {
		result = &mcp.CallToolResult{Meta: meta, Content: []mcp.Content{&mcp.TextContent{Text: res.Output}}}
	}
	if res.ConversationID != "" {
		// The turn was recorded (a failed one too): say how to go on, in
		// _meta for programs and in the text for a model that reads only
		// the content.
		meta[MetaConversationID] = res.ConversationID
		result.Content = append(result.Content, &mcp.TextContent{Text: continueLine(res.ConversationID)})
	}
	return result
}

// continueLine is the line of text a result of a conversation's turn ends
// with.
func continueLine(id string) string {
	return "conversation_id: " + id + " (pass it to continue this conversation)"
}

// conversationArg reads the optional "conversation_id" of a tool's
// arguments, which [axocoatl.ParseInput] has found to be an object: ""
// when absent (or ""), an error when it is not a string. Arguments that
// cannot hold the key (no "conversation", no \u escape that could spell
// it) are not decoded again: most calls are {"input": "…"} alone.
func conversationArg(args json.RawMessage) (string, error) {
	if !bytes.Contains(args, []byte("conversation")) && !bytes.Contains(args, []byte(`\u`)) {
		return "", nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(args, &obj); err != nil {
		return "", fmt.Errorf("%w: must be an object", axocoatl.ErrBadInput)
	}
	raw, ok := obj["conversation_id"]
	if !ok {
		return "", nil
	}
	var id string
	// As for "input", null is not a string: refuse it by hand.
	if err := json.Unmarshal(raw, &id); err != nil || string(raw) == "null" {
		return "", errors.New(`property "conversation_id" must be a string: "new" to start a conversation, or the conversation_id a result returned`)
	}
	return id, nil
}

func errorResult(msg string, meta mcp.Meta) *mcp.CallToolResult {
	return &mcp.CallToolResult{Meta: meta, IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

// minLevel drops records below a level; it quiets the go-sdk's per-session
// Info logs without touching the host's logger.
type minLevel struct {
	slog.Handler
	level slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.level && h.Handler.Enabled(ctx, l)
}
func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.level}
}
func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.level}
}
