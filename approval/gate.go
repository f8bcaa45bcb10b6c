package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/lattice"
)

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
			ApprovalID: lattice.NewID(now), Kind: KindApproval, AgentID: call.AgentID, TaskID: call.TaskID,
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
	// The wait's span; a door's question to its user is its child, the
	// tool's own run is not.
	wctx, span := m.startWait(ctx, &p.info)
	m.publish(EventRequested, p.info)
	m.log.Info("approval requested", "approval", p.info.ApprovalID, "agent", call.AgentID, "task", call.TaskID,
		"tool", call.Tool, "server", t.Server, "expires_at", p.info.ExpiresAt)

	// failed receives why the door's prompter could not ask (nil when it
	// got an answer or was withdrawn); with no other channel that is the
	// end of it.
	failed := make(chan error, 1)
	var door *doorPrompt
	if prompter != nil {
		door = m.startPrompt(wctx, func(pctx context.Context) { failed <- m.promptUser(pctx, prompter, p.info) })
	} else {
		failed <- errors.New("the caller's door has no way to ask its user")
	}

	timer := time.NewTimer(m.cfg.Timeout)
	defer timer.Stop()
	var r Resolution
	for r.ApprovalID == "" {
		select {
		case r = <-p.verdict:
		case err := <-failed:
			if err != nil && !m.answerable() {
				r = m.unanswerable(p, err)
			}
		case <-timer.C:
			r = m.settle(p, Deny, StatusExpired, "timeout")
		case <-ctx.Done():
			r = m.settle(p, Deny, StatusWithdrawn, "run_ended")
		case <-m.stopping:
			r = m.settle(p, Deny, StatusWithdrawn, "shutdown")
		}
	}
	if door != nil {
		door.withdraw() // before the tool runs (see doorPrompt)
	}
	resume() // the tool's own run counts against the agent's timeout again
	endWait(span, &r)
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
	case StatusUnanswerable:
		return axocoatl.ToolResult{Content: unanswerableText(call.Tool, r), IsError: true}, nil
	}
	return withdrawnResult(call.Tool), nil
}

// doorPrompt is a question put to the caller's user through its door's
// [axocoatl.UserPrompter], on a goroutine of its own (counted in m.wg by
// the caller of startPrompt, under m.mu).
type doorPrompt struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the prompt has returned
}

// doorWithdrawWait bounds how long withdraw waits for a door's prompt to
// return once cancelled: a prompter honouring its ctx returns at once.
const doorWithdrawWait = time.Second

// startPrompt runs ask under a ctx of its own, derived from ctx.
func (m *Module) startPrompt(ctx context.Context, ask func(context.Context)) *doorPrompt {
	pctx, cancel := context.WithCancel(ctx)
	d := &doorPrompt{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer m.wg.Done()
		defer close(d.done)
		ask(pctx)
	}()
	return d
}

// withdraw takes the question back from the door and waits (bounded) until
// the door has let it go: a verdict from elsewhere (the dashboard) must
// not leave the door showing it while the gated tool runs, or an MCP
// 2026-07-28 client's next retry is handed the stale question again.
// Call it once.
func (d *doorPrompt) withdraw() {
	d.cancel()
	select {
	case <-d.done:
	case <-time.After(doorWithdrawWait):
	}
}

func withdrawnResult(tool string) axocoatl.ToolResult {
	return axocoatl.ToolResult{Content: fmt.Sprintf("The call of tool %s was not run: its approval request was withdrawn (the run ended).", tool), IsError: true}
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

// markResolved implements holder, for approvals other Engines held.
func (m *Module) markResolved(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.markResolvedLocked(id)
}

// resolvedRecently implements holder.
func (m *Module) resolvedRecently(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, done := m.recent[id]
	return done
}

// holds implements holder.
func (m *Module) holds(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.local[id]
	return ok
}

// held implements holder.
func (m *Module) held() []PendingApproval {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]PendingApproval, 0, len(m.local))
	for _, p := range m.local {
		out = append(out, p.info)
	}
	return out
}

// unanswerable denies p at once: no channel can answer it (why: err).
func (m *Module) unanswerable(p *pending, err error) Resolution {
	if _, cerr := m.claim(p.info.ApprovalID); cerr != nil {
		return <-p.verdict // the claimer sends it
	}
	return m.finishWhy(p, Deny, StatusUnanswerable, Once, "no_channel", "", clip(err.Error()))
}

// unanswerableText is what the model is told of an unanswerable approval:
// why, and the ways an approval can be answered.
func unanswerableText(tool string, r Resolution) string {
	return fmt.Sprintf("The call of tool %s was not run: its approval request (approval %s) could not be put to anyone, so it was denied at once. Why: %s. "+
		"An approval is answered by the caller's client when it can show forms (MCP form elicitation or a 2026-07-28 InputRequiredResult, A2A input-required), "+
		"on the dashboard or the approvals API where the host serves them, or by another engine on a shared lattice.", tool, r.ApprovalID, r.Reason)
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

// resolveLocal applies a verdict to an approval this Module holds (a
// question is accepted with its defaults; see answerLocal).
func (m *Module) resolveLocal(id, decision, remember, by, verdictID string) (Resolution, error) {
	return m.answerLocal(id, decision, remember, nil, by, verdictID)
}

// finish records a claimed approval's outcome: the remembered decision,
// the event, the log line.
func (m *Module) finish(p *pending, decision, status, remember, by, verdictID string) Resolution {
	return m.finishWhy(p, decision, status, remember, by, verdictID, "")
}

// finishWhy is finish with a reason for the record.
func (m *Module) finishWhy(p *pending, decision, status, remember, by, verdictID, reason string) Resolution {
	r := Resolution{
		ApprovalID: p.info.ApprovalID, Kind: p.info.Kind, AgentID: p.info.AgentID, TaskID: p.info.TaskID, Tool: p.info.Tool,
		Decision: decision, Status: status, Remember: remember, ResolvedBy: by,
		ResolvedAt: time.Now().UTC(), Holder: m.node, VerdictID: verdictID, Reason: reason,
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
	m.publish(EventResolved, r)
	m.log.Info("approval resolved", "approval", r.ApprovalID, "agent", r.AgentID, "task", r.TaskID, "tool", r.Tool,
		"decision", r.Decision, "status", r.Status, "remember", r.Remember, "resolved_by", r.ResolvedBy,
		"waited", r.ResolvedAt.Sub(p.info.RequestedAt).Round(time.Millisecond), "reason", r.Reason)
	return r
}
