// Package approval is the gate that puts tool calls before a human: a
// Module that installs a tool-call interceptor on the Engine, pauses calls
// whose policy is "prompt" until someone allows or denies them, and fails
// closed (no answer within the timeout is a denial).
//
// # In Go terms
//
// Approval is the house's gate. [New] validates a [Config] (the daemon's
// `approval:` section; DataDir and Logger are set by the host) and returns
// a [*Module]. [axocoatl.Engine.Use] calls [Module.Start], which installs
// the gate with [axocoatl.Engine.Intercept]: every tool call the agent
// loop makes goes through [axocoatl.Engine.CallTool] and so through it,
// whichever tool source registered the tool. [axocoatl.Engine.Close] calls
// [Module.Stop], which removes the gate and withdraws what still waits.
// Install it before the tool sources and doors (package config does), so
// that no call runs ungated. The Module declares its events
// ([Module.Events], an [axocoatl.EventDeclarer]), answers
// [axocoatl.Engine.Resync] after a cluster outage ([Module.Resync], an
// [axocoatl.ReplicatingModule]) and serves its routes as an
// [axocoatl.HTTPModule] ([Module.Routes]).
//
// # Policy
//
// Each tool call is decided by the first of these that has an answer:
//
//  1. a remembered decision for (agent, tool) — one a human gave with
//     remember "always" — while the tool's [axocoatl.Tool.Fingerprint] is
//     still the one it was given for;
//  2. the [Config.Rules], in order: the first whose tool glob (and
//     annotation conditions, if any) matches decides;
//  3. the tool's own policy, [axocoatl.Tool.Approval] (for MCP tools, the
//     server's `approval:`);
//  4. [Config.Default] (zero: prompt).
//
// "allow" runs the call, "deny" refuses it (the model gets a failed tool
// call saying so), "prompt" asks a human.
//
// # Asking
//
// A call to ask about publishes [EventRequested] (payload:
// [PendingApproval]) and waits for the first of: a verdict ([Module.Resolve],
// the HTTP routes, an [EventVerdict] on the lattice, or the door's own
// [axocoatl.UserPrompter] such as MCP elicitation), the timeout (denied,
// status "expired"), or the end of the call's context (status "withdrawn").
// The agent's timeout does not run while a call waits. Each approval is
// resolved exactly once; [EventResolved] (payload: [Resolution])
// and a log line record every outcome with who resolved it.
//
// # Questions
//
// The Module is also the Engine's [axocoatl.Questioner]: a tool source's
// question (an MCP server's form elicitation, through mcpclient) is a
// pending item of kind "question" with its requested schema, answered with
// content ([Module.Answer], the HTTP routes, the WebSocket, the door's
// prompter), checked against the schema; unanswered it is declined. See
// [Module.AskQuestion].
//
// # Several engines
//
// On a shared lattice (lattice/nats), every Module tracks the approvals the
// others hold from their events: [Module.Pending] lists them too, and
// [Module.Resolve] of one held elsewhere publishes an [EventVerdict] that
// the holder acts on, then reports the holder's outcome. A Module that
// joins later learns what is already pending through [EventSync] and
// [EventPending]. Whoever can
// publish on the lattice can therefore resolve approvals: on NATS, limit
// who may publish under the lattice's subject prefix.
//
// # Routes
//
// The Module is an [http.Handler] for GET /api/approvals, POST
// /api/approvals/{id}, GET and DELETE /api/approvals/decisions (see
// [PathApprovals]), behind the Engine's guard ([axocoatl.Engine.GuardHTTP]).
// [Module.Pending] and [Module.Resolve] are the same for a host's own UI or
// event stream; [Module.Decisions] and [Module.Forget] list and revoke
// remembered decisions.
package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/internal/lifecycle"
	"github.com/axocoatl/axocoatl-go/internal/textsafe"
	"github.com/axocoatl/axocoatl-go/lattice"
)

// EventRequested: a call waits for a verdict (payload: [PendingApproval]).
// EventResolved: an approval ended (payload: [Resolution]). Both are
// coordination events: a webhook with no filter gets them.
const (
	EventRequested = "ApprovalRequested"
	EventResolved  = "ApprovalResolved"
)

// MaxArgumentsPreview bounds the arguments shown in an approval request,
// in bytes; longer arguments are cut on a UTF-8 boundary.
const MaxArgumentsPreview = 2048

// Errors of Resolve and the routes; check them with errors.Is.
var (
	ErrNotFound        = errors.New("approval not found")
	ErrAlreadyResolved = errors.New("approval already resolved")
	ErrBadDecision     = errors.New(`decision must be "allow" or "deny"`)
	ErrBadRemember     = errors.New(`remember must be "once" or "always"`)
	ErrNotStarted      = errors.New("approval module not started")
	ErrStopped         = errors.New("approval module stopped")
	// ErrNoAnswer: a verdict for an approval another Engine holds got no
	// outcome from it in time (that Engine may be gone).
	ErrNoAnswer = errors.New("the engine holding the approval did not answer")
	// ErrDecisionNotFound: no remembered decision for that agent and tool.
	ErrDecisionNotFound = errors.New("remembered decision not found")
)

// maxRecent bounds the resolved ids remembered to answer 409 (those of
// approvals held elsewhere come from other Engines' events).
const maxRecent = 4096

// PendingApproval is a call waiting for a verdict: the ApprovalRequested
// payload, and an item of [Module.Pending] and GET /api/approvals.
type PendingApproval struct {
	ApprovalID string `json:"approval_id"`
	// Kind is "approval" (a tool call waiting for allow or deny) or
	// "question" (a tool's server asks the user to fill a form: see
	// [Module.AskQuestion]).
	Kind    string `json:"kind"`
	AgentID string `json:"agent_id"`
	TaskID  string `json:"task_id"`
	Tool    string `json:"tool"`
	Server  string `json:"server"`
	// Arguments are the call's arguments as JSON text, cut to at most
	// MaxArgumentsPreview bytes on a UTF-8 boundary.
	Arguments string `json:"arguments"`
	// ArgumentsTruncated says Arguments were cut.
	ArgumentsTruncated bool `json:"arguments_truncated"`
	// Fingerprint is the tool's definition the human is asked about.
	Fingerprint string    `json:"fingerprint"`
	RequestedAt time.Time `json:"requested_at"`
	ExpiresAt   time.Time `json:"expires_at"`
	// Holder identifies the Module (the Engine) where the call waits: on
	// a NATS lattice the daemon's node name (lattice.node), else a random
	// id.
	Holder string `json:"holder"`
	// Message is a question's text, from the server that asks (at most
	// MaxQuestionMessage bytes); empty for an approval.
	Message string `json:"message,omitempty"`
	// Schema is a question's requested schema (flat primitive properties,
	// at most MaxQuestionSchemaBytes); absent for an approval.
	Schema json.RawMessage `json:"schema,omitempty"`
}

// Resolution is how an approval ended: the [EventResolved] payload.
type Resolution struct {
	ApprovalID string `json:"approval_id"`
	Kind       string `json:"kind"` // approval or question
	AgentID    string `json:"agent_id"`
	TaskID     string `json:"task_id"`
	Tool       string `json:"tool"`
	Decision   string `json:"decision"` // allow or deny
	Status     string `json:"status"`   // approved, denied, expired, withdrawn
	Remember   string `json:"remember"` // once or always
	// ResolvedBy says who resolved it and how: the resolvedBy given to
	// [Module.Resolve] ("http", "websocket", …), the answer's By of a door's
	// prompter, "timeout", "run_ended" or "shutdown".
	ResolvedBy string    `json:"resolved_by"`
	ResolvedAt time.Time `json:"resolved_at"`
	Holder     string    `json:"holder"`
	// VerdictID names the lattice verdict that resolved it, if one did.
	VerdictID string `json:"verdict_id,omitempty"`
	// content is a question's accepted answer, for the waiting call only:
	// never published (an event, a log or an HTTP answer does not carry
	// what the user typed).
	content map[string]any
	// Reason says why an unanswerable approval could not be asked
	// (status "unanswerable").
	Reason string `json:"reason,omitempty"`
}

// Module is the approval gate. Create it with [New], attach it with
// [axocoatl.Engine.Use]; it is an [http.Handler] for its routes.
type Module struct {
	cfg    Config
	policy *policy
	store  *store
	node   string // this Module's identity on the lattice
	mux    *http.ServeMux

	eng      atomic.Pointer[axocoatl.Engine]
	handlers atomic.Pointer[http.Handler] // the guarded mux, once started
	log      *slog.Logger
	stopping chan struct{}
	wg       sync.WaitGroup

	// repl is the protocol with the Modules of other Engines on a shared
	// lattice; it has its own lock, never taken with mu held.
	repl *replication

	mu     sync.Mutex
	life   lifecycle.State
	remove func()
	local  map[string]*pending
	recent map[string]struct{}
	ring   []string // recent ids, oldest first
	// channels are the ways the host declared that can answer approvals
	// besides a door's prompter (DeclareChannels); declared false: the
	// host said nothing, and some way is assumed.
	channels []string
	declared bool
	shared   bool // the lattice is shared with other processes (NATS)
}

type pending struct {
	info    PendingApproval
	verdict chan Resolution // receives the one resolution
	form    *formSchema     // a question's parsed schema; nil for an approval
}

// New validates cfg ([Config.Validate]) and returns the module.
func New(cfg Config) (*Module, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	m := &Module{
		cfg:      cfg,
		policy:   newPolicy(cfg),
		store:    newStore(cfg.DataDir),
		node:     lattice.NewID(time.Now()),
		stopping: make(chan struct{}),
		local:    map[string]*pending{},
		recent:   map[string]struct{}{},
	}
	m.repl = newReplication(m, m.stopping)
	m.mux = m.routes()
	return m, nil
}

// Name implements [axocoatl.Module].
func (m *Module) Name() string { return "approval" }

// Start implements [axocoatl.Module]: it loads the remembered decisions,
// follows the lattice's approval events and installs the gate.
func (m *Module) Start(_ context.Context, e *axocoatl.Engine) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.life.CheckStart("approval", ErrStopped); err != nil {
		return err
	}
	if err := m.store.load(); err != nil {
		return err
	}
	m.log = m.cfg.Logger
	if m.log == nil {
		m.log = e.Logger()
	}
	m.log = m.log.With("module", "approval")
	if b, ok := e.Bus().(interface{ Node() string }); ok {
		m.shared = true // other engines on it can answer
		if b.Node() != "" {
			// On a shared lattice the holder is the daemon's node name,
			// so a listing says where each approval waits.
			m.node = b.Node()
		}
	}
	m.repl.node, m.repl.log = m.node, m.log
	if err := m.repl.subscribe(e.Bus()); err != nil {
		return err
	}
	m.eng.Store(e)
	h := m.guarded(e)
	m.handlers.Store(&h)
	m.wg.Go(m.repl.follow)
	removeGate, removeQuestions := e.Intercept(m.intercept), e.SetQuestioner(m)
	m.remove = func() { removeGate(); removeQuestions() }
	m.life.MarkStarted()
	m.repl.askSync(m.node)
	if m.cfg.DataDir == "" {
		m.log.Info("approval gate on; remembered decisions are kept in memory only (no data dir)", "default", m.cfg.Default, "timeout", m.cfg.Timeout, "rules", len(m.cfg.Rules))
	} else {
		m.log.Info("approval gate on", "default", m.cfg.Default, "timeout", m.cfg.Timeout, "rules", len(m.cfg.Rules), "remembered", len(m.store.list()))
	}
	return nil
}

// Stop implements [axocoatl.Module]: it removes the gate, withdraws every
// call still waiting (they are not run) and ends the module's goroutines.
func (m *Module) Stop(ctx context.Context) error {
	m.mu.Lock()
	if !m.life.Stop() {
		m.mu.Unlock()
		return nil
	}
	remove := m.remove
	m.mu.Unlock()
	remove()
	close(m.stopping) // waiting calls withdraw; the follower ends
	m.repl.close()
	return lifecycle.Wait(ctx, "approval", &m.wg)
}

// maxField bounds the identifiers and names kept from other processes'
// events and verdicts (a peer on the lattice must not make this one keep
// arbitrary amounts of text).
const maxField = 256

// clip cuts s to maxField bytes on a UTF-8 boundary.
func clip(s string) string { return textsafe.Cut(s, maxField) }

// Events implements [axocoatl.EventDeclarer]: requests and resolutions
// are coordination events; the protocol between Engines is telemetry, so
// webhooks get ApprovalRequested and ApprovalResolved but not this chatter
// unless they name it.
func (m *Module) Events() map[string]lattice.Class {
	return map[string]lattice.Class{
		EventRequested: lattice.ClassCoordination,
		EventResolved:  lattice.ClassCoordination,
		EventVerdict:   lattice.ClassTelemetry,
		EventSync:      lattice.ClassTelemetry,
		EventPending:   lattice.ClassTelemetry,
	}
}

// Resync implements [axocoatl.ReplicatingModule]: approvals raised while
// this process was cut off from the lattice were not heard, here or
// there, so it asks every Module on the lattice, itself included (the
// "from" is not its own), to publish what it holds, as for a Module that
// joins.
func (m *Module) Resync(context.Context) {
	m.mu.Lock()
	started := m.life.Running()
	m.mu.Unlock()
	if started {
		m.repl.askSync(m.node + "/reconnected")
	}
}

// publish puts an event on the lattice; the record must not be lost with
// a caller's ctx, so it uses none.
func (m *Module) publish(typ string, payload any) {
	e := m.eng.Load()
	if err := e.Publish(context.Background(), typ, "approval", payload); err != nil && !errors.Is(err, lattice.ErrClosed) {
		m.log.Warn("publish failed", "type", typ, "error", err)
	}
}

// Pending lists the approvals waiting now, oldest first: those this Module
// holds and, on a shared lattice, those other Engines hold.
func (m *Module) Pending() []PendingApproval {
	out := append(m.held(), m.repl.pending(time.Now())...)
	// sort.Slice, not slices.SortFunc: one sorter for every element type,
	// where slices.SortFunc compiles ~20 KB per struct type into the daemon
	// (its size bound: bench/README.md).
	sort.Slice(out, func(i, j int) bool { return out[i].ApprovalID < out[j].ApprovalID })
	return out
}

// Resolve gives the verdict on a pending approval: decision allow or deny,
// remember once (or "") or always (the decision is kept for the agent's
// later calls of the tool, while its definition stays the same). resolvedBy
// says who and how, for the audit trail ("http", "websocket"). An approval
// another Engine holds is resolved through the lattice; Resolve waits for
// that Engine's outcome. Errors: ErrBadDecision, ErrBadRemember,
// ErrNotFound, ErrAlreadyResolved, ErrNoAnswer, ErrNotStarted, ErrStopped.
//
// A question ([PendingApproval].Kind "question") resolved this way is
// declined (deny) or accepted with its schema's defaults (allow); see
// [Module.Answer] to give its content.
func (m *Module) Resolve(ctx context.Context, id, decision, remember, resolvedBy string) error {
	_, err := m.resolve(ctx, id, decision, remember, nil, resolvedBy)
	return err
}

func (m *Module) resolve(ctx context.Context, id, decision, remember string, content map[string]any, resolvedBy string) (Resolution, error) {
	if decision != Allow && decision != Deny {
		return Resolution{}, ErrBadDecision
	}
	if remember == "" {
		remember = Once
	}
	if remember != Once && remember != Always {
		return Resolution{}, ErrBadRemember
	}
	if resolvedBy == "" {
		resolvedBy = "api"
	}
	// The caller's identity (a scoped token, a JWT) must carry the
	// approve scope and see the agent; it is named in the verdict
	// ("http:ops-bot"), so events and logs say who gave it.
	if who := axocoatl.IdentityFrom(ctx); who != nil {
		if !who.Can(axocoatl.ScopeApprove) {
			return Resolution{}, fmt.Errorf("%w: %s has no %s scope", axocoatl.ErrForbidden, who.Name, axocoatl.ScopeApprove)
		}
		if who.Restricted() && !slices.ContainsFunc(m.Pending(), func(p PendingApproval) bool {
			return p.ApprovalID == id && who.SeesAgent(p.AgentID)
		}) {
			return Resolution{}, fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		resolvedBy += ":" + who.Name
	}
	resolvedBy = clip(resolvedBy)
	m.mu.Lock()
	switch {
	case m.life.Stopped():
		m.mu.Unlock()
		return Resolution{}, ErrStopped
	case !m.life.Started():
		m.mu.Unlock()
		return Resolution{}, ErrNotStarted
	}
	if _, ok := m.local[id]; ok {
		m.mu.Unlock()
		return m.answerLocal(id, decision, remember, content, resolvedBy, "")
	}
	m.mu.Unlock()
	content, err := m.checkRemote(id, decision, remember, content)
	if err != nil {
		return Resolution{}, err
	}
	if r, ok, err := m.repl.resolve(ctx, id, decision, remember, content, resolvedBy); ok {
		return r, err
	}
	if m.resolvedRecently(id) {
		return Resolution{}, fmt.Errorf("%w: %s", ErrAlreadyResolved, id)
	}
	return Resolution{}, fmt.Errorf("%w: %s", ErrNotFound, id)
}

// DeclareChannels tells the Module every way besides a door's own
// [axocoatl.UserPrompter] that can answer its approvals: each a phrase for
// the log and the model ("the dashboard and approvals API at
// http://127.0.0.1:8080/"). Once declared, an approval that no channel can
// answer (no door's prompter could ask, none declared, and no shared
// lattice, whose other engines' dashboards answer) is denied at once with
// status [StatusUnanswerable], saying why, instead of waiting out the
// timeout. A host that never calls it keeps the old behaviour: the
// approval waits for [Module.Resolve] from anywhere. Calling it again
// replaces the list.
func (m *Module) DeclareChannels(channels ...string) {
	m.mu.Lock()
	m.channels, m.declared = slices.Clone(channels), true
	m.mu.Unlock()
}

// Channels lists the ways that can answer approvals besides a door's
// prompter: the declared ones ([Module.DeclareChannels]) and, on a shared
// lattice, the other engines on it. declared is false when the host
// declared none (some way is then assumed).
func (m *Module) Channels() (channels []string, declared bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := slices.Clone(m.channels)
	if m.shared {
		out = append(out, "the other engines on the shared lattice (their dashboards and approvals APIs)")
	}
	return out, m.declared
}

// answerable reports whether an approval can be answered without a door's
// prompter.
func (m *Module) answerable() bool {
	ch, declared := m.Channels()
	return !declared || len(ch) > 0
}

// Decisions lists the remembered decisions, by agent and tool.
func (m *Module) Decisions() []Remembered { return m.store.list() }

// Forget revokes the remembered decision for agentID's calls of tool: the
// next call is decided by the rest of the policy again. ErrDecisionNotFound
// when there is none.
func (m *Module) Forget(agentID, tool string) error {
	found, err := m.store.remove(agentID, tool)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("%w: agent %q, tool %q", ErrDecisionNotFound, agentID, tool)
	}
	if m.log != nil {
		m.log.Info("remembered decision revoked", "agent", agentID, "tool", tool)
	}
	return nil
}
