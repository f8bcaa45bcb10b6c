package axocoatl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/lattice"
)

// ToolResult is the outcome of a tool call as the model sees it.
type ToolResult = agent.ToolResult

// ToolCall is one call of a registered tool, as interceptors and handlers
// see it.
type ToolCall struct {
	AgentID   string
	TaskID    string
	Tool      string // qualified name, e.g. mcp__fs__read_file
	Server    string // Tool.Server of the tool called ("" for native tools)
	Arguments json.RawMessage
}

// ToolFunc runs a tool call. An error, or a result with IsError, is a failed
// call: the model is told, the run goes on.
type ToolFunc func(ctx context.Context, call ToolCall) (ToolResult, error)

// Interceptor wraps every tool call: it may inspect or change the call,
// refuse it (return without calling next), or wait (for a human) first.
type Interceptor func(ctx context.Context, call ToolCall, next ToolFunc) (ToolResult, error)

// Tool is a tool agents can call.
type Tool struct {
	Name        string          // qualified, unique in the Engine
	Description string          // for the model
	InputSchema json.RawMessage // JSON Schema of the arguments; zero: any object
	// Annotations are hints about the tool's behaviour (MCP ToolAnnotations
	// as JSON), kept for the modules that expose or gate tools.
	Annotations json.RawMessage
	// Server names the MCP server the tool comes from; "" for native tools.
	Server string
	Call   ToolFunc
}

var anyObjectSchema = json.RawMessage(`{"type":"object"}`)

// RegisterTool adds a tool, replacing any tool of the same name. Tools are
// looked up at each call, so a running agent sees the change on its next call.
func (e *Engine) RegisterTool(t Tool) error {
	if t.Name == "" || t.Call == nil {
		return errors.New("axocoatl: a tool needs a name and a Call func")
	}
	if len(t.InputSchema) == 0 {
		t.InputSchema = anyObjectSchema
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	e.tools[t.Name] = t
	return nil
}

// UnregisterTool removes a tool; it reports whether the tool was there.
func (e *Engine) UnregisterTool(name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.tools[name]
	delete(e.tools, name)
	return ok
}

// Tools lists the registered tools sorted by name.
func (e *Engine) Tools() []Tool {
	e.mu.RLock()
	out := make([]Tool, 0, len(e.tools))
	for _, t := range e.tools {
		out = append(out, t)
	}
	e.mu.RUnlock()
	slices.SortFunc(out, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Intercept appends an interceptor to the chain every tool call passes
// through; the first added is the outermost.
func (e *Engine) Intercept(i Interceptor) {
	e.mu.Lock()
	e.interceptors = append(e.interceptors, i)
	e.mu.Unlock()
}

// CallTool calls a registered tool as agentID would, through the allow-list
// and the interceptor chain, publishing ToolCalled and ToolResult.
func (e *Engine) CallTool(ctx context.Context, call ToolCall) (ToolResult, error) {
	var spec *agent.Spec
	if call.AgentID != "" {
		e.mu.RLock()
		a, ok := e.agents[call.AgentID]
		e.mu.RUnlock()
		if !ok {
			return ToolResult{}, fmt.Errorf("%w: %q", ErrAgentNotFound, call.AgentID)
		}
		spec = &a.spec
	}
	return e.callTool(ctx, spec, call)
}

func (e *Engine) callTool(ctx context.Context, spec *agent.Spec, call ToolCall) (ToolResult, error) {
	if spec != nil && !spec.AllowsTool(call.Tool) {
		return ToolResult{}, fmt.Errorf("%w: %s", ErrToolDenied, call.Tool)
	}
	e.mu.RLock()
	t, ok := e.tools[call.Tool]
	chain := e.interceptors // append-only: a snapshot stays valid
	e.mu.RUnlock()
	if !ok {
		return ToolResult{}, fmt.Errorf("%w: %s", ErrToolNotFound, call.Tool)
	}
	call.Server = t.Server

	start := time.Now()
	// Both events' payloads share one buffer: the ToolResult payload is
	// appended after the ToolCalled one (one allocation per call instead
	// of two; a long error message grows its own).
	ids := len(call.AgentID) + len(call.TaskID) + len(call.Tool)
	p := payload{b: make([]byte, 0, 2*ids+128)}
	p.str("agent_id", call.AgentID).str("task_id", call.TaskID).str("tool", call.Tool)
	called, p := p.split()
	e.publishEvent(ctx, event(lattice.ToolCalled, call.AgentID, start, called))
	res, err := invoke(ctx, chain[:len(chain):len(chain)], call, t.Call)
	if err != nil {
		res = ToolResult{Content: err.Error(), IsError: true}
	}
	end := time.Now()
	p.str("agent_id", call.AgentID).str("task_id", call.TaskID).str("tool", call.Tool).bool("ok", !res.IsError)
	if res.IsError {
		p.str("error", res.Content)
	}
	p.int("duration_ms", end.Sub(start).Milliseconds())
	e.publishEvent(ctx, event(lattice.ToolResult, call.AgentID, end, p.done()))
	return res, err
}

func invoke(ctx context.Context, chain []Interceptor, call ToolCall, final ToolFunc) (ToolResult, error) {
	switch len(chain) {
	case 0:
		return final(ctx, call)
	case 1: // the innermost interceptor calls the tool itself: no closure to allocate
		return chain[0](ctx, call, final)
	}
	return chain[0](ctx, call, func(ctx context.Context, call ToolCall) (ToolResult, error) {
		return invoke(ctx, chain[1:], call, final)
	})
}

// runToolbox is the agent.Toolbox of one run: the Engine's tools filtered by
// the agent's allow-list, looked up afresh at each call.
type runToolbox struct {
	engine *Engine
	spec   *agent.Spec
	taskID string
}

func (b *runToolbox) Tools() []agent.ToolDef {
	e := b.engine
	e.mu.RLock()
	defer e.mu.RUnlock()
	if len(e.tools) == 0 {
		return nil
	}
	defs := make([]agent.ToolDef, 0, len(e.tools))
	for _, t := range e.tools {
		if b.spec.AllowsTool(t.Name) {
			defs = append(defs, agent.ToolDef{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
		}
	}
	slices.SortFunc(defs, func(a, b agent.ToolDef) int { return strings.Compare(a.Name, b.Name) })
	return defs
}

func (b *runToolbox) Call(ctx context.Context, c agent.ToolCall) agent.ToolResult {
	res, err := b.engine.callTool(ctx, b.spec, ToolCall{AgentID: b.spec.ID, TaskID: b.taskID, Tool: c.Name, Arguments: c.Arguments})
	if err != nil {
		return agent.ToolResult{Content: err.Error(), IsError: true}
	}
	return res
}
