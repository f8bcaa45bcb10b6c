package axocoatl

import (
	"context"
	"errors"
	"fmt"
	"go.opentelemetry.io/otel/trace"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/conversation"
	"github.com/axocoatl/axocoatl-go/internal/httpguard"
	"github.com/axocoatl/axocoatl-go/lattice"
)

// Errors returned by the Engine; check them with errors.Is.
var (
	ErrAgentNotFound = errors.New("agent not found")
	ErrAgentExists   = errors.New("agent already registered")
	ErrClosed        = errors.New("engine closed")
	ErrToolNotFound  = errors.New("tool not found")
	ErrToolDenied    = errors.New("tool not allowed for this agent")
	// ErrToolPanicked: a tool (or an interceptor) panicked; the call failed
	// and the stack is in the Engine's log.
	ErrToolPanicked = errors.New("tool panicked (stack in the log)")
	// ErrModelPanicked: the agent's model panicked; the run failed and the
	// stack is in the Engine's log.
	ErrModelPanicked = errors.New("model panicked (stack in the log)")
	// ErrUnavailable: the agent runs on another daemon that cannot be
	// reached now (the cluster's connection is down, the daemon left or is
	// at its limit). Doors answer it with 503; it passes on its own.
	ErrUnavailable = errors.New("unavailable")
	// ErrBusy: the Engine has Options.MaxRuns tasks in flight; the task was
	// not started. Doors answer it with 503 and Retry-After.
	ErrBusy = errors.New("busy")
	// ErrTaskExists: Request.TaskID names a task that is running; the
	// task was not started. Doors answer it with 409.
	ErrTaskExists = errors.New("a task of that id is running")
)

// Source says which door a task came through; it is carried in events.
type Source string

const (
	SourceAPI     Source = "api"
	SourceA2A     Source = "a2a"
	SourceMCP     Source = "mcp"
	SourceLibrary Source = "library"
)

// Options configure an Engine. The zero value is usable.
type Options struct {
	// Logger receives the Engine's logs. Zero: logs are discarded.
	Logger *slog.Logger
	// Bus is the lattice. Zero: a new in-memory bus, closed by Engine.Close.
	// A bus passed in is not closed by the Engine.
	Bus lattice.Bus
	// HTTP guards every door the Engine's modules serve over HTTP.
	HTTP HTTPOptions
	// MaxRuns bounds the tasks in flight at once, every door and agents of
	// other daemons together: each holds goroutines, memory and a model
	// call, and clients choose how many they start. Past it ExecuteRequest
	// fails at once with ErrBusy. Zero: DefaultMaxRuns; negative: no bound.
	MaxRuns int
	// Conversations keeps agents' conversations (Request.ConversationID).
	// Zero: a new in-memory store with the default limits
	// ([conversation.NewMemory]), closed by Engine.Close. A store passed in
	// is not closed by the Engine.
	Conversations conversation.Store
	// MaxRunListeners bounds the listeners of one run's events: those of
	// [Engine.FollowRun] and a [Request]'s OnEvent. Each holds a queue of
	// at most [RunListenerBuffer] events and [RunListenerTextBytes] of
	// coalesced text. Zero or negative: [DefaultMaxRunListeners].
	MaxRunListeners int
	// TracerProvider makes the Engine's and its modules' spans ([Engine.Tracer]).
	// Zero: OpenTelemetry's global provider, a no-op unless the host set one
	// (otel.SetTracerProvider), so a default Engine records and exports nothing.
	// The Engine does not shut a provider down: its owner does, after
	// [Engine.Close], to flush the spans of the close.
	TracerProvider trace.TracerProvider
	// CaptureContent lets spans carry what runs say: the messages sent to
	// and received from models (gen_ai.input.messages,
	// gen_ai.output.messages, gen_ai.system_instructions) and tool calls'
	// arguments and results, each attribute cut to [MaxSpanContentBytes].
	// Zero: no prompt, answer or tool data in any span.
	CaptureContent bool
}

// DefaultMaxRuns is Options.MaxRuns when zero.
const DefaultMaxRuns = 1000

// Engine runs agents. It is safe for concurrent use.
type Engine struct {
	log    *slog.Logger
	bus    lattice.Bus
	ownBus bool

	httpOpts HTTPOptions
	guard    *httpguard.Guard
	tracing  tracing

	// runCtx is cancelled by Close to stop in-flight runs.
	runCtx     context.Context
	cancelRuns context.CancelFunc
	runs       sync.WaitGroup
	// maxRuns and inFlight bound the tasks in flight (Options.MaxRuns).
	maxRuns  int64
	inFlight atomic.Int64

	mu           sync.RWMutex
	closed       bool
	agents       map[string]*registeredAgent
	agentOrder   []string
	tools        map[string]Tool
	interceptors []Interceptor
	// interceptorIDs parallels interceptors, for removal.
	interceptorIDs []*interceptorEntry
	modules        []Module
	// remote are agents hosted by other Engines (AddRemoteAgent); a local
	// agent of the same id wins.
	remote map[string]*remoteAgent
	// watchers are told when the agent set changes (WatchAgents).
	watchers map[*agentWatcher]struct{}
	// classes are the event classes modules declared (EventDeclarer).
	classes map[string]lattice.Class
	// convs keeps conversations; ownConvs: the Engine made it and closes it.
	convs    conversation.Store
	ownConvs bool
	// pending are the tool sources still on their first attempt
	// (AddPendingTools); runs wait for those their agent may use.
	pending map[*pendingSource]struct{}

	// live are the fan-outs of the runs in flight, by task id
	// (FollowRun); maxListeners is Options.MaxRunListeners.
	liveMu       sync.Mutex
	live         map[string]*runCast
	maxListeners int

	// questioner answers tool sources' questions (SetQuestioner).
	questioner atomic.Pointer[questionerEntry]
}

type registeredAgent struct {
	spec    agent.Spec
	model   agent.Model
	offline bool
	running atomic.Int64
}

// New returns an Engine.
func New(opts Options) *Engine {
	e := &Engine{
		log:      opts.Logger,
		bus:      opts.Bus,
		agents:   map[string]*registeredAgent{},
		tools:    map[string]Tool{},
		remote:   map[string]*remoteAgent{},
		watchers: map[*agentWatcher]struct{}{},
		live:     map[string]*runCast{},
	}
	e.maxListeners = opts.MaxRunListeners
	if e.maxListeners <= 0 {
		e.maxListeners = DefaultMaxRunListeners
	}
	if e.log == nil {
		e.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if e.bus == nil {
		e.bus = lattice.NewMemory()
		e.ownBus = true
	}
	e.convs = opts.Conversations
	if e.convs == nil {
		e.convs = conversation.NewMemory(conversation.Limits{})
		e.ownConvs = true
	}
	e.httpOpts = opts.HTTP
	e.maxRuns = int64(opts.MaxRuns)
	if e.maxRuns == 0 {
		e.maxRuns = DefaultMaxRuns
	}
	e.tracing = newTracing(opts.TracerProvider, opts.CaptureContent)
	var err error
	e.guard, err = httpguard.New(httpguard.Options{
		PublicURL: opts.HTTP.PublicURL, Token: opts.HTTP.APIToken, AllowedOrigins: opts.HTTP.AllowedOrigins,
		BodyTimeout: opts.HTTP.BodyTimeout, WriteTimeout: opts.HTTP.WriteTimeout, Logger: e.log,
		Failures:    httpguard.FailureLimit{Max: opts.HTTP.MaxAuthFailures},
		Credentials: credentials(opts.HTTP.Tokens), OAuth: opts.HTTP.OAuth.guard(), Bind: bindIdentity,
		Tracing: httpguard.Tracing{Tracer: e.tracing.tracer, Propagator: traceContext, On: e.tracing.on},
	})
	if err != nil {
		// The bad entries are ignored (they allow nothing); a host that
		// wants an error calls HTTPOptions.Validate first.
		e.log.Error("http options: entries ignored", "error", err)
	}
	e.runCtx, e.cancelRuns = context.WithCancel(context.Background())
	return e
}

// Bus returns the Engine's lattice, for subscribers and publishers.
func (e *Engine) Bus() lattice.Bus { return e.bus }

// Logger returns the Engine's logger, for modules.
func (e *Engine) Logger() *slog.Logger { return e.log }

// Publish builds an event with a fresh id and publishes it on the lattice,
// of the class the Engine or a module declared for its type
// ([EventDeclarer]; coordination when none did). The event carries the
// trace context of ctx's span, if any ([lattice.Event].TraceParent): so
// do the Engine's own events of a run.
func (e *Engine) Publish(ctx context.Context, eventType, producedBy string, payload any) error {
	ev, err := lattice.New(eventType, producedBy, payload)
	if err != nil {
		return err
	}
	ev.Class = e.ClassOf(eventType)
	stampTrace(ctx, &ev)
	return e.bus.Publish(ctx, ev)
}

// AgentInfo describes a registered agent.
type AgentInfo struct {
	agent.Spec
	// Running is the number of tasks the agent is executing now.
	Running int
	// Offline is true when the agent's model declares it reaches nothing
	// outside the process (see [agent.Offline]).
	Offline bool
	// Node is where the agent runs: "" for this Engine, else the node name
	// of the daemon that hosts it (see [Engine.AddRemoteAgent]); when
	// several daemons host the same id, their names sorted and joined by
	// ",". For a remote agent Running is as that daemon last announced it.
	Node string
}

// Status is "running" while the agent has tasks in flight, else "idle".
func (a AgentInfo) Status() string {
	if a.Running > 0 {
		return "running"
	}
	return "idle"
}

// AddAgent registers an agent that thinks with model. Defaults are applied
// to the spec.
func (e *Engine) AddAgent(spec agent.Spec, model agent.Model) error {
	if err := spec.Validate(); err != nil {
		return fmt.Errorf("agent %q: %w", spec.ID, err)
	}
	if model == nil {
		return fmt.Errorf("agent %q: model is nil", spec.ID)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	if _, ok := e.agents[spec.ID]; ok {
		return fmt.Errorf("agent %q: %w", spec.ID, ErrAgentExists)
	}
	spec.Tools = slices.Clone(spec.Tools) // the caller's slice must not steer the allow-list later
	e.agents[spec.ID] = &registeredAgent{spec: spec.WithDefaults(), model: model, offline: agent.IsOffline(model)}
	e.agentOrder = append(e.agentOrder, spec.ID)
	e.notifyAgentsLocked()
	return nil
}

// Agents lists the registered agents in registration order, then the
// remote agents (Node set) no local agent shadows, sorted by id.
func (e *Engine) Agents() []AgentInfo {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make([]AgentInfo, 0, len(e.agentOrder)+len(e.remote))
	for _, id := range e.agentOrder {
		out = append(out, e.agents[id].info())
	}
	return append(out, e.remoteInfosLocked()...)
}

// Agent returns one agent, local or remote, or ErrAgentNotFound.
func (e *Engine) Agent(id string) (AgentInfo, error) {
	e.mu.RLock()
	a, ok := e.agents[id]
	r, remote := e.remote[id]
	e.mu.RUnlock()
	switch {
	case ok:
		return a.info(), nil
	case remote:
		return r.copyInfo(), nil
	}
	return AgentInfo{}, fmt.Errorf("%w: %q", ErrAgentNotFound, id)
}

// info is a copy the caller may change without touching the registry.
func (a *registeredAgent) info() AgentInfo {
	spec := a.spec
	spec.Tools = slices.Clone(spec.Tools)
	return AgentInfo{Spec: spec, Running: int(a.running.Load()), Offline: a.offline}
}

// Module is an optional part of the runtime (a protocol, a gate) that lives
// as long as the Engine. Start may register tools and interceptors and
// subscribe to the lattice; Stop undoes what Start began and ends every
// goroutine the module started.
type Module interface {
	Name() string
	Start(ctx context.Context, e *Engine) error
	Stop(ctx context.Context) error
}

// ClosingModule is a Module told when Close begins, before the Engine waits
// for its runs in flight: from then on the Engine takes no new task, and a
// module that brings work from outside stops taking it (a cluster module
// lets the other daemons send their tasks elsewhere) while the runs drain.
// Closing must return at once; Stop follows as for every Module.
type ClosingModule interface {
	Module
	Closing()
}

// Use starts a module with the Engine; Close stops it (modules stop in
// reverse order of Use).
func (e *Engine) Use(ctx context.Context, m Module) error {
	e.mu.RLock()
	closed := e.closed
	e.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	// Before Start: a module may publish as it starts.
	if d, ok := m.(EventDeclarer); ok {
		if err := e.declare(d); err != nil {
			return fmt.Errorf("module %s: %w", m.Name(), err)
		}
	}
	// Start runs without the lock: a module calls back into the Engine.
	if err := m.Start(ctx, e); err != nil {
		return fmt.Errorf("module %s: %w", m.Name(), err)
	}
	e.mu.Lock()
	closed = e.closed
	if !closed {
		e.modules = append(e.modules, m)
	}
	e.mu.Unlock()
	if closed {
		// Close ran while the module started and did not see it: stop it
		// here, so nothing it began outlives the Engine.
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		return errors.Join(ErrClosed, m.Stop(stopCtx))
	}
	return nil
}

// Close shuts the Engine down: new tasks are refused (and every
// ClosingModule told), in-flight runs may finish until ctx is done and are
// then cancelled, modules stop in reverse order, and the Engine's own bus closes. Every goroutine the Engine started
// has ended when Close returns.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	modules := slices.Clone(e.modules)
	watchers := e.watchers
	e.watchers = map[*agentWatcher]struct{}{}
	e.mu.Unlock()
	for i := len(modules) - 1; i >= 0; i-- {
		if c, ok := modules[i].(ClosingModule); ok {
			c.Closing()
		}
	}

	drained := make(chan struct{})
	go func() { e.runs.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-ctx.Done():
		e.cancelRuns()
		<-drained
	}
	e.cancelRuns()
	e.guard.StopIdle()

	var errs []error
	for i := len(modules) - 1; i >= 0; i-- {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		if err := modules[i].Stop(stopCtx); err != nil {
			errs = append(errs, fmt.Errorf("module %s: %w", modules[i].Name(), err))
		}
		cancel()
	}
	for w := range watchers {
		w.stop()
	}
	if e.ownConvs {
		errs = append(errs, e.convs.Close())
	}
	if e.ownBus {
		errs = append(errs, e.bus.Close())
	}
	return errors.Join(errs...)
}
