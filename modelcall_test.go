package axocoatl_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/lattice"
)

// failingModel fails every call with a provider's words.
type failingModel struct{}

func (failingModel) Generate(context.Context, *agent.Request) (*agent.Response, error) {
	return nil, errors.New("provider said no")
}

// Each model call of a run ends in one ModelResult, in order with the
// run's other events: its number, tokens, model and finish reason (the
// call that asked for a tool, then the one that answered), never the
// answer's text; a failed call says so with the provider's error.
func TestModelResultPerCall(t *testing.T) {
	e := newEngine(t)
	must(t, e.RegisterTool(axocoatl.Tool{Name: "clock", Call: func(context.Context, axocoatl.ToolCall) (axocoatl.ToolResult, error) {
		return axocoatl.ToolResult{Content: "noon"}, nil
	}}))
	model := &scriptModel{turns: []agent.Response{
		{ToolCalls: []agent.ToolCall{call("c1", "clock", `{}`)}, Usage: agent.Usage{InputTokens: 10, OutputTokens: 3}},
		{Content: "it is noon, secret answer", Usage: agent.Usage{InputTokens: 20, OutputTokens: 5, CachedInputTokens: 8}},
	}}
	must(t, e.AddAgent(agent.Spec{ID: "timer", Model: "m-1"}, model))
	must(t, e.AddAgent(agent.Spec{ID: "broken"}, failingModel{}))
	events := subscribe(t, e)
	res, err := e.Execute(context.Background(), "timer", "what time is it?")
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	var models []map[string]any
	for len(types) == 0 || types[len(types)-1] != axocoatl.EventTaskCompleted {
		ev, p := next(t, events)
		types = append(types, ev.Type)
		if ev.Type == axocoatl.EventModelResult {
			if ev.Class != lattice.ClassTelemetry || strings.Contains(string(ev.Payload), "noon") {
				t.Fatalf("ModelResult %v %s", ev.Class, ev.Payload)
			}
			models = append(models, p)
		}
	}
	if got, want := strings.Join(types, " "), "AgentActivated ModelResult ToolCalled ToolResult ModelResult TaskCompleted"; got != want {
		t.Fatalf("events %s, want %s", got, want)
	}
	for i, want := range []struct {
		finish     string
		in, out    float64
		cached     float64
		callNumber float64
	}{{axocoatl.FinishToolCalls, 10, 3, 0, 1}, {axocoatl.FinishStop, 20, 5, 8, 2}} {
		p := models[i]
		u, _ := p["usage"].(map[string]any)
		if p["task_id"] != res.TaskID || p["agent_id"] != "timer" || p["source"] != "library" || p["model"] != "m-1" || p["ok"] != true ||
			p["finish_reason"] != want.finish || p["call"] != want.callNumber ||
			u["input_tokens"] != want.in || u["output_tokens"] != want.out || u["cached_input_tokens"] != want.cached {
			t.Errorf("model call %d: %v", i+1, p)
		}
		if _, ok := p["duration_ms"].(float64); !ok {
			t.Errorf("model call %d lacks duration_ms: %v", i+1, p)
		}
	}

	if _, err := e.Execute(context.Background(), "broken", "x"); err == nil {
		t.Fatal("a failing model's run succeeded")
	}
	next(t, events) // AgentActivated
	ev, p := next(t, events)
	if ev.Type != axocoatl.EventModelResult || p["ok"] != false || p["finish_reason"] != axocoatl.FinishError ||
		p["error"] != "provider said no" || p["agent_id"] != "broken" {
		t.Fatalf("failed call: %s %v", ev.Type, p)
	}
	if ev, _ := next(t, events); ev.Type != axocoatl.EventAgentFailed {
		t.Fatalf("after the failed call: %s", ev.Type)
	}
}
