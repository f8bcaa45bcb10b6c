package axocoatl

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/axocoatl/axocoatl-go/agent"
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
	// Server names the source the tool comes from (an MCP server, a remote
	// A2A agent); "" for native tools.
	Server string
	// Approval is the policy the tool's source asks gates to apply to its
	// calls: ApprovalPrompt, ApprovalAllow or ApprovalDeny; "" leaves it to
	// the gate's own default. It is metadata for gates: the Engine itself
	// does not act on it.
	Approval string
	Call     ToolFunc

	fingerprint string // set by RegisterTool
}

// The policies a tool's source may ask for (Tool.Approval), and the
// decisions a gate takes: the one vocabulary of the config's `approval:`
// keys, the approval module and the tool sources.
const (
	ApprovalPrompt = "prompt" // ask a human
	ApprovalAllow  = "allow"  // run the call
	ApprovalDeny   = "deny"   // refuse the call
)

// ValidApproval reports whether s is a Tool.Approval: "" or one of
// ApprovalPrompt, ApprovalAllow, ApprovalDeny.
func ValidApproval(s string) bool {
	switch s {
	case "", ApprovalPrompt, ApprovalAllow, ApprovalDeny:
		return true
	}
	return false
}

// Fingerprint identifies what the model and a human were shown of the tool:
// the hex SHA-256 of the canonical JSON of its name, description and input
// schema. A decision remembered for a tool is bound to it, so a tool whose
// definition changes (a "rug pull") is asked about again. It is set by
// [Engine.RegisterTool]; a Tool not obtained from the Engine has none.
func (t Tool) Fingerprint() string { return t.fingerprint }

// fingerprintOf hashes name, description and schema. The schema is
// compacted first so that whitespace does not change the fingerprint; key
// order is the source's own and part of what was shown.
func fingerprintOf(t Tool) string {
	var schema bytes.Buffer
	if err := json.Compact(&schema, t.InputSchema); err != nil {
		schema.Reset()
		schema.Write(t.InputSchema)
	}
	h := sha256.New()
	canon, _ := json.Marshal(struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}{t.Name, t.Description, json.RawMessage(schema.Bytes())})
	if canon == nil { // schema not JSON: hash it as text
		canon, _ = json.Marshal([]string{t.Name, t.Description, schema.String()})
	}
	h.Write(canon)
	return hex.EncodeToString(h.Sum(nil))
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
	t.fingerprint = fingerprintOf(t)
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

// Tool returns the registered tool of that qualified name.
func (e *Engine) Tool(name string) (Tool, bool) {
	e.mu.RLock()
	t, ok := e.tools[name]
	e.mu.RUnlock()
	return t, ok
}

// Tools lists the registered tools sorted by name.
func (e *Engine) Tools() []Tool {
	e.mu.RLock()
	out := make([]Tool, 0, len(e.tools))
	for _, t := range e.tools {
		out = append(out, t)
	}
	e.mu.RUnlock()
	// sort.Slice, not slices.SortFunc: one sorter for every element type,
	// where slices.SortFunc compiles ~20 KB per struct type into the daemon
	// (its size bound: bench/README.md).
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Intercept appends an interceptor to the chain every tool call passes
// through; the first added is the outermost. The returned func removes it
// (a module calls it on Stop); calls already inside it are not affected.
func (e *Engine) Intercept(i Interceptor) (remove func()) {
	entry := &interceptorEntry{fn: i}
	e.mu.Lock()
	// Copy on write: a call holds a snapshot of the chain without the lock.
	e.interceptors = append(slices.Clip(e.interceptors), entry.fn)
	e.interceptorIDs = append(slices.Clip(e.interceptorIDs), entry)
	e.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			e.mu.Lock()
			defer e.mu.Unlock()
			if k := slices.Index(e.interceptorIDs, entry); k >= 0 {
				e.interceptors = slices.Delete(slices.Clone(e.interceptors), k, k+1)
				e.interceptorIDs = slices.Delete(slices.Clone(e.interceptorIDs), k, k+1)
			}
		})
	}
}

// interceptorEntry gives an interceptor an identity (funcs are not
// comparable) so that its remove func finds it.
type interceptorEntry struct{ fn Interceptor }

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
	return e.callTool(ctx, spec, call, "")
}

// callTool runs one call; callID is the model's id of it ("" outside a
// run), for its span.
func (e *Engine) callTool(ctx context.Context, spec *agent.Spec, call ToolCall, callID string) (ToolResult, error) {
	// The span covers the refused calls too (not allowed, not found): a
	// trace shows what the model asked for.
	ctx, span := e.startTool(ctx, &call)
	res, err := e.callToolTraced(ctx, spec, &call)
	e.endTool(span, &call, callID, &res, err)
	return res, err
}

func (e *Engine) callToolTraced(ctx context.Context, spec *agent.Spec, c *ToolCall) (ToolResult, error) {
	call := *c
	if spec != nil && !spec.AllowsTool(call.Tool) {
		return ToolResult{}, fmt.Errorf("%w: %s", ErrToolDenied, call.Tool)
	}
	e.mu.RLock()
	t, ok := e.tools[call.Tool]
	chain := e.interceptors // copy on write: a snapshot stays valid
	e.mu.RUnlock()
	if !ok {
		return ToolResult{}, fmt.Errorf("%w: %s", ErrToolNotFound, call.Tool)
	}
	call.Server = t.Server
	c.Server = t.Server

	start := time.Now()
	// Both events' payloads share one buffer: the ToolResult payload is
	// appended after the ToolCalled one (one allocation per call instead
	// of two; a long error message grows its own).
	ids := len(call.AgentID) + len(call.TaskID) + len(call.Tool)
	p := payload{b: make([]byte, 0, 2*ids+128)}
	p.str("agent_id", call.AgentID).str("task_id", call.TaskID).str("tool", call.Tool)
	called, p := p.split()
	// Both events carry the call's trace context, formatted once.
	tp, ts := formatTrace(ctx)
	ev := event(EventToolCalled, call.AgentID, start, called)
	ev.TraceParent, ev.TraceState = tp, ts
	e.publishEvent(ctx, ev)
	res, err := e.invokeContained(ctx, chain[:len(chain):len(chain)], call, t.Call)
	if err != nil {
		res = ToolResult{Content: err.Error(), IsError: true}
	}
	end := time.Now()
	p.str("agent_id", call.AgentID).str("task_id", call.TaskID).str("tool", call.Tool).bool("ok", !res.IsError)
	if res.IsError {
		p.str("error", res.Content)
	}
	p.int("duration_ms", end.Sub(start).Milliseconds())
	ev = event(EventToolResult, call.AgentID, end, p.done())
	ev.TraceParent, ev.TraceState = tp, ts
	e.publishEvent(ctx, ev)
	return res, err
}

// invokeContained is invoke with a panic in the tool or an interceptor
// turned into a failed call (the stack logged): tools come from modules,
// SDKs and peers' data, and one bad one must not end the process.
func (e *Engine) invokeContained(ctx context.Context, chain []Interceptor, call ToolCall, final ToolFunc) (res ToolResult, err error) {
	defer func() {
		if v := recover(); v != nil {
			e.log.Error("tool call panicked", "tool", call.Tool, "agent", call.AgentID, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			res, err = ToolResult{}, fmt.Errorf("%w: %s", ErrToolPanicked, call.Tool)
		}
	}()
	return invoke(ctx, chain, call, final)
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
	// sort.Slice, not slices.SortFunc: one sorter for every element type,
	// where slices.SortFunc compiles ~20 KB per struct type into the daemon
	// (its size bound: bench/README.md).
	sort.Slice(defs, func(i, j int) bool { return defs[i].Name < defs[j].Name })
	return defs
}

func (b *runToolbox) Call(ctx context.Context, c agent.ToolCall) agent.ToolResult {
	res, err := b.engine.callTool(ctx, b.spec, ToolCall{AgentID: b.spec.ID, TaskID: b.taskID, Tool: c.Name, Arguments: c.Arguments}, c.ID)
	if err != nil {
		return agent.ToolResult{Content: err.Error(), IsError: true}
	}
	return res
}
