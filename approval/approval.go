// Package approval is the gate that puts tool calls before a human: a
// Module that installs a tool-call interceptor on the Engine, pauses calls
// whose policy is "prompt" until someone allows or denies them, and fails
// closed (no answer within the timeout is a denial).
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
// A call to ask about publishes [lattice.ApprovalRequested] (payload:
// [PendingApproval]) and waits for the first of: a verdict ([Module.Resolve],
// the HTTP routes, an [EventVerdict] on the lattice, or the door's own
// [axocoatl.UserPrompter] such as MCP elicitation), the timeout (denied,
// status "expired"), or the end of the call's context (status "withdrawn").
// The agent's timeout does not run while a call waits. Each approval is
// resolved exactly once; [lattice.ApprovalResolved] (payload: [Resolution])
// and a log line record every outcome with who resolved it.
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
// The Module is an http.Handler for GET /api/approvals, POST
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
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/internal/lifecycle"
	"github.com/axocoatl/axocoatl-go/lattice"
)

// EventVerdict is the lattice event that carries a verdict to the Module
// holding the approval (payload: approval_id, decision, remember,
// resolved_by, verdict_id, from). Modules publish it only for approvals
// another Engine holds; the holder answers with ApprovalResolved, whose
// verdict_id names the verdict that won.
const EventVerdict = lattice.ApprovalVerdict

// EventSync and EventPending let a Module that joins a shared lattice learn
// the approvals already pending elsewhere: it publishes EventSync (payload:
// from) once subscribed, and every other Module answers with EventPending
// (payload: holder, approvals: [PendingApproval…], at most
// maxPendingPerEvent per event), at most once per syncReplyEvery however
// many ask: the answer is broadcast, so one serves every Module that asked.
const (
	EventSync    = lattice.ApprovalSync
	EventPending = lattice.ApprovalPending
)

const (
	maxPendingPerEvent = 100
	syncReplyEvery     = 250 * time.Millisecond
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

// remoteAnswerTimeout bounds how long Resolve waits for the holder of an
// approval on another Engine.
const remoteAnswerTimeout = 10 * time.Second

// Bounds on what other Engines can make this one keep.
const (
	maxRemote = 10000 // approvals held elsewhere tracked at once
	maxRecent = 4096  // resolved ids remembered to answer 409
)

// PendingApproval is a call waiting for a verdict: the ApprovalRequested
// payload, and an item of [Module.Pending] and GET /api/approvals.
type PendingApproval struct {
	ApprovalID string `json:"approval_id"`
	AgentID    string `json:"agent_id"`
	TaskID     string `json:"task_id"`
	Tool       string `json:"tool"`
	Server     string `json:"server"`
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
}

// Resolution is how an approval ended: the ApprovalResolved payload.
type Resolution struct {
	ApprovalID string `json:"approval_id"`
	AgentID    string `json:"agent_id"`
	TaskID     string `json:"task_id"`
	Tool       string `json:"tool"`
	Decision   string `json:"decision"` // allow or deny
	Status     string `json:"status"`   // approved, denied, expired, withdrawn
	Remember   string `json:"remember"` // once or always
	// ResolvedBy says who resolved it and how: the resolvedBy given to
	// Resolve ("http", "websocket", …), the answer's By of a door's
	// prompter, "timeout", "run_ended" or "shutdown".
	ResolvedBy string    `json:"resolved_by"`
	ResolvedAt time.Time `json:"resolved_at"`
	Holder     string    `json:"holder"`
	// VerdictID names the lattice verdict that resolved it, if one did.
	VerdictID string `json:"verdict_id,omitempty"`
}

type verdictPayload struct {
	VerdictID  string `json:"verdict_id"`
	ApprovalID string `json:"approval_id"`
	Decision   string `json:"decision"`
	Remember   string `json:"remember"`
	ResolvedBy string `json:"resolved_by"`
	From       string `json:"from"`
}

// Module is the approval gate. Create it with New, attach it with
// [axocoatl.Engine.Use]; it is an http.Handler for its routes.
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

	mu      sync.Mutex
	life    lifecycle.State
	remove  func()
	subs    []lattice.Subscription
	local   map[string]*pending
	remote  map[string]PendingApproval
	recent  map[string]struct{}
	ring    []string // recent ids, oldest first
	waiters map[string][]chan Resolution
	dropped uint64 // remote approvals not tracked (over maxRemote)
}

type pending struct {
	info    PendingApproval
	verdict chan Resolution // receives the one resolution
}

// New validates cfg and returns the module.
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
		remote:   map[string]PendingApproval{},
		recent:   map[string]struct{}{},
		waiters:  map[string][]chan Resolution{},
	}
	m.mux = m.routes()
	return m, nil
}

// Name implements axocoatl.Module.
func (m *Module) Name() string { return "approval" }

// Start implements axocoatl.Module: it loads the remembered decisions,
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
	if b, ok := e.Bus().(interface{ Node() string }); ok && b.Node() != "" {
		// On a shared lattice the holder is the daemon's node name, so a
		// listing says where each approval waits.
		m.node = b.Node()
	}
	for _, typ := range []string{lattice.ApprovalRequested, lattice.ApprovalResolved, EventVerdict, EventSync, EventPending} {
		s, err := e.Bus().Subscribe(lattice.Filter{Types: []string{typ}}, 1024)
		if err != nil {
			for _, s := range m.subs {
				s.Close()
			}
			m.subs = nil
			return fmt.Errorf("approval: subscribe: %w", err)
		}
		m.subs = append(m.subs, s)
	}
	m.eng.Store(e)
	h := e.GuardHTTP(axocoatl.HTTPRoute{MaxBodyBytes: maxVerdictBytes}, http.HandlerFunc(m.serveMux))
	m.handlers.Store(&h)
	m.wg.Go(m.follow)
	m.remove = e.Intercept(m.intercept)
	m.life.MarkStarted()
	m.publish(EventSync, map[string]string{"from": m.node})
	if m.cfg.DataDir == "" {
		m.log.Info("approval gate on; remembered decisions are kept in memory only (no data dir)", "default", m.cfg.Default, "timeout", m.cfg.Timeout, "rules", len(m.cfg.Rules))
	} else {
		m.log.Info("approval gate on", "default", m.cfg.Default, "timeout", m.cfg.Timeout, "rules", len(m.cfg.Rules), "remembered", len(m.store.list()))
	}
	return nil
}

// Stop implements axocoatl.Module: it removes the gate, withdraws every
// call still waiting (they are not run) and ends the module's goroutines.
func (m *Module) Stop(ctx context.Context) error {
	m.mu.Lock()
	if !m.life.Stop() {
		m.mu.Unlock()
		return nil
	}
	remove, subs := m.remove, m.subs
	m.mu.Unlock()
	remove()
	close(m.stopping) // waiting calls withdraw; the follower ends
	for _, s := range subs {
		s.Close()
	}
	return lifecycle.Wait(ctx, "approval", &m.wg)
}

// decide applies the policy to a call of t by agentID.
func (m *Module) decide(agentID string, t *axocoatl.Tool) (decision, by string, rule int) {
	if r, ok := m.store.get(agentID, t.Name); ok && r.Fingerprint == t.Fingerprint() {
		return r.Decision, byRemembered, -1
	}
	return m.policy.decide(t)
}

// intercept is the gate on every tool call.
func (m *Module) intercept(ctx context.Context, call axocoatl.ToolCall, next axocoatl.ToolFunc) (axocoatl.ToolResult, error) {
	e := m.eng.Load()
	t, ok := e.Tool(call.Tool)
	if !ok {
		// Unregistered between the Engine's lookup and here: nothing to
		// run, nothing to ask about.
		return axocoatl.ToolResult{Content: fmt.Sprintf("tool %s is not registered", call.Tool), IsError: true}, nil
	}
	decision, by, rule := m.decide(call.AgentID, &t)
	switch decision {
	case Allow:
		return next(ctx, call)
	case Deny:
		m.log.Info("tool call denied by policy", "agent", call.AgentID, "task", call.TaskID, "tool", call.Tool, "by", by, "rule", rule)
		return axocoatl.ToolResult{
			Content: fmt.Sprintf("The call of tool %s was not made: the approval policy denies it (%s). Do not retry it.", call.Tool, policySource(by, rule)),
			IsError: true,
		}, nil
	}
	return m.ask(ctx, call, &t, next)
}

func policySource(by string, rule int) string {
	switch by {
	case byRemembered:
		return "a human denied it with remember: always"
	case byRule:
		return fmt.Sprintf("approval rule %d", rule)
	case byTool:
		return "its source's approval setting"
	}
	return "the approval default"
}

// ask holds the call until it is resolved.
func (m *Module) ask(ctx context.Context, call axocoatl.ToolCall, t *axocoatl.Tool, next axocoatl.ToolFunc) (axocoatl.ToolResult, error) {
	now := time.Now()
	args, cut := preview(call.Arguments)
	p := &pending{
		info: PendingApproval{
			ApprovalID: lattice.NewID(now), AgentID: call.AgentID, TaskID: call.TaskID,
			Tool: call.Tool, Server: t.Server, Arguments: args, ArgumentsTruncated: cut,
			Fingerprint: t.Fingerprint(), RequestedAt: now.UTC(), ExpiresAt: now.Add(m.cfg.Timeout).UTC(),
			Holder: m.node,
		},
		verdict: make(chan Resolution, 1),
	}
	if ctx.Err() != nil {
		return withdrawnResult(call.Tool), nil // nobody to ask for
	}
	prompter := axocoatl.UserPrompterFrom(ctx)
	m.mu.Lock()
	if !m.life.Running() {
		m.mu.Unlock()
		return withdrawnResult(call.Tool), nil
	}
	m.local[p.info.ApprovalID] = p
	if prompter != nil {
		m.wg.Add(1) // under mu while started: Stop's Wait cannot have begun
	}
	m.mu.Unlock()

	resume := axocoatl.PauseRunClock(ctx)
	defer resume()
	m.publish(lattice.ApprovalRequested, p.info)
	m.log.Info("approval requested", "approval", p.info.ApprovalID, "agent", call.AgentID, "task", call.TaskID,
		"tool", call.Tool, "server", t.Server, "expires_at", p.info.ExpiresAt)

	if prompter != nil {
		pctx, cancel := context.WithCancel(ctx)
		defer cancel() // the gate is done: withdraw the question
		go func() {
			defer m.wg.Done()
			m.promptUser(pctx, prompter, p.info)
		}()
	}

	timer := time.NewTimer(m.cfg.Timeout)
	defer timer.Stop()
	var r Resolution
	select {
	case r = <-p.verdict:
	case <-timer.C:
		r = m.settle(p, Deny, StatusExpired, "timeout")
	case <-ctx.Done():
		r = m.settle(p, Deny, StatusWithdrawn, "run_ended")
	case <-m.stopping:
		r = m.settle(p, Deny, StatusWithdrawn, "shutdown")
	}
	resume() // the tool's own run counts against the agent's timeout again
	switch r.Status {
	case StatusApproved:
		return next(ctx, call)
	case StatusDenied:
		return axocoatl.ToolResult{
			Content: fmt.Sprintf("A human denied this call of tool %s (approval %s). It was not run; do not retry it.", call.Tool, r.ApprovalID),
			IsError: true,
		}, nil
	case StatusExpired:
		return axocoatl.ToolResult{
			Content: fmt.Sprintf("The call of tool %s was not run: no human answered its approval request within %s, so it was denied (approval %s, expired).", call.Tool, m.cfg.Timeout, r.ApprovalID),
			IsError: true,
		}, nil
	}
	return withdrawnResult(call.Tool), nil
}

func withdrawnResult(tool string) axocoatl.ToolResult {
	return axocoatl.ToolResult{Content: fmt.Sprintf("The call of tool %s was not run: its approval request was withdrawn (the run ended).", tool), IsError: true}
}

// promptUser puts the approval to the door's user; a verdict from anywhere
// else that comes first cancels ctx.
func (m *Module) promptUser(ctx context.Context, pr axocoatl.UserPrompter, info PendingApproval) {
	msg := fmt.Sprintf("Agent %s wants to call tool %s", info.AgentID, info.Tool)
	if info.Server != "" {
		msg += " (server " + info.Server + ")"
	}
	msg += " with arguments " + info.Arguments + ". Accept to allow this call once; decline to deny it."
	ans, err := pr.PromptUser(ctx, axocoatl.UserPrompt{Message: msg})
	if err != nil {
		if ctx.Err() == nil {
			m.log.Info("could not ask the user through the door; waiting for another verdict", "approval", info.ApprovalID, "error", err)
		}
		return
	}
	decision := Deny
	if ans.Accepted {
		decision = Allow
	}
	by := ans.By
	if by == "" {
		by = "user_prompt"
	}
	if _, err := m.resolveLocal(info.ApprovalID, decision, Once, by, ""); err != nil && !errors.Is(err, ErrAlreadyResolved) && !errors.Is(err, ErrNotFound) {
		m.log.Warn("user's answer not applied", "approval", info.ApprovalID, "error", err)
	}
}

// preview cuts the arguments to MaxArgumentsPreview bytes on a UTF-8
// boundary.
func preview(args json.RawMessage) (string, bool) {
	if len(args) <= MaxArgumentsPreview {
		return string(args), false
	}
	cut := MaxArgumentsPreview
	for cut > 0 && !utf8.RuneStart(args[cut]) {
		cut--
	}
	return string(args[:cut]), true
}

// maxField bounds the identifiers and names kept from other processes'
// events and verdicts (a peer on the lattice must not make this one keep
// arbitrary amounts of text).
const maxField = 256

// clip cuts s to maxField bytes on a UTF-8 boundary.
func clip(s string) string {
	if len(s) <= maxField {
		return s
	}
	cut := maxField
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// claim takes a local approval out of the pending set; only one claimer
// ever gets it.
func (m *Module) claim(id string) (*pending, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.local[id]
	if !ok {
		if _, done := m.recent[id]; done {
			return nil, ErrAlreadyResolved
		}
		return nil, ErrNotFound
	}
	delete(m.local, id)
	m.markResolvedLocked(id)
	return p, nil
}

func (m *Module) markResolvedLocked(id string) {
	if _, ok := m.recent[id]; ok {
		return
	}
	m.recent[id] = struct{}{}
	m.ring = append(m.ring, id)
	if len(m.ring) > maxRecent {
		delete(m.recent, m.ring[0])
		m.ring = slices.Delete(m.ring, 0, 1)
	}
}

// settle resolves p from the waiting call itself (timeout, ctx, stop); if
// a verdict claimed it first, that verdict is the outcome.
func (m *Module) settle(p *pending, decision, status, by string) Resolution {
	if _, err := m.claim(p.info.ApprovalID); err != nil {
		return <-p.verdict // the claimer sends it
	}
	r := m.finish(p, decision, status, Once, by, "")
	return r
}

// resolveLocal applies a verdict to an approval this Module holds.
func (m *Module) resolveLocal(id, decision, remember, by, verdictID string) (Resolution, error) {
	p, err := m.claim(id)
	if err != nil {
		return Resolution{}, err
	}
	status := StatusApproved
	if decision == Deny {
		status = StatusDenied
	}
	r := m.finish(p, decision, status, remember, by, verdictID)
	p.verdict <- r
	return r, nil
}

// finish records a claimed approval's outcome: the remembered decision,
// the event, the log line.
func (m *Module) finish(p *pending, decision, status, remember, by, verdictID string) Resolution {
	r := Resolution{
		ApprovalID: p.info.ApprovalID, AgentID: p.info.AgentID, TaskID: p.info.TaskID, Tool: p.info.Tool,
		Decision: decision, Status: status, Remember: remember, ResolvedBy: by,
		ResolvedAt: time.Now().UTC(), Holder: m.node, VerdictID: verdictID,
	}
	if remember == Always {
		err := m.store.put(Remembered{
			AgentID: p.info.AgentID, Tool: p.info.Tool, Fingerprint: p.info.Fingerprint,
			Decision: decision, DecidedAt: r.ResolvedAt, ResolvedBy: by, ApprovalID: r.ApprovalID,
		})
		if err != nil {
			m.log.Error("decision not remembered; it applies to this call only", "approval", r.ApprovalID, "error", err)
			r.Remember = Once
		}
	}
	m.publish(lattice.ApprovalResolved, r)
	m.log.Info("approval resolved", "approval", r.ApprovalID, "agent", r.AgentID, "task", r.TaskID, "tool", r.Tool,
		"decision", r.Decision, "status", r.Status, "remember", r.Remember, "resolved_by", r.ResolvedBy,
		"waited", r.ResolvedAt.Sub(p.info.RequestedAt).Round(time.Millisecond))
	return r
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
	now := time.Now()
	m.mu.Lock()
	out := make([]PendingApproval, 0, len(m.local)+len(m.remote))
	for _, p := range m.local {
		out = append(out, p.info)
	}
	for id, p := range m.remote {
		if now.After(p.ExpiresAt.Add(time.Minute)) { // its holder is gone
			delete(m.remote, id)
			continue
		}
		out = append(out, p)
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b PendingApproval) int { return strings.Compare(a.ApprovalID, b.ApprovalID) })
	return out
}

// Resolve gives the verdict on a pending approval: decision allow or deny,
// remember once (or "") or always (the decision is kept for the agent's
// later calls of the tool, while its definition stays the same). resolvedBy
// says who and how, for the audit trail ("http", "websocket"). An approval
// another Engine holds is resolved through the lattice; Resolve waits for
// that Engine's outcome. Errors: ErrBadDecision, ErrBadRemember,
// ErrNotFound, ErrAlreadyResolved, ErrNoAnswer, ErrNotStarted, ErrStopped.
func (m *Module) Resolve(ctx context.Context, id, decision, remember, resolvedBy string) error {
	_, err := m.resolve(ctx, id, decision, remember, resolvedBy)
	return err
}

func (m *Module) resolve(ctx context.Context, id, decision, remember, resolvedBy string) (Resolution, error) {
	if decision != Allow && decision != Deny {
		return Resolution{}, ErrBadDecision
	}
	if remember == "" {
		remember = Once
	}
	if remember != Once && remember != Always {
		return Resolution{}, ErrBadRemember
	}
	resolvedBy = clip(resolvedBy)
	if resolvedBy == "" {
		resolvedBy = "api"
	}
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
		return m.resolveLocal(id, decision, remember, resolvedBy, "")
	}
	if _, ok := m.remote[id]; !ok {
		_, done := m.recent[id]
		m.mu.Unlock()
		if done {
			return Resolution{}, fmt.Errorf("%w: %s", ErrAlreadyResolved, id)
		}
		return Resolution{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	answer := make(chan Resolution, 1)
	m.waiters[id] = append(m.waiters[id], answer)
	m.mu.Unlock()
	defer m.dropWaiter(id, answer)

	v := verdictPayload{VerdictID: lattice.NewID(time.Now()), ApprovalID: id, Decision: decision, Remember: remember, ResolvedBy: resolvedBy, From: m.node}
	m.publish(EventVerdict, v)
	timer := time.NewTimer(remoteAnswerTimeout)
	defer timer.Stop()
	select {
	case r := <-answer:
		if r.VerdictID != v.VerdictID {
			return r, fmt.Errorf("%w: %s (%s by %s)", ErrAlreadyResolved, id, r.Status, r.ResolvedBy)
		}
		return r, nil
	case <-timer.C:
		return Resolution{}, fmt.Errorf("%w: %s within %s", ErrNoAnswer, id, remoteAnswerTimeout)
	case <-ctx.Done():
		return Resolution{}, ctx.Err()
	case <-m.stopping:
		return Resolution{}, ErrStopped
	}
}

func (m *Module) dropWaiter(id string, ch chan Resolution) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ws := slices.DeleteFunc(m.waiters[id], func(c chan Resolution) bool { return c == ch })
	if len(ws) == 0 {
		delete(m.waiters, id)
	} else {
		m.waiters[id] = ws
	}
}

// follow tracks the approval events of other Engines on the lattice,
// applies verdicts meant for this one and answers sync requests.
func (m *Module) follow() {
	chans := make([]<-chan lattice.Event, len(m.subs))
	for i, s := range m.subs {
		chans[i] = s.Events()
	}
	requested, resolved, verdicts, syncs, pendings := chans[0], chans[1], chans[2], chans[3], chans[4]
	var lastReply time.Time
	var replyAt <-chan time.Time // a sync reply is due
	for requested != nil || resolved != nil || verdicts != nil || syncs != nil || pendings != nil {
		select {
		case ev, ok := <-requested:
			if !ok {
				requested = nil
				continue
			}
			m.onRequested(ev.Payload)
		case ev, ok := <-resolved:
			if !ok {
				resolved = nil
				continue
			}
			m.onResolved(ev)
		case ev, ok := <-verdicts:
			if !ok {
				verdicts = nil
				continue
			}
			m.onVerdict(ev)
		case ev, ok := <-syncs:
			if !ok {
				syncs = nil
				continue
			}
			var req struct{ From string }
			if json.Unmarshal(ev.Payload, &req) != nil || req.From == m.node || replyAt != nil {
				continue
			}
			if wait := syncReplyEvery - time.Since(lastReply); wait > 0 {
				replyAt = time.After(wait) // one reply serves every request until then
				continue
			}
			m.replySync()
			lastReply = time.Now()
		case <-replyAt:
			replyAt = nil
			m.replySync()
			lastReply = time.Now()
		case ev, ok := <-pendings:
			if !ok {
				pendings = nil
				continue
			}
			var snap struct {
				Holder    string            `json:"holder"`
				Approvals []json.RawMessage `json:"approvals"`
			}
			if json.Unmarshal(ev.Payload, &snap) != nil || snap.Holder == m.node {
				continue
			}
			for _, p := range snap.Approvals {
				m.onRequested(p)
			}
		}
	}
}

// replySync publishes the approvals this Module holds, for Modules that
// joined the lattice after they were requested.
func (m *Module) replySync() {
	m.mu.Lock()
	local := make([]PendingApproval, 0, len(m.local))
	for _, p := range m.local {
		local = append(local, p.info)
	}
	m.mu.Unlock()
	if len(local) == 0 {
		return
	}
	slices.SortFunc(local, func(a, b PendingApproval) int { return strings.Compare(a.ApprovalID, b.ApprovalID) })
	for chunk := range slices.Chunk(local, maxPendingPerEvent) {
		m.publish(EventPending, map[string]any{"holder": m.node, "approvals": chunk})
	}
}

// onRequested tracks an approval another Engine holds (an
// ApprovalRequested payload, or one of an EventPending's).
func (m *Module) onRequested(payload json.RawMessage) {
	var p PendingApproval
	if json.Unmarshal(payload, &p) != nil || p.ApprovalID == "" || p.Holder == "" || p.Holder == m.node {
		return
	}
	// Another process's event: keep only what a listing needs, bounded.
	p.Arguments, _ = preview(json.RawMessage(p.Arguments))
	p.ApprovalID, p.AgentID, p.TaskID = clip(p.ApprovalID), clip(p.AgentID), clip(p.TaskID)
	p.Tool, p.Server, p.Fingerprint, p.Holder = clip(p.Tool), clip(p.Server), clip(p.Fingerprint), clip(p.Holder)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, done := m.recent[p.ApprovalID]; done {
		return // its resolution overtook it
	}
	if len(m.remote) >= maxRemote {
		m.dropped++
		if m.dropped == 1 || m.dropped%1000 == 0 {
			m.log.Warn("too many approvals pending on other engines; not listing more", "limit", maxRemote, "dropped", m.dropped)
		}
		return
	}
	m.remote[p.ApprovalID] = p
}

func (m *Module) onResolved(ev lattice.Event) {
	var r Resolution
	if json.Unmarshal(ev.Payload, &r) != nil || r.ApprovalID == "" || r.Holder == m.node {
		return
	}
	m.mu.Lock()
	delete(m.remote, r.ApprovalID)
	m.markResolvedLocked(r.ApprovalID)
	ws := m.waiters[r.ApprovalID]
	delete(m.waiters, r.ApprovalID)
	m.mu.Unlock()
	for _, w := range ws {
		w <- r // buffered 1, one send each
	}
}

func (m *Module) onVerdict(ev lattice.Event) {
	var v verdictPayload
	if json.Unmarshal(ev.Payload, &v) != nil || v.ApprovalID == "" || v.From == m.node {
		return
	}
	if v.Decision != Allow && v.Decision != Deny {
		return
	}
	if v.Remember != Always {
		v.Remember = Once
	}
	m.mu.Lock()
	_, mine := m.local[v.ApprovalID]
	m.mu.Unlock()
	if !mine {
		return
	}
	by := clip(v.ResolvedBy)
	if by == "" {
		by = "lattice"
	}
	if _, err := m.resolveLocal(v.ApprovalID, v.Decision, v.Remember, by, v.VerdictID); err != nil {
		m.log.Info("verdict from another engine not applied", "approval", v.ApprovalID, "error", err)
	}
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
