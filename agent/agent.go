// Package agent holds what an agent is ([Spec]), what it thinks with
// ([Model]) and how it works ([Run]: model → tool calls → model, bounded),
// with no protocol and no provider in it.
//
// A [Spec] names the agent, the model it asks for, its system prompt, the
// tools it may use (a glob allow-list over qualified tool names, checked by
// [Spec.AllowsTool]) and the bounds of one run: rounds, time, tool calls per
// turn and in flight. [Spec.WithDefaults] gives each zero field its default
// ([DefaultMaxIterations], [DefaultTimeout], ...); [Spec.Validate] checks a
// spec on its own.
//
// A [Model] turns a [Request] (the conversation as [Message] values and the
// tools on offer as [ToolDef] values) into the next assistant turn, a
// [Response] of text, [ToolCall] values or both. The providers in
// agent/provider and below implement it over HTTP; any Go type with a
// Generate method is a Model. Two optional interfaces describe a model
// further: [Offline] (it reaches nothing outside the process) and
// [ToolLimiter] (its service accepts at most so many tool definitions). A
// model that can report its answer as it is written also implements
// [Streamer] ([GenerateStream] serves both kinds); every [Response] carries
// the call's token [Usage].
//
// [Run] executes one task: it calls the model, runs the calls it asks for
// through a [Toolbox] (a failed call is a [ToolResult] with IsError, which
// the model reads; it never fails the run), and repeats until the model
// answers without tools. A run fails only on the model's error, on ctx, or
// on a bound: [ErrMaxIterations], [ErrTooManyTools], [ErrTooManyToolCalls],
// [ErrMaxTokensPerRun]. [RunObserved] reports a run as it happens (the
// model's deltas, tool calls started and finished, usage) to an
// [Observer].
//
// A host rarely calls Run itself: the Engine of the root package keeps the
// agents (a Spec and a Model each), builds the Toolbox from its tool
// registry, filtered by the spec and passed through its interceptors, and
// runs every task with Run, whichever door it came in by.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"path"
	"regexp"
	"time"

	"github.com/axocoatl/axocoatl-go/internal/cfgerr"
)

// Defaults applied by [Spec.WithDefaults] to the zero fields of a [Spec].
const (
	DefaultMaxIterations = 10
	DefaultTimeout       = 120 * time.Second
	// DefaultMaxToolCallsPerTurn bounds the tool calls run for one model
	// turn; models ask for a handful at most.
	DefaultMaxToolCallsPerTurn = 32
	// DefaultMaxParallelToolCalls bounds the tool calls of one run that are
	// in flight at once.
	DefaultMaxParallelToolCalls = 8
	// DefaultMaxHistoryBytes is the window of a conversation's earlier
	// turns sent to the model: 256 KiB, about 64,000 tokens.
	DefaultMaxHistoryBytes = 256 << 10
)

// refuseFactor: a turn asking for more than this many times
// MaxToolCallsPerTurn calls fails the run instead of refusing the extra
// calls one by one (answering each would make the next request megabytes).
const refuseFactor = 8

// Spec describes one agent. The YAML form is an entry of the config's
// `agents:` list.
type Spec struct {
	ID           string `yaml:"id" json:"id"`                                 // [a-z0-9_-]+, unique
	Name         string `yaml:"name" json:"name"`                             // zero: the ID
	Description  string `yaml:"description" json:"description"`               // zero: none
	Provider     string `yaml:"provider" json:"provider"`                     // config's provider name; informational for the Engine
	Model        string `yaml:"model" json:"model"`                           // provider's model name; zero: provider default
	SystemPrompt string `yaml:"system_prompt" json:"system_prompt,omitempty"` // zero: none
	// Tools is a glob allow-list over qualified tool names; nil means all
	// tools, an empty non-nil list means none.
	Tools         []string      `yaml:"tools" json:"tools,omitempty"`
	MaxIterations int           `yaml:"max_iterations" json:"max_iterations"` // model↔tool rounds; zero: 10
	Timeout       time.Duration `yaml:"timeout" json:"timeout"`               // whole run; zero: 120s
	// MaxToolCallsPerTurn bounds the tool calls run for one model turn.
	// Calls beyond it are not run: each is answered to the model as a
	// failed call saying so. A turn asking for more than 8 times the bound
	// fails the run ([ErrTooManyToolCalls]). Zero: 32.
	MaxToolCallsPerTurn int `yaml:"max_tool_calls_per_turn" json:"max_tool_calls_per_turn,omitempty"`
	// MaxParallelToolCalls bounds the calls of one turn that run at once;
	// the others wait for a slot. Zero: 8.
	MaxParallelToolCalls int `yaml:"max_parallel_tool_calls" json:"max_parallel_tool_calls,omitempty"`
	// MaxHistoryBytes bounds the earlier turns of a conversation the model
	// is sent with each new one (a window: the oldest turns are left out
	// first, the model is told so; see the conversation package). Zero:
	// DefaultMaxHistoryBytes.
	MaxHistoryBytes int `yaml:"max_history_bytes" json:"max_history_bytes,omitempty"`
	// MaxTokensPerRun bounds the tokens one run may spend, input and
	// output of all its model calls together ([Usage.Total], as the
	// provider reports them): checked after each model call, a run past
	// it fails with [ErrMaxTokensPerRun]. Zero: no bound.
	MaxTokensPerRun int64 `yaml:"max_tokens_per_run" json:"max_tokens_per_run,omitempty"`
}

var idPattern = regexp.MustCompile(`^[a-z0-9_-]+$`)

// ValidID reports whether id is a valid agent (or server) identifier:
// [a-z0-9_-]+, at most 64 characters, as [Spec.Validate] requires of
// [Spec.ID].
func ValidID(id string) bool { return len(id) <= 64 && idPattern.MatchString(id) }

// Validate checks the spec on its own (uniqueness is the registry's job).
// Its errors are *axocoatl.ConfigError (internal/cfgerr) naming the key.
func (s Spec) Validate() error {
	if s.ID == "" {
		return cfgerr.Errorf("", "id is required")
	}
	if !ValidID(s.ID) {
		return cfgerr.Errorf("id", "%q must match [a-z0-9_-]+ (at most 64 characters)", s.ID)
	}
	if s.MaxIterations < 0 {
		return cfgerr.Errorf("max_iterations", "must not be negative")
	}
	if s.Timeout < 0 {
		return cfgerr.Errorf("timeout", "must not be negative")
	}
	if s.MaxToolCallsPerTurn < 0 {
		return cfgerr.Errorf("max_tool_calls_per_turn", "must not be negative")
	}
	if s.MaxParallelToolCalls < 0 {
		return cfgerr.Errorf("max_parallel_tool_calls", "must not be negative")
	}
	if s.MaxHistoryBytes < 0 {
		return cfgerr.Errorf("max_history_bytes", "must not be negative")
	}
	if s.MaxTokensPerRun < 0 {
		return cfgerr.Errorf("max_tokens_per_run", "must not be negative")
	}
	for _, g := range s.Tools {
		if _, err := path.Match(g, ""); err != nil {
			return cfgerr.Errorf("tools", "bad glob %q", g)
		}
	}
	return nil
}

// WithDefaults returns the spec with zero fields replaced by their defaults.
func (s Spec) WithDefaults() Spec {
	if s.Name == "" {
		s.Name = s.ID
	}
	if s.MaxIterations == 0 {
		s.MaxIterations = DefaultMaxIterations
	}
	if s.Timeout == 0 {
		s.Timeout = DefaultTimeout
	}
	if s.MaxToolCallsPerTurn == 0 {
		s.MaxToolCallsPerTurn = DefaultMaxToolCallsPerTurn
	}
	if s.MaxParallelToolCalls == 0 {
		s.MaxParallelToolCalls = DefaultMaxParallelToolCalls
	}
	if s.MaxHistoryBytes == 0 {
		s.MaxHistoryBytes = DefaultMaxHistoryBytes
	}
	return s
}

// AllowsTool reports whether the qualified tool name passes the allow-list.
func (s Spec) AllowsTool(name string) bool {
	if s.Tools == nil {
		return true
	}
	for _, g := range s.Tools {
		if g == name {
			return true
		}
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

// Role of a message in a conversation.
type Role string

const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one turn of the conversation a [Model] sees in a [Request].
type Message struct {
	Role    Role
	Content string
	// ToolCalls are the calls an assistant turn asked for.
	ToolCalls []ToolCall
	// ToolCallID and IsError are set on a tool turn: the result of that call.
	ToolCallID string
	IsError    bool
}

// ToolCall is a model's request to run a tool, one of [Response.ToolCalls];
// [Toolbox.Call] runs it.
type ToolCall struct {
	ID        string          `json:"id"`        // provider-assigned; echoed back with the result
	Name      string          `json:"name"`      // qualified tool name
	Arguments json.RawMessage `json:"arguments"` // a JSON object
}

// ToolDef is what a model is told about a tool ([Toolbox.Tools]).
type ToolDef struct {
	Name        string
	Description string
	InputSchema json.RawMessage // JSON Schema of the arguments object
}

// ToolResult is the outcome of one tool call as the model sees it: [Run]
// gives it back as a [RoleTool] [Message].
type ToolResult struct {
	Content    string          // text for the model
	Structured json.RawMessage // structured output, if the tool gave any
	IsError    bool            // the call failed; Content says why
}

// Request is one model call.
type Request struct {
	Model    string
	System   string
	Messages []Message
	Tools    []ToolDef
}

// Response is a model's turn: text, tool calls, or both, and what the call
// cost in tokens (zero when the provider reports nothing).
type Response struct {
	Content   string
	ToolCalls []ToolCall
	Usage     Usage
	// Model is the model that answered, as the service named it (it may
	// differ from [Request.Model]: a dated version); "" when the service
	// did not say.
	Model string
	// FinishReason is why the model stopped, as the service said it
	// ("stop", "tool_calls", "end_turn", "length", ...); "" when it did
	// not say.
	FinishReason string
}

// Model generates the next assistant turn. Implementations live in
// agent/provider and its sub-packages; every call must honour ctx. It may be
// called by many runs at once. A model may also implement [Offline] and
// [ToolLimiter].
type Model interface {
	Generate(ctx context.Context, req *Request) (*Response, error)
}

// Offline is an optional capability of a Model: one that reports true
// reaches nothing outside the process (no model service, no network) and
// asks for no tool calls. Doors use it to describe an agent's safety: a
// model that does not implement Offline is taken to reach the outside world
// (open world) and, when its agent may call tools, to be destructive.
type Offline interface {
	Offline() bool
}

// IsOffline reports whether m declares itself offline through [Offline].
func IsOffline(m Model) bool {
	o, ok := m.(Offline)
	return ok && o.Offline()
}

// ToolLimiter is implemented by a Model whose service refuses requests
// offering more tool definitions than MaxToolDefinitions (OpenAI: 128).
// [Run] then fails before the first call ([ErrTooManyTools]) when the
// agent's tools exceed it,
// rather than let the service refuse each request or cut the list
// silently.
type ToolLimiter interface {
	MaxToolDefinitions() int
}

// RefusalCounter is optionally implemented by a [Toolbox] that counts the
// tool calls [Run] refused for being over [Spec.MaxToolCallsPerTurn] (for
// metrics and logs).
type RefusalCounter interface {
	ToolCallsRefused(n int)
}

// Toolbox is the set of tools one [Run] may use.
type Toolbox interface {
	// Tools lists the tools to offer the model.
	Tools() []ToolDef
	// Call runs one tool. Failures are results with IsError set, so the
	// model hears about them; Call never fails the run.
	Call(ctx context.Context, call ToolCall) ToolResult
}

// ErrMaxIterations ends a run whose model still wanted tools after
// [Spec.MaxIterations] rounds.
var ErrMaxIterations = errors.New("agent: max_iterations reached")

// ErrTooManyTools ends a run offered more tool definitions than its model's
// service accepts (see [ToolLimiter]).
var ErrTooManyTools = errors.New("agent: too many tools for the model")

// ErrTooManyToolCalls ends a run whose model asked for more than 8 times
// [Spec.MaxToolCallsPerTurn] calls in one turn.
var ErrTooManyToolCalls = errors.New("agent: too many tool calls in one turn")

// ErrMaxTokensPerRun ends a run whose model calls used more tokens than
// [Spec.MaxTokensPerRun].
var ErrMaxTokensPerRun = errors.New("agent: max_tokens_per_run crossed")
