package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/axocoatl/axocoatl-go/agent"
)

func TestUsageAdd(t *testing.T) {
	a := agent.Usage{InputTokens: 100, OutputTokens: 20, CachedInputTokens: 60}
	b := agent.Usage{InputTokens: 7, OutputTokens: 3}
	if got, want := a.Add(b), (agent.Usage{InputTokens: 107, OutputTokens: 23, CachedInputTokens: 60}); got != want {
		t.Fatalf("Add: %+v, want %+v", got, want)
	}
	if got := a.Add(b).Total(); got != 130 {
		t.Fatalf("Total %d, want 130 (cached tokens are part of the input)", got)
	}
	var zero agent.Usage
	if zero.Add(zero) != zero {
		t.Fatal("zero + zero is not zero")
	}
	out, _ := json.Marshal(b)
	if string(out) != `{"input_tokens":7,"output_tokens":3}` {
		t.Fatalf("JSON %s", out)
	}
}

// whole is a model that does not stream (any Go type with Generate is a
// Model): GenerateStream emits its answer once it has it.
type whole struct {
	res *agent.Response
	err error
}

func (w whole) Generate(context.Context, *agent.Request) (*agent.Response, error) {
	return w.res, w.err
}

// streaming streams two pieces.
type streaming struct{ whole }

func (s streaming) GenerateStream(ctx context.Context, req *agent.Request, emit func(agent.Delta)) (*agent.Response, error) {
	emit(agent.Delta{Kind: agent.DeltaText, Text: "a"})
	emit(agent.Delta{Kind: agent.DeltaText, Text: "b"})
	return &agent.Response{Content: "ab"}, nil
}

func TestGenerateStream(t *testing.T) {
	res := &agent.Response{Content: "done", ToolCalls: []agent.ToolCall{
		{ID: "c1", Name: "f", Arguments: json.RawMessage(`{"a":1}`)},
		{ID: "c2", Name: "g"},
	}, Usage: agent.Usage{InputTokens: 1}}
	var got []agent.Delta
	out, err := agent.GenerateStream(context.Background(), whole{res: res}, &agent.Request{}, func(d agent.Delta) { got = append(got, d) })
	if err != nil || out != res {
		t.Fatalf("%+v, %v", out, err)
	}
	want := []agent.Delta{
		{Kind: agent.DeltaText, Text: "done"},
		{Kind: agent.DeltaToolCall, ToolCallIndex: 0, ToolCallID: "c1", ToolName: "f"},
		{Kind: agent.DeltaToolArguments, ToolCallIndex: 0, Arguments: `{"a":1}`},
		{Kind: agent.DeltaToolCall, ToolCallIndex: 1, ToolCallID: "c2", ToolName: "g"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("deltas %+v, want %+v", got, want)
	}

	got = nil
	boom := errors.New("boom")
	if _, err := agent.GenerateStream(context.Background(), whole{err: boom}, &agent.Request{}, func(d agent.Delta) { got = append(got, d) }); !errors.Is(err, boom) || got != nil {
		t.Fatalf("error %v, deltas %v", err, got)
	}

	got = nil
	out, err = agent.GenerateStream(context.Background(), streaming{}, &agent.Request{}, func(d agent.Delta) { got = append(got, d) })
	if err != nil || out.Content != "ab" || len(got) != 2 {
		t.Fatalf("a Streamer was not streamed: %+v, %v, %v", out, err, got)
	}
}
