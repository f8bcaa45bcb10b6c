package axocoatl

import (
	"context"
	"time"

	"github.com/axocoatl/axocoatl-go/agent"
)

// Finish reasons of a [EventModelResult] payload, as the run loop sees the
// answer.
const (
	// FinishStop: the model answered with text and no tool call; the run
	// ends with it.
	FinishStop = "stop"
	// FinishToolCalls: the model asked for tool calls; the run goes on.
	FinishToolCalls = "tool_calls"
	// FinishError: the call failed (the provider's error, a timeout, a
	// cancel); the run ends with it.
	FinishError = "error"
)

// recordedModel is a run's model with each call recorded on the lattice:
// one [EventModelResult] when the call ends, with its duration, tokens and
// finish reason, so that a run's timeline shows its model calls without
// tracing (the deltas of the answer are never events). The run loop calls
// it from one goroutine, so its counter needs no lock.
type recordedModel struct {
	agent.Model
	e                             *Engine
	agentID, taskID, name, source string
	calls                         int64
}

// recorded wraps m, the model of the run of agent spec that req asks for.
func (e *Engine) recorded(m agent.Model, spec *agent.Spec, req *Request) *recordedModel {
	return &recordedModel{Model: m, e: e, agentID: spec.ID, taskID: req.TaskID, name: spec.Model, source: string(req.Source)}
}

// Generate implements [agent.Model].
func (m *recordedModel) Generate(ctx context.Context, req *agent.Request) (*agent.Response, error) {
	start := time.Now()
	res, err := m.Model.Generate(ctx, req)
	m.record(ctx, start, res, err)
	return res, err
}

// GenerateStream implements [agent.Streamer]: the wrapped model streams if
// it does ([agent.GenerateStream]).
func (m *recordedModel) GenerateStream(ctx context.Context, req *agent.Request, emit func(agent.Delta)) (*agent.Response, error) {
	start := time.Now()
	res, err := agent.GenerateStream(ctx, m.Model, req, emit)
	m.record(ctx, start, res, err)
	return res, err
}

// MaxToolDefinitions passes the model's [agent.ToolLimiter] on (0: none).
func (m *recordedModel) MaxToolDefinitions() int {
	if l, ok := m.Model.(agent.ToolLimiter); ok {
		return l.MaxToolDefinitions()
	}
	return 0
}

// Offline passes the model's [agent.Offline] on.
func (m *recordedModel) Offline() bool { return agent.IsOffline(m.Model) }

func (m *recordedModel) record(ctx context.Context, start time.Time, res *agent.Response, err error) {
	m.calls++
	end := time.Now()
	finish := FinishStop
	var usage agent.Usage
	switch {
	case err != nil || res == nil:
		finish = FinishError
	case len(res.ToolCalls) > 0:
		finish = FinishToolCalls
	}
	if res != nil {
		usage = res.Usage
	}
	p := payload{b: make([]byte, 0, 208+len(m.agentID)+len(m.taskID)+len(m.name))}
	p.str("agent_id", m.agentID).str("task_id", m.taskID).str("source", m.source).int("call", m.calls).
		bool("ok", finish != FinishError).str("finish_reason", finish)
	if err != nil {
		p.str("error", err.Error())
	}
	p.int("duration_ms", end.Sub(start).Milliseconds())
	p.usage(m.name, usage)
	m.e.publishEvent(ctx, event(EventModelResult, m.agentID, end, p.done()))
}
