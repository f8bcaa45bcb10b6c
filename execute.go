package axocoatl

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/lattice"
)

// Request is one task for an agent. Execute is the short form.
type Request struct {
	AgentID string
	Input   string
	// Source is the door the task came through. Zero: SourceLibrary.
	Source Source
	// TaskID names the task. Zero: a new time-ordered id.
	TaskID string
	// ConversationID makes the task a turn of a conversation of the agent
	// (see the conversation package): the model is sent the
	// conversation's earlier turns (windowed to the agent's
	// max_history_bytes) and the turn is recorded when the run ends, also
	// when it fails. Zero: a one-shot task, recorded nowhere.
	// [conversation.New] starts a conversation with an id the Engine
	// chooses (Result.ConversationID). An unknown id fails with
	// conversation.ErrNotFound unless CreateConversation; one of another
	// agent with conversation.ErrOtherAgent; one with a turn running with
	// conversation.ErrBusy (turns of a conversation never run at once: the
	// second is refused, not queued). A turn that ran but could not be
	// recorded (the store failed, or the turn passes its conversation's
	// bounds) does not fail the task: it is logged, and its TaskCompleted
	// or AgentFailed event says so in "conversation_error". Each message
	// is recorded up to an eighth of the store's max_bytes (1 MiB by
	// default), cut with a note.
	ConversationID string
	// CreateConversation: an unknown ConversationID starts a conversation
	// of that id instead of failing (A2A's client-chosen contextId).
	CreateConversation bool
	// OnEvent, when set, is told the run's events as they happen: each
	// delta of the model's answers, each tool call started and finished,
	// each model call's usage ([agent.RunEvent]). It is called in order
	// from one goroutine of the Engine's, never from the model's: a slow
	// OnEvent does not slow the run, it gets text deltas coalesced (and,
	// past the bounds of [Engine.FollowRun]'s listeners, loses events).
	// Every call has returned when ExecuteRequest returns, which waits for
	// it: it must return promptly (a door bounds its writes). A task of
	// an agent on another daemon gets the events its RemoteRun reports
	// (the cluster module's: that daemon's run's events, over NATS).
	// Zero: none.
	OnEvent func(agent.RunEvent)
	// OnEventSync is OnEvent without the hand-off, for a caller whose
	// observer never blocks: it is called as each event happens, on the
	// goroutine that reports it (the model's for deltas, a tool call's
	// worker for tool events), one call at a time and in order, and not
	// after ExecuteRequest returns. It must return at once: copy what it
	// needs and wake its own reader with a non-blocking send, never I/O
	// nor a lock held across I/O, as while it runs the model's answer is
	// not read (and it gets every delta: nothing coalesces them for it).
	// It saves OnEvent's goroutine hand-off, so a door's first delta goes
	// out sooner (MCP progress uses it). A panic is logged and ends its
	// calls, not the run. A run with it streams as a run with OnEvent
	// does; a caller may set both. Zero: none.
	OnEventSync func(agent.RunEvent)
}

// Result is a finished task. On failure Execute still returns the TaskID and
// Duration alongside the error.
type Result struct {
	TaskID   string
	AgentID  string
	Output   string
	Duration time.Duration
	// ConversationID is the conversation the task was a turn of ("" for
	// a one-shot task): the request's, or the new one's.
	ConversationID string
	// Usage is the tokens the run's model calls used, summed (also on
	// failure: the calls made up to it).
	Usage agent.Usage
}

// Execute runs input through the agent and returns its output. It publishes
// AgentActivated, then TaskCompleted or AgentFailed. An unknown agent gives
// ErrAgentNotFound (and no events).
func (e *Engine) Execute(ctx context.Context, agentID, input string) (Result, error) {
	return e.ExecuteRequest(ctx, Request{AgentID: agentID, Input: input})
}

// ExecuteRequest is Execute with the door and task id spelled out.
func (e *Engine) ExecuteRequest(ctx context.Context, req Request) (Result, error) {
	e.mu.RLock()
	a, ok := e.agents[req.AgentID]
	var remote *remoteAgent
	if !ok {
		remote = e.remote[req.AgentID]
	}
	closed := e.closed
	if !closed {
		e.runs.Add(1) // under the lock, so Close cannot miss this run
	}
	e.mu.RUnlock()
	if closed {
		return Result{}, ErrClosed
	}
	defer e.runs.Done()
	if id := IdentityFrom(ctx); !ok && remote == nil || !id.SeesAgent(req.AgentID) {
		return Result{}, fmt.Errorf("%w: %q", ErrAgentNotFound, req.AgentID)
	} else if !id.Can(ScopeExecute) {
		return Result{}, fmt.Errorf("agent %s: %w: %s has no %s scope", req.AgentID, ErrForbidden, id.Name, ScopeExecute)
	}
	if e.maxRuns > 0 {
		if e.inFlight.Add(1) > e.maxRuns {
			e.inFlight.Add(-1)
			return Result{}, fmt.Errorf("agent %s: %w: %d tasks in flight, the limit (MaxRuns): retry later", req.AgentID, ErrBusy, e.maxRuns)
		}
		defer e.inFlight.Add(-1)
	}
	if req.Source == "" {
		req.Source = SourceLibrary
	}
	start := time.Now()
	if req.TaskID == "" {
		req.TaskID = lattice.NewID(start)
	}
	// One run per task id at a time: a caller that chose the id of a
	// running task (the Axocoatl /a2a/tasks door takes one) would mix its
	// events, answer and followers into that task's.
	cast, ok := e.startCast(req.TaskID, req.AgentID)
	if !ok {
		return Result{TaskID: req.TaskID, AgentID: req.AgentID}, fmt.Errorf("agent %s: %w: %q", req.AgentID, ErrTaskExists, req.TaskID)
	}
	// The run's end ends it (executeLocal, executeRemote); this, a return
	// before the run began.
	defer e.endCast(req.TaskID, cast)
	if remote != nil {
		return e.executeRemote(ctx, remote, req, cast)
	}
	ctx, span := e.startRun(ctx, &a.spec, &req)
	res, err := e.executeLocal(ctx, a, req, start, cast)
	endRun(span, &res, err)
	return res, err
}

// executeLocal runs a task of a local agent: ExecuteRequest's work once
// the task was admitted, inside its invoke_agent span.
func (e *Engine) executeLocal(ctx context.Context, a *registeredAgent, req Request, start time.Time, cast *runCast) (Result, error) {
	res := Result{TaskID: req.TaskID, AgentID: req.AgentID}
	var conv *turn
	if req.ConversationID != "" {
		var err error
		if conv, err = e.beginTurn(ctx, &a.spec, &req, start); err != nil {
			return res, fmt.Errorf("agent %s: %w", req.AgentID, err)
		}
		res.ConversationID = conv.info.ID
	}

	// The run ends at the first of: the caller's ctx, the agent's timeout
	// (a clock that gates pause while a human decides: PauseRunClock),
	// Engine.Close.
	ctx, cancel := newRunClock(ctx, a.spec.Timeout)
	defer cancel()
	stop := context.AfterFunc(e.runCtx, cancel)
	defer stop()

	a.running.Add(1)
	defer a.running.Add(-1)
	// A run right after start must not miss the tools of a source still
	// connecting: it waits (bounded) for those its agent may use.
	missing := e.awaitTools(ctx, &a.spec)
	if len(missing) > 0 {
		e.log.Warn("run started without the tools of sources still connecting", "agent", req.AgentID, "task", req.TaskID, "tools_pending", missing)
	}
	// The fan-out (registered by ExecuteRequest, before AgentActivated, so
	// that whoever sees that event can follow the run).
	var delivered chan struct{}
	if req.OnEvent != nil {
		if sub, err := cast.subscribe(); err == nil {
			delivered = make(chan struct{})
			go e.deliver(sub, req.OnEvent, &req, delivered)
		}
	}
	if req.OnEventSync != nil {
		cast.listenSync(req.OnEventSync, e.syncPanicked(&req))
	}
	defer func() {
		e.endCast(req.TaskID, cast)
		if delivered != nil {
			<-delivered
		}
	}()
	p := newPayload()
	p.str("agent_id", req.AgentID).str("task_id", req.TaskID).str("source", string(req.Source))
	if conv != nil {
		p.str("conversation_id", res.ConversationID)
	}
	if len(missing) > 0 {
		p.strs("tools_pending", missing)
	}
	e.publishEvent(ctx, event(EventAgentActivated, req.AgentID, start, p.done()))

	tools := &runToolbox{engine: e, spec: &a.spec, taskID: req.TaskID}
	// Each model call ends in a ModelResult event.
	// and, tracing on, is a chat span.
	model := e.traced(e.recorded(listened(a.model, cast), &a.spec, &req), a.model, &a.spec)
	var run agent.Turn
	var err error
	if conv == nil {
		run, err = e.runContained(ctx, a.spec, model, tools, nil, req, cast.observe)
	} else {
		run, err = e.runContained(ctx, withOmittedNote(a.spec, conv.omitted), model, tools, conv.history, req, cast.observe)
	}
	res.Usage = run.Usage
	if err != nil {
		err = e.runError(ctx, a.spec, err)
	}
	// A turn that could not be recorded is logged and said in its event;
	// a run that went well still succeeds (its answer is the caller's).
	var recErr error
	if conv != nil {
		recErr = e.endTurn(ctx, conv, &req, start, run, err)
	}
	out := run.Output
	res.Duration = time.Since(start)
	if err != nil {
		// A cancel (the client's notifications/cancelled, tasks/cancel, a
		// client gone) is not the agent failing: the event says so and it
		// is logged at info.
		canceled := errors.Is(err, context.Canceled) && !errors.Is(err, ErrClosed)
		p := newPayload()
		p.str("agent_id", req.AgentID).str("task_id", req.TaskID).str("error", err.Error()).
			int("duration_ms", res.Duration.Milliseconds()).str("source", string(req.Source))
		p.usage(a.spec.Model, res.Usage)
		if conv != nil {
			p.str("conversation_id", res.ConversationID)
			if recErr != nil {
				p.str("conversation_error", recErr.Error())
			}
		}
		if canceled {
			p.bool("canceled", true)
		}
		e.publishEvent(ctx, event(EventAgentFailed, req.AgentID, time.Now(), p.done()))
		if canceled {
			e.log.Info("task canceled", "agent", req.AgentID, "task", req.TaskID, "source", req.Source)
		} else {
			e.log.Warn("task failed", "agent", req.AgentID, "task", req.TaskID, "error", err)
		}
		return res, err
	}
	res.Output = out
	p = newPayload()
	p.str("agent_id", req.AgentID).str("task_id", req.TaskID).str("output", out).
		int("duration_ms", res.Duration.Milliseconds()).str("source", string(req.Source))
	p.usage(a.spec.Model, res.Usage)
	if conv != nil {
		p.str("conversation_id", res.ConversationID)
		if recErr != nil {
			p.str("conversation_error", recErr.Error())
		}
	}
	e.publishEvent(ctx, event(EventTaskCompleted, req.AgentID, time.Now(), p.done()))
	return res, nil
}

// runContained is agent.Run with a panic of the model (a provider, a
// host's Model) turned into a failed run, the stack logged: one bad answer
// must not end the process and every run in it.
func (e *Engine) runContained(ctx context.Context, spec agent.Spec, model agent.Model, tools agent.Toolbox, history []agent.Message, req Request, observe agent.Observer) (turn agent.Turn, err error) {
	defer func() {
		if v := recover(); v != nil {
			e.log.Error("agent run panicked", "agent", req.AgentID, "task", req.TaskID, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			turn, err = agent.Turn{}, ErrModelPanicked
		}
	}()
	return agent.RunObserved(ctx, spec, model, tools, history, req.Input, observe)
}

// runError explains why a run's context ended, keeping the cause checkable.
func (e *Engine) runError(ctx context.Context, spec agent.Spec, err error) error {
	switch {
	case ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		// A deadline inside the run, not the run's own (a provider call's
		// Timeout): its error says which, and stays checkable.
		return fmt.Errorf("agent %s: %w", spec.ID, err)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("agent %s: timed out after %s: %w", spec.ID, spec.Timeout, context.DeadlineExceeded)
	case e.runCtx.Err() != nil:
		return fmt.Errorf("agent %s: %w", spec.ID, ErrClosed)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("agent %s: canceled: %w", spec.ID, context.Canceled)
	}
	return fmt.Errorf("agent %s: %w", spec.ID, err)
}

// publishEvent emits an Engine event; a failure is logged, never fatal to a
// run.
func (e *Engine) publishEvent(ctx context.Context, ev lattice.Event) {
	// The record of a run or call must not be lost because its context
	// ended, so a Bus never sees a done ctx. Only a done ctx is detached:
	// a live one passes as is (tool calls are hot; no allocation).
	if ctx.Err() != nil {
		ctx = context.WithoutCancel(ctx)
	}
	stampTrace(ctx, &ev)
	if err := e.bus.Publish(ctx, ev); err != nil && !errors.Is(err, lattice.ErrClosed) {
		e.log.Warn("publish failed", "type", ev.Type, "error", err)
	}
}
