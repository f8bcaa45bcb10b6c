package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// callsModel asks for n calls of tool "t" in its first turn, then answers.
type callsModel struct {
	n     int
	turns atomic.Int32
	last  *Request
	limit int // MaxToolDefinitions; 0: no limit
}

func (m *callsModel) Generate(_ context.Context, req *Request) (*Response, error) {
	if m.turns.Add(1) > 1 {
		m.last = req
		return &Response{Content: "done"}, nil
	}
	calls := make([]ToolCall, m.n)
	for i := range calls {
		calls[i] = ToolCall{ID: fmt.Sprint("c", i), Name: "t", Arguments: json.RawMessage(`{}`)}
	}
	return &Response{ToolCalls: calls}, nil
}

type limitedModel struct{ *callsModel }

func (m limitedModel) MaxToolDefinitions() int { return m.limit }

// countingBox runs each call for a few milliseconds and records how many
// were in flight at once.
type countingBox struct {
	defs                  []ToolDef
	calls, inFlight, peak atomic.Int64
	refused               atomic.Int64
}

func (b *countingBox) Tools() []ToolDef { return b.defs }
func (b *countingBox) Call(context.Context, ToolCall) ToolResult {
	b.calls.Add(1)
	n := b.inFlight.Add(1)
	for {
		p := b.peak.Load()
		if n <= p || b.peak.CompareAndSwap(p, n) {
			break
		}
	}
	time.Sleep(5 * time.Millisecond)
	b.inFlight.Add(-1)
	return ToolResult{Content: "ok"}
}
func (b *countingBox) ToolCallsRefused(n int) { b.refused.Add(int64(n)) }

// A turn over max_tool_calls_per_turn runs the first 32 calls, at most 8 at
// once; each extra call is answered to the model as refused, and counted.
//
// Guards: bound agents[].max_tool_calls_per_turn, bound
// agents[].max_parallel_tool_calls (docs/bounds.md).
func TestToolCallsPerTurnBounded(t *testing.T) {
	m := &callsModel{n: 40}
	box := &countingBox{}
	out, err := Run(context.Background(), Spec{ID: "a"}, m, box, "go")
	if err != nil || out != "done" {
		t.Fatalf("Run: %q %v", out, err)
	}
	if got := box.calls.Load(); got != DefaultMaxToolCallsPerTurn {
		t.Errorf("%d calls ran, want %d", got, DefaultMaxToolCallsPerTurn)
	}
	if got := box.peak.Load(); got > DefaultMaxParallelToolCalls || got < 2 {
		t.Errorf("%d calls in flight at once, want 2..%d", got, DefaultMaxParallelToolCalls)
	}
	if got := box.refused.Load(); got != 8 {
		t.Errorf("refused counted %d, want 8", got)
	}
	var refused, ok int
	for _, msg := range m.last.Messages {
		if msg.Role != RoleTool {
			continue
		}
		switch {
		case msg.IsError && strings.Contains(msg.Content, "at most 32 run per turn"):
			refused++
		case !msg.IsError && msg.Content == "ok":
			ok++
		}
	}
	if refused != 8 || ok != 32 {
		t.Errorf("the model was told %d ok, %d refused; want 32, 8", ok, refused)
	}
}

// A turn far over the bound fails the run before any call.
//
// Guards: bound agents[].max_tool_calls_per_turn (docs/bounds.md).
func TestToolCallsFloodFailsRun(t *testing.T) {
	box := &countingBox{}
	_, err := Run(context.Background(), Spec{ID: "a", MaxToolCallsPerTurn: 4}, &callsModel{n: 33}, box, "go")
	if !errors.Is(err, ErrTooManyToolCalls) || !strings.Contains(err.Error(), "33 tool calls") {
		t.Fatalf("err = %v", err)
	}
	if box.calls.Load() != 0 {
		t.Fatalf("%d calls ran", box.calls.Load())
	}
}

// More tools than the model's service accepts fail the run before the
// first model call, with a message to narrow tools:; never a silent cut.
//
// Guards: bound "tool definitions in one model request" (agent runs) (docs/bounds.md).
func TestToolDefinitionLimit(t *testing.T) {
	box := &countingBox{defs: make([]ToolDef, 129)}
	m := limitedModel{&callsModel{limit: 128}}
	_, err := Run(context.Background(), Spec{ID: "a"}, m, box, "go")
	if !errors.Is(err, ErrTooManyTools) || !strings.Contains(err.Error(), "129 tools") || !strings.Contains(err.Error(), "narrow `tools:`") {
		t.Fatalf("err = %v", err)
	}
	if m.turns.Load() != 0 {
		t.Fatal("the model was called")
	}
	box.defs = box.defs[:128]
	if _, err := Run(context.Background(), Spec{ID: "a"}, m, box, "go"); err != nil {
		t.Fatalf("128 tools: %v", err)
	}
}
