// Package a2a lets other agents reach an Engine's agents over A2A.
//
// A Handler serves two surfaces, both as plain http.Handlers a host mounts on
// its own mux (Mount registers them on an http.ServeMux):
//
//   - the Axocoatl surface: GET /.well-known/agent.json (this instance and its
//     agents) and POST /a2a/tasks (one task addressed by receiver_id, answered
//     with its result);
//   - the standard A2A 0.3 JSON-RPC binding, so unmodified A2A clients (a2a-go,
//     a2a-python) work: the agent card at /.well-known/agent-card.json, and
//     POST /a2a with message/send, message/stream (SSE), tasks/get,
//     tasks/cancel and tasks/resubscribe; each agent is also its own endpoint
//     at /a2a/agents/{id} with its own card.
//
// Every task from either surface runs through Engine.ExecuteRequest with
// Source a2a, so it publishes the same lattice events as any other door.
// JSON-RPC tasks are kept in a bounded store so tasks/get works after they end.
//
// The wire types are those of github.com/a2aproject/a2a-go; the JSON-RPC
// handling is our own, because the reference server's event queues and task
// store cost far more than the protocol itself (see bench/README.md, "A2A").
package a2a

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/secret"
)

// Defaults for the zero fields of Config.
const (
	DefaultMaxTasks           = 1000
	DefaultTaskTTL            = time.Hour
	DefaultMaxStoreBytes      = 64 << 20
	DefaultMaxBodyBytes       = 1 << 20
	DefaultMaxBackgroundTasks = 1000
	DefaultStreamKeepAlive    = 15 * time.Second
	DefaultBodyTimeout        = 30 * time.Second
	DefaultName               = "axocoatl"
	DefaultVersion            = "0.1.0"
)

// Routes a Handler serves (Mount registers them).
const (
	PathAxocoatlCard = "/.well-known/agent.json"
	PathTasks        = "/a2a/tasks"
	PathAgentCard    = "/.well-known/agent-card.json"
	PathJSONRPC      = "/a2a"
	PathAgentPrefix  = "/a2a/agents/" // + {id}, and {id} + PathAgentCard
)

// ProtocolVersion is the A2A protocol version the JSON-RPC binding speaks.
const ProtocolVersion = "0.3.0"

// Errors.
var (
	// ErrClosed is returned for requests that arrive after Close.
	ErrClosed = errors.New("a2a: handler closed")
)

// Config configures a Handler. The zero value serves every agent of the
// Engine with the documented defaults.
type Config struct {
	// PublicURL is the absolute base URL other agents reach this server at
	// (scheme://host[:port][/prefix]); cards advertise endpoints under it.
	// Zero: derived from each request's Host (http, or https over TLS).
	PublicURL string `yaml:"public_url"`
	// Name of this instance in the cards. Zero: "axocoatl".
	Name string `yaml:"name"`
	// Description of this instance in the cards. Zero: a generic sentence.
	Description string `yaml:"description"`
	// Version advertised in the cards. Zero: "0.1.0".
	Version string `yaml:"version"`
	// APIToken, when set, is required on every route but the cards, as
	// "Authorization: Bearer <token>" or "X-API-Key: <token>", and the
	// standard cards declare both schemes. Zero: no authentication here (a
	// host may authenticate in front).
	APIToken secret.Secret `yaml:"api_token"`
	// AllowedOrigins are the browser origins ("https://app.example.com")
	// whose pages may POST to the task and JSON-RPC routes Mount registers,
	// besides pages served from the host itself. A request with another
	// Origin gets 403: without it any web page could make its visitor's
	// browser run agents (a form post or a no-cors fetch needs no CORS
	// preflight). Requests without Origin (non-browser clients) are not
	// concerned. Zero: same-host pages only.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// MaxTasks bounds how many JSON-RPC tasks are kept for tasks/get; the
	// oldest finished ones go first. Zero: 1000.
	MaxTasks int `yaml:"max_tasks"`
	// TaskTTL is how long a finished task stays retrievable. Zero: 1h.
	TaskTTL time.Duration `yaml:"task_ttl"`
	// MaxStoreBytes bounds the input and output text kept by the task store.
	// Zero: 64 MiB.
	MaxStoreBytes int64 `yaml:"max_store_bytes"`
	// MaxBodyBytes bounds a request body: 413 on /a2a/tasks, a JSON-RPC
	// error on /a2a. Zero: 1 MiB.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// BodyTimeout bounds reading one request body, so that a client
	// trickling bytes cannot hold a handler and its connection: past it
	// /a2a/tasks answers 400 and /a2a a JSON-RPC parse error. Zero: 30s;
	// negative: no bound.
	BodyTimeout time.Duration `yaml:"body_timeout"`
	// MaxBackgroundTasks bounds runs started by non-blocking message/send
	// (configuration.blocking false) that are still going; beyond it such
	// requests are refused. Zero: 1000.
	MaxBackgroundTasks int `yaml:"max_background_tasks"`
	// StreamKeepAlive is how often a silent SSE stream (message/stream,
	// tasks/resubscribe) gets a keep-alive comment, so proxies keep it open.
	// Zero: 15s; negative: never.
	StreamKeepAlive time.Duration `yaml:"stream_keep_alive"`
	// Logger receives the handler's logs. Zero: the Engine's logger.
	Logger *slog.Logger `yaml:"-"`
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		if err != nil {
			return fmt.Errorf("a2a: public_url: %w", err)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("a2a: public_url %q must be an absolute http(s) URL", c.PublicURL)
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("a2a: public_url %q must not have a query or fragment", c.PublicURL)
		}
	}
	for i, o := range c.AllowedOrigins {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.TrimRight(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return fmt.Errorf("a2a: allowed_origins[%d]: %q must be an origin like https://app.example.com", i, o)
		}
	}
	switch {
	case c.MaxTasks < 0:
		return errors.New("a2a: max_tasks must not be negative")
	case c.TaskTTL < 0:
		return errors.New("a2a: task_ttl must not be negative")
	case c.MaxStoreBytes < 0:
		return errors.New("a2a: max_store_bytes must not be negative")
	case c.MaxBodyBytes < 0:
		return errors.New("a2a: max_body_bytes must not be negative")
	case c.MaxBackgroundTasks < 0:
		return errors.New("a2a: max_background_tasks must not be negative")
	}
	return nil
}

func (c Config) withDefaults() Config {
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
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
	if c.BodyTimeout == 0 {
		c.BodyTimeout = DefaultBodyTimeout
	}
	return c
}

// Handler serves the A2A surfaces for one Engine. It owns every run it
// starts: Close cancels them and waits for them to end.
type Handler struct {
	eng   *axocoatl.Engine
	cfg   Config
	log   *slog.Logger
	store *taskStore
	mux   *http.ServeMux

	// ctx parents every run; Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc

	// mu guards closed; runs joins under its read lock so Close, which
	// takes the write lock, cannot miss a run that is starting.
	mu     sync.RWMutex
	closed bool
	runs   sync.WaitGroup
	// background bounds detached runs (non-blocking message/send).
	background chan struct{}
}

// New returns a Handler serving eng's agents.
func New(eng *axocoatl.Engine, cfg Config) (*Handler, error) {
	if eng == nil {
		return nil, errors.New("a2a: engine is nil")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	h := &Handler{
		eng:        eng,
		cfg:        cfg,
		log:        cfg.Logger,
		store:      newTaskStore(cfg.MaxTasks, cfg.TaskTTL, cfg.MaxStoreBytes),
		background: make(chan struct{}, cfg.MaxBackgroundTasks),
	}
	if h.log == nil {
		h.log = eng.Logger()
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.mux = http.NewServeMux()
	h.Mount(h.mux)
	return h, nil
}

// Mount registers every route on an http.ServeMux:
//
//	GET  /.well-known/agent.json                      Axocoatl card
//	POST /a2a/tasks                                   Axocoatl task intake
//	GET  /.well-known/agent-card.json                 A2A card (all agents)
//	POST /a2a                                         A2A JSON-RPC
//	GET  /a2a/agents/{id}/.well-known/agent-card.json A2A card of one agent
//	POST /a2a/agents/{id}                             A2A JSON-RPC to one agent
//
// Hosts with another router mount the Serve* methods on the same paths.
func (h *Handler) Mount(mux *http.ServeMux) {
	mux.HandleFunc("GET "+PathAxocoatlCard, h.ServeAxocoatlCard)
	mux.HandleFunc("POST "+PathTasks, h.auth(h.ServeTasks))
	mux.HandleFunc("GET "+PathAgentCard, func(w http.ResponseWriter, r *http.Request) { h.ServeAgentCard(w, r, "") })
	mux.HandleFunc("POST "+PathJSONRPC, h.auth(func(w http.ResponseWriter, r *http.Request) { h.ServeJSONRPC(w, r, "") }))
	mux.HandleFunc("GET "+PathAgentPrefix+"{id}"+PathAgentCard, func(w http.ResponseWriter, r *http.Request) {
		h.ServeAgentCard(w, r, r.PathValue("id"))
	})
	mux.HandleFunc("POST "+PathAgentPrefix+"{id}", h.auth(func(w http.ResponseWriter, r *http.Request) {
		h.ServeJSONRPC(w, r, r.PathValue("id"))
	}))
}

// ServeHTTP serves the routes Mount lists, for hosts that route a path
// prefix to the Handler instead of mounting each route.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Name, Start and Stop make the Handler an axocoatl.Module, so that
// Engine.Close (through Engine.Use) ends its runs.
func (h *Handler) Name() string { return "a2a" }

// Start checks that the Handler serves e; it starts nothing.
func (h *Handler) Start(_ context.Context, e *axocoatl.Engine) error {
	if e != h.eng {
		return errors.New("a2a: handler was built for another engine")
	}
	return nil
}

// Stop is Close.
func (h *Handler) Stop(ctx context.Context) error { return h.Close(ctx) }

// Close refuses new requests, cancels every run the Handler started and waits
// for them to end, or for ctx. Tasks still running are marked canceled.
func (h *Handler) Close(ctx context.Context) error {
	h.mu.Lock()
	h.closed = true
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
	if h.closed {
		return ErrClosed
	}
	h.runs.Add(1)
	return nil
}

// auth refuses browser requests from foreign origins (Config.AllowedOrigins)
// and enforces Config.APIToken, when set.
func (h *Handler) auth(next http.HandlerFunc) http.HandlerFunc {
	origins := func(w http.ResponseWriter, r *http.Request) bool {
		if o := r.Header.Get("Origin"); o != "" && !h.originAllowed(o, r.Host) {
			h.armBodyDeadline(w, r) // the unread body is drained before the 403
			writeHTTPError(w, http.StatusForbidden, "forbidden", "origin "+quote(cut(o, 256))+" is not allowed")
			return false
		}
		return true
	}
	if h.cfg.APIToken.IsZero() {
		return func(w http.ResponseWriter, r *http.Request) {
			if origins(w, r) {
				next(w, r)
			}
		}
	}
	want := []byte(h.cfg.APIToken.Reveal())
	return func(w http.ResponseWriter, r *http.Request) {
		if !origins(w, r) {
			return
		}
		got := r.Header.Get("X-API-Key")
		if got == "" {
			if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
				got = strings.TrimSpace(a[7:])
			}
		}
		if subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			// net/http drains an unread body before it writes the answer,
			// with no deadline of its own: bound it, or a client that never
			// finishes its body never gets the 401 and holds the handler.
			h.armBodyDeadline(w, r)
			w.Header().Set("WWW-Authenticate", `Bearer realm="axocoatl"`)
			writeHTTPError(w, http.StatusUnauthorized, "unauthorized", "missing or invalid API token")
			return
		}
		next(w, r)
	}
}

// readBody reads a request body of at most MaxBodyBytes within
// BodyTimeout. The read deadline it sets on the connection ends when the
// body has been read: net/http clears it then, as it starts watching the
// connection for the client hanging up, so runs after the read are not cut.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	h.armBodyDeadline(w, r)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil, fmt.Errorf("request body not received within %s", h.cfg.BodyTimeout)
	}
	return body, err
}

// originAllowed reports whether a browser page at origin may POST here,
// reached as host: a page of the same host (the scheme is not compared, a
// TLS-terminating proxy may sit in between), or an allowed origin.
func (h *Handler) originAllowed(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false // includes "null", sent by sandboxed and file: pages
	}
	if strings.EqualFold(u.Host, host) {
		return true
	}
	for _, a := range h.cfg.AllowedOrigins {
		if strings.EqualFold(strings.TrimRight(a, "/"), u.Scheme+"://"+u.Host) {
			return true
		}
	}
	return false
}

// armBodyDeadline bounds the reading of the request body by BodyTimeout.
// Not every ResponseWriter supports deadlines (a recorder in a test, some
// wrappers); the body is read without one then.
//
// Only a request with a body gets one: net/http clears the deadline when
// the body has been read, which for a request without one happened before
// the handler ran, so the deadline would stay armed and cut the response.
func (h *Handler) armBodyDeadline(w http.ResponseWriter, r *http.Request) {
	if h.cfg.BodyTimeout > 0 && r.ContentLength != 0 {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(h.cfg.BodyTimeout))
	}
}

// baseURL is the absolute URL endpoints are advertised under.
func (h *Handler) baseURL(r *http.Request) string {
	if h.cfg.PublicURL != "" {
		return h.cfg.PublicURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}
