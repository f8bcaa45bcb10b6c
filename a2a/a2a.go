// Package a2a is a door: it lets other agents reach an Engine's agents over
// A2A.
//
// # In Go terms
//
// A host fills a [Config] (its zero value serves every agent with the
// documented defaults), builds the [Handler] with [New] and attaches it with
// [axocoatl.Engine.Use], which calls [Handler.Start] (the Handler is the
// [axocoatl.Module]); [axocoatl.Engine.Close] calls [Handler.Stop], which
// cancels every run the Handler started. The Handler is an [http.Handler] the
// host mounts on its own mux, under any path prefix ([http.StripPrefix]);
// [Paths] and [Handler.Routes] list what it answers, for hosts that route
// each pattern themselves. The `a2a:` section of the daemon's config file
// decodes straight into [Config]; nothing here needs the file.
//
// The Engine hooks it uses: every task ends in
// [axocoatl.Engine.ExecuteRequest] with [axocoatl.SourceA2A], so it publishes
// the same lattice events as any other door and counts against the Engine's
// runs in flight ([axocoatl.ErrBusy] beyond them); the cards list
// [axocoatl.Engine.Agents] (an agent another daemon of the cluster runs
// names its [axocoatl.AgentInfo].Node); every request passes the Engine's
// guard ([axocoatl.Engine.GuardHTTP]), configured by [axocoatl.HTTPOptions]
// like every door, which also gives the public URL the cards carry. A
// caller's W3C traceparent header continues in the run it starts, also one
// that outlives its request, read with the Engine's propagator
// ([axocoatl.Engine.Propagator]), so the run's spans and its lattice
// events ([lattice.Event].TraceParent) are in the caller's trace.
//
// # Two surfaces
//
// A Handler serves two surfaces:
//
//   - the Axocoatl surface: GET /.well-known/agent.json (this instance and its
//     agents, an [AxocoatlCard]) and POST /a2a/tasks (one [TaskRequest]
//     addressed by receiver_id, answered with its [TaskResponse]);
//   - standard A2A, both generations on the same URLs, so unmodified A2A
//     clients work: the agent card at /.well-known/agent-card.json (the 0.3
//     members and the 1.0 supportedInterfaces), and POST /a2a. The
//     A2A-Version header ([HeaderVersion]) picks the generation: none (or
//     0.3) is the A2A 0.3 JSON-RPC binding (message/send, message/stream,
//     tasks/get, tasks/cancel, tasks/resubscribe, and the tasks/list of
//     a2a-go v0.3); 1.0 is A2A 1.0
//     (SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask,
//     SubscribeToTask), also on its HTTP+JSON binding under /a2a (POST
//     /a2a/message:send, GET /a2a/tasks/{id}, ...); any other version is
//     -32009 ([SupportedVersions]). Each agent is also its own endpoint at
//     /a2a/agents/{id} with its own card. A message names its agent in its
//     metadata ([ReceiverKey]); without that, the per-agent URL decides, else
//     the agent of its contextId's conversation, else the first agent.
//
// A standard A2A contextId is a conversation of the Engine
// ([axocoatl.Request].ConversationID, the conversation package): each task
// is a turn of it and the model is sent the turns before. A message without
// contextId starts one (its id minted at intake, so the task carries it from
// its first event); a known one continues it; an unknown well-formed one
// starts a conversation of that id. Turns of a context never overlap: a
// message while one runs is refused with -32004, as is a message to a task
// that has finished or is working.
//
// A run that waits for a human (a gated tool call, a question an MCP
// server asks) puts its task in input-required through the door's
// [axocoatl.UserPrompter] (every task's run carries one): the status
// message says what is asked and how to answer, a blocking send, a stream
// and a subscription end there, and the next message with the task's id,
// from the caller that sent the task, answers it (docs/a2a.md, "Human
// input"). The caller is the [axocoatl.Identity] the guard bound to the
// request ([axocoatl.IdentityFrom]); a task's run carries it, so the Engine
// runs only agents it sees and only with [axocoatl.ScopeExecute].
//
// A streamed task's text goes out as the model writes it: the run's
// [axocoatl.Request].OnEvent feeds the stream, and a subscription joins a
// running task through [axocoatl.Engine.FollowRun]. Push notification
// configs (both generations) deliver a task's updates through the Engine's
// [axocoatl.Pusher] ([axocoatl.Engine.Pusher], egress's durable queue), one
// [axocoatl.PushRequest] per update, bounded by [Config].MaxPushConfigs and
// [Config].MaxPushConfigsPerTask.
//
// Standard A2A tasks of both generations are kept in one bounded store
// ([Config].MaxTasks, TaskTTL, MaxStoreBytes), so GetTask and tasks/get work
// after they end, whichever generation sent them. Runs of non-blocking sends
// are bounded by [Config].MaxBackgroundTasks, request bodies by
// [Config].MaxBodyBytes.
//
// The wire types are those of github.com/a2aproject/a2a-go (0.3, imported as
// a2a03, e.g. [a2a03.Task]) and github.com/a2aproject/a2a-go/v2 (1.0,
// imported as a2a1, e.g. [a2a1.Task]); the handling is our own, because the reference servers'
// event queues and task stores cost far more than the protocol itself (see
// bench/README.md, "A2A" and "A2A 1.0").
package a2a

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/internal/a2awire"
	"github.com/axocoatl/axocoatl-go/internal/cfgerr"
	"github.com/axocoatl/axocoatl-go/internal/lifecycle"
	"github.com/axocoatl/axocoatl-go/internal/mount"
)

// Defaults for the zero fields of [Config].
const (
	DefaultMaxTasks           = 1000
	DefaultTaskTTL            = time.Hour
	DefaultMaxStoreBytes      = 64 << 20
	DefaultMaxBodyBytes       = 1 << 20
	DefaultMaxBackgroundTasks = 1000
	DefaultStreamKeepAlive    = 15 * time.Second
	// DefaultMaxPushConfigsPerTask and DefaultMaxPushConfigs bound push
	// notification configs ([Config].MaxPushConfigsPerTask, MaxPushConfigs).
	DefaultMaxPushConfigsPerTask = 10
	DefaultMaxPushConfigs        = 10000
	DefaultName                  = "axocoatl"
	DefaultVersion               = "0.1.0"
)

// Routes a [Handler] serves ([Handler.Routes] lists them with their methods).
const (
	PathAxocoatlCard = "/.well-known/agent.json"
	PathTasks        = "/a2a/tasks"
	PathAgentCard    = "/.well-known/agent-card.json"
	PathJSONRPC      = "/a2a"
	PathAgentPrefix  = "/a2a/agents/" // + {id}, and {id} + PathAgentCard
)

// ProtocolVersion is the A2A 0.3 version the card's 0.3 members name; see
// also [ProtocolVersion1].
const ProtocolVersion = "0.3.0"

// Errors.
var (
	// ErrClosed is returned for requests that arrive after [Handler.Close].
	ErrClosed = errors.New("a2a: handler closed")
)

// Config configures a [Handler]. The zero value serves every agent of the
// Engine with the documented defaults. Who may call (token, browser
// origins, Host names) and the public URL are the Engine's
// [axocoatl.HTTPOptions], the same for every door.
type Config struct {
	// Name of this instance in the cards. Zero: "axocoatl".
	Name string `yaml:"name"`
	// Description of this instance in the cards. Zero: a generic sentence.
	Description string `yaml:"description"`
	// Version advertised in the cards. Zero: "0.1.0".
	Version string `yaml:"version"`
	// MaxTasks bounds how many standard A2A tasks (both generations) are
	// kept for tasks/get, GetTask and ListTasks; the oldest finished ones go
	// first. Zero: 1000.
	MaxTasks int `yaml:"max_tasks"`
	// TaskTTL is how long a finished task stays retrievable. Zero: 1h.
	TaskTTL time.Duration `yaml:"task_ttl"`
	// MaxStoreBytes bounds the input and output text kept by the task store.
	// Zero: 64 MiB.
	MaxStoreBytes int64 `yaml:"max_store_bytes"`
	// MaxBodyBytes bounds a request body: a declared larger body gets 413,
	// a chunked one that grows past it 413 on /a2a/tasks and the REST
	// binding and a JSON-RPC error on /a2a. Zero: 1 MiB.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// MaxBackgroundTasks bounds runs started by non-blocking sends (0.3
	// configuration.blocking false, 1.0 returnImmediately true) that are
	// still going; beyond it such requests are refused. Zero: 1000.
	MaxBackgroundTasks int `yaml:"max_background_tasks"`
	// StreamKeepAlive is how often a silent SSE stream (message/stream,
	// tasks/resubscribe) gets a keep-alive comment, so proxies keep it open.
	// Zero: 15s; negative: never.
	StreamKeepAlive time.Duration `yaml:"stream_keep_alive"`
	// PushAllowedHosts are the push notification hosts (exact names or
	// IP addresses, no port) that may be loopback, private or link-local
	// addresses: others are refused there, when registered (an address in
	// the URL) and on the address each delivery dials. Zero: none.
	PushAllowedHosts []string `yaml:"push_allowed_hosts"`
	// MaxPushConfigsPerTask bounds the push notification configs of one
	// task. Zero: 10.
	MaxPushConfigsPerTask int `yaml:"max_push_configs_per_task"`
	// MaxPushConfigs bounds the push notification configs kept in all
	// (those of tasks no longer kept are forgotten first). Zero: 10000.
	MaxPushConfigs int `yaml:"max_push_configs"`
	// Logger receives the handler's logs. Zero: the Engine's logger.
	Logger *slog.Logger `yaml:"-"`
}

// Validate checks the configuration. Its errors are
// [*axocoatl.ConfigError] values naming the key.
func (c Config) Validate() error {
	return cfgerr.NotNegative(cfgerr.N("max_tasks", c.MaxTasks), cfgerr.N("task_ttl", c.TaskTTL),
		cfgerr.N("max_store_bytes", c.MaxStoreBytes), cfgerr.N("max_body_bytes", c.MaxBodyBytes),
		cfgerr.N("max_background_tasks", c.MaxBackgroundTasks), cfgerr.N("max_push_configs_per_task", c.MaxPushConfigsPerTask),
		cfgerr.N("max_push_configs", c.MaxPushConfigs))
}

func (c Config) withDefaults() Config {
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.Description == "" {
		c.Description = "Axocoatl agent runtime: each skill is one agent."
	}
	if c.Version == "" {
		c.Version = DefaultVersion
	}
	if c.MaxTasks == 0 {
		c.MaxTasks = DefaultMaxTasks
	}
	if c.TaskTTL == 0 {
		c.TaskTTL = DefaultTaskTTL
	}
	if c.MaxStoreBytes == 0 {
		c.MaxStoreBytes = DefaultMaxStoreBytes
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxBackgroundTasks == 0 {
		c.MaxBackgroundTasks = DefaultMaxBackgroundTasks
	}
	if c.StreamKeepAlive == 0 {
		c.StreamKeepAlive = DefaultStreamKeepAlive
	}
	if c.MaxPushConfigsPerTask == 0 {
		c.MaxPushConfigsPerTask = DefaultMaxPushConfigsPerTask
	}
	if c.MaxPushConfigs == 0 {
		c.MaxPushConfigs = DefaultMaxPushConfigs
	}
	return c
}

// Handler serves the A2A surfaces for one Engine. It is an
// [axocoatl.Module]: [axocoatl.Engine.Use] starts it and binds it to the
// Engine, [axocoatl.Engine.Close] stops it, cancelling every run it started.
// Until it is started it answers 503.
type Handler struct {
	cfg   Config
	store *taskStore

	// life is marked started once by Start; eng, log, routes and
	// bodyTimeout are written before it and read only after it. Close
	// stops it (under mu).
	life        lifecycle.State
	eng         *axocoatl.Engine
	log         *slog.Logger
	routes      http.Handler
	bodyTimeout time.Duration

	// ctx parents every run; Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc

	// mu guards the stop and the start; runs joins under its read lock so
	// Close, which takes the write lock, cannot miss a run that is starting.
	mu   sync.RWMutex
	runs sync.WaitGroup
	// background bounds detached runs (non-blocking message/send).
	background chan struct{}
	// push keeps the push notification configs (push.go).
	push *pushRegistry
	// lookupTimeout bounds a conversation look-up at intake
	// (defaultLookupTimeout; tests shorten it).
	lookupTimeout time.Duration
}

// New returns a [Handler]; pass it to [axocoatl.Engine.Use] to serve that
// Engine's agents.
func New(cfg Config) (*Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("a2a: %w", err)
	}
	cfg = cfg.withDefaults()
	h := &Handler{
		cfg:           cfg,
		store:         newTaskStore(cfg.MaxTasks, cfg.TaskTTL, cfg.MaxStoreBytes),
		background:    make(chan struct{}, cfg.MaxBackgroundTasks),
		lookupTimeout: defaultLookupTimeout,
		push:          newPushRegistry(cfg),
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	return h, nil
}

// ServeHTTP serves, relative to where the host mounts the Handler (under
// any path prefix, with [http.StripPrefix]):
//
//	GET  /.well-known/agent.json                      Axocoatl card
//	POST /a2a/tasks                                   Axocoatl task intake
//	GET  /.well-known/agent-card.json                 A2A card (all agents)
//	POST /a2a                                         A2A JSON-RPC (0.3 or 1.0)
//	POST /a2a/message:send, /a2a/message:stream       A2A 1.0 REST
//	GET  /a2a/tasks, /a2a/tasks/{id}                  A2A 1.0 REST
//	POST /a2a/tasks/{id}:cancel, {id}:subscribe       A2A 1.0 REST
//	GET  /a2a/agents/{id}/.well-known/agent-card.json A2A card of one agent
//	POST /a2a/agents/{id}                             A2A JSON-RPC to one agent
//	     /a2a/agents/{id}/message:send, ...           A2A 1.0 REST to one agent
//
// Cards carry absolute URLs built from the Engine's
// [axocoatl.HTTPOptions].PublicURL (else the request's Host) and the mount
// prefix. A2A clients look for the card at
// <base>/.well-known/agent-card.json, so under a prefix give them the base
// URL with the prefix (https://host/ai), or the card's URL itself. Every
// route is behind the Engine's HTTP guard; the cards are public.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.life.Started() {
		writeHTTPError(w, http.StatusServiceUnavailable, "not_started", "a2a: module not started: pass it to Engine.Use")
		return
	}
	h.routes.ServeHTTP(w, r)
}

// Paths lists the path patterns [Handler.ServeHTTP] answers ([http.ServeMux]
// syntax), for hosts that route each to the Handler rather than a whole
// prefix.
// [PathJSONRPC] + "/" covers the REST binding under /a2a.
func Paths() []string {
	return []string{PathAxocoatlCard, PathTasks, PathAgentCard, PathJSONRPC, PathJSONRPC + "/", PathAgentPrefix}
}

// Routes lists every method and pattern [Handler.ServeHTTP] answers, from
// the list [Handler.Start] builds the Handler's routes from, for hosts that
// mount each route on their own router. Patterns are in [http.ServeMux] syntax, literal but
// for {name} segments; the A2A 1.0 REST verbs contain a literal colon
// (/a2a/message:send), which routers that read ":name" as a parameter
// cannot express. The cards are public.
func (h *Handler) Routes() []axocoatl.Route {
	var out []axocoatl.Route
	for _, d := range h.table() {
		out = append(out, d.Route)
	}
	return out
}

// door is one route of the Handler with its handler and, for protocols
// that answer an oversized body in their own shape, its TooLarge.
type door struct {
	axocoatl.Route
	tooLarge http.HandlerFunc
	serve    http.Handler
}

// table is the one list of the Handler's routes.
func (h *Handler) table() []door {
	get, post := http.MethodGet, http.MethodPost
	limit := h.cfg.MaxBodyBytes
	public := func(pattern string, fn http.HandlerFunc) door {
		return door{axocoatl.Route{Method: get, Pattern: pattern, Scope: axocoatl.ScopePublic}, nil, fn}
	}
	rpcTooLarge := func(w http.ResponseWriter, r *http.Request) {
		g, _ := negotiate(r.Header.Get(HeaderVersion))
		writeRPCError(w, nullID, rpcErr(a2awire.CodeInvalidRequest, "request body exceeds %d bytes", limit), g)
	}
	rpc := func(pattern string, fn http.HandlerFunc) door {
		// A JSON-RPC endpoint carries reads and runs: the route asks for
		// read, and a send asks for execute of its own (startTask).
		return door{axocoatl.Route{Method: post, Pattern: pattern, Scope: axocoatl.ScopeRead, MaxBodyBytes: limit}, rpcTooLarge, fn}
	}
	ds := []door{
		public(PathAxocoatlCard, h.serveAxocoatlCard),
		public(PathAgentCard, func(w http.ResponseWriter, r *http.Request) { h.serveAgentCard(w, r, "") }),
		public(PathAgentPrefix+"{id}"+PathAgentCard, func(w http.ResponseWriter, r *http.Request) {
			h.serveAgentCard(w, r, r.PathValue("id"))
		}),
		{axocoatl.Route{Method: post, Pattern: PathTasks, Scope: axocoatl.ScopeExecute, MaxBodyBytes: limit}, nil, http.HandlerFunc(h.serveTasks)},
		rpc(PathJSONRPC, func(w http.ResponseWriter, r *http.Request) { h.serveJSONRPC(w, r, "") }),
		rpc(PathAgentPrefix+"{id}", func(w http.ResponseWriter, r *http.Request) { h.serveJSONRPC(w, r, r.PathValue("id")) }),
	}
	restTooLarge := func(w http.ResponseWriter, r *http.Request) {
		writeRESTError(w, rpcErr(a2awire.CodeInvalidRequest, "request body exceeds %d bytes", limit))
	}
	// rest checks the version and resolves the per-agent {id} of the path
	// (perAgent) before fn.
	rest := func(perAgent bool) func(method, pattern string, fn func(http.ResponseWriter, *http.Request, string)) door {
		return func(method, pattern string, fn func(http.ResponseWriter, *http.Request, string)) door {
			scope := axocoatl.ScopeRead // GET reads; POST sends, cancels: execute
			if method != http.MethodGet {
				scope = axocoatl.ScopeExecute
			}
			return door{axocoatl.Route{Method: method, Pattern: pattern, Scope: scope, MaxBodyBytes: limit}, restTooLarge, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if rerr := restVersion(r); rerr != nil {
					writeRESTError(w, rerr)
					return
				}
				var agentID string
				if perAgent {
					agentID = r.PathValue("id")
					if _, err := h.eng.AgentFor(r.Context(), agentID); err != nil {
						writeRESTError(w, rpcErr(a2awire.CodeInvalidParams, "no agent %q at this endpoint", agentID))
						return
					}
				}
				fn(w, r, agentID)
			})}
		}
	}
	ds = append(ds, h.restDoors(PathJSONRPC, rest(false))...)
	return append(ds, h.restDoors(PathAgentPrefix+"{id}", rest(true))...)
}

// Name, [Handler.Start] and [Handler.Stop] make the Handler an
// [axocoatl.Module].
func (h *Handler) Name() string { return "a2a" }

// Start binds the Handler to e ([axocoatl.Engine]); it starts no goroutine.
func (h *Handler) Start(_ context.Context, e *axocoatl.Engine) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.life.CheckStart("a2a", ErrClosed); err != nil {
		return err
	}
	h.eng = e
	h.log = h.cfg.Logger
	if h.log == nil {
		h.log = e.Logger()
	}
	h.bodyTimeout = e.HTTP().BodyTimeout
	if h.bodyTimeout == 0 {
		h.bodyTimeout = 30 * time.Second
	}
	mux := http.NewServeMux()
	for _, d := range h.table() {
		mux.Handle(d.Method+" "+d.Pattern, e.GuardHTTP(axocoatl.HTTPRoute{
			Scope: d.Scope, MaxBodyBytes: d.MaxBodyBytes, TooLarge: d.tooLarge}, traced(e, d.serve)))
	}
	private := axocoatl.HTTPRoute{Scope: axocoatl.ScopeRead, MaxBodyBytes: h.cfg.MaxBodyBytes}
	// Unknown routes are behind the token too: a host that mounts the
	// Handler by prefix ([Paths]) answers a caller without the token 401,
	// like every route it knows.
	mux.Handle("/", e.GuardHTTP(private, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeHTTPError(w, http.StatusNotFound, "not_found", "no such A2A route")
	})))
	h.routes = mux
	h.life.MarkStarted()
	return nil
}

// Stop is [Handler.Close].
func (h *Handler) Stop(ctx context.Context) error { return h.Close(ctx) }

// Close refuses new requests, cancels every run the Handler started and waits
// for them to end, or for ctx. Tasks still running are marked canceled.
func (h *Handler) Close(ctx context.Context) error {
	h.mu.Lock()
	h.life.Stop()
	h.mu.Unlock()
	h.cancel()
	done := make(chan struct{})
	go func() { h.runs.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("a2a: close: runs still ending: %w", ctx.Err())
	}
}

// join registers a run with the Handler; the caller must call h.runs.Done.
func (h *Handler) join() error {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.life.Stopped() {
		return ErrClosed
	}
	h.runs.Add(1)
	return nil
}

// readBody reads the request body (bounded in size and read time by the
// Engine's guard). The read deadline ends when the body has been read:
// net/http clears it then, so runs after the read are not cut.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(r.Body)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil, fmt.Errorf("request body not received within %s", h.bodyTimeout)
	}
	return body, err
}

// baseURL is the absolute URL endpoints are advertised under.
func (h *Handler) baseURL(r *http.Request) string {
	return mount.BaseURL(h.eng.HTTP().PublicURL, r)
}
