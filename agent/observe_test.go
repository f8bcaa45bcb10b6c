package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/agent"
)

// scripted streams one scripted answer per call, word by word, and counts
// which method the run used.
type scripted struct {
	answers         []agent.Response
	calls           atomic.Int32
	generate, strms atomic.Int32
}

func (s *scripted) next() agent.Response {
	i := int(s.calls.Add(1)) - 1
	return s.answers[min(i, len(s.answers)-1)]
}

func (s *scripted) Generate(context.Context, *agent.Request) (*agent.Response, error) {
	s.generate.Add(1)
	r := s.next()
	return &r, nil
}

func (s *scripted) GenerateStream(_ context.Context, _ *agent.Request, emit func(agent.Delta)) (*agent.Response, error) {
	s.strms.Add(1)
	r := s.next()
	for _, w := range strings.SplitAfter(r.Content, " ") {
		if w != "" {
			emit(agent.Delta{Kind: agent.DeltaText, Text: w})
		}
	}
	for i, tc := range r.ToolCalls {
		emit(agent.Delta{Kind: agent.DeltaToolCall, ToolCallIndex: i, ToolCallID: tc.ID, ToolName: tc.Name})
		emit(agent.Delta{Kind: agent.DeltaToolArguments, ToolCallIndex: i, Arguments: string(tc.Arguments)})
	}
	return &r, nil
}

// sleepyBox runs tool "t" for 2ms and fails calls whose id starts with "bad".
type sleepyBox struct{}

func (sleepyBox) Tools() []agent.ToolDef { return []agent.ToolDef{{Name: "t"}} }
func (sleepyBox) Call(ctx context.Context, c agent.ToolCall) agent.ToolResult {
	select {
	case <-time.After(2 * time.Millisecond):
	case <-ctx.Done():
	}
	return agent.ToolResult{Content: "ok", IsError: strings.HasPrefix(c.ID, "bad")}
}

func twoTurns() *scripted {
	return &scripted{answers: []agent.Response{
		{Content: "let me look ", ToolCalls: []agent.ToolCall{
			{ID: "good1", Name: "t", Arguments: json.RawMessage(`{"a":1}`)},
			{ID: "bad2", Name: "t", Arguments: json.RawMessage(`{}`)},
		}, Usage: agent.Usage{InputTokens: 10, OutputTokens: 2, CachedInputTokens: 4}},
		{Content: "the answer is here", Usage: agent.Usage{InputTokens: 20, OutputTokens: 3}},
	}}
}

func TestRunObservedReportsTheRun(t *testing.T) {
	m := twoTurns()
	var mu sync.Mutex // tool events come from the workers, concurrently
	var events []agent.RunEvent
	turn, err := agent.RunObserved(context.Background(), agent.Spec{ID: "a"}, m, sleepyBox{}, nil, "hi", func(ev agent.RunEvent) {
		mu.Lock()
		events = append(events, ev)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	if m.strms.Load() != 2 || m.generate.Load() != 0 {
		t.Fatalf("GenerateStream called %d times, Generate %d: an observed run streams", m.strms.Load(), m.generate.Load())
	}
	var text strings.Builder
	var usages []agent.Usage
	started, finished := map[string]bool{}, map[string]agent.RunEvent{}
	for _, ev := range events {
		switch ev.Kind {
		case agent.RunDelta:
			if ev.Delta.Kind == agent.DeltaText {
				text.WriteString(ev.Delta.Text)
			}
		case agent.RunToolStarted:
			started[ev.ToolCallID] = true
		case agent.RunToolFinished:
			if !started[ev.ToolCallID] {
				t.Fatalf("%s finished before it started", ev.ToolCallID)
			}
			finished[ev.ToolCallID] = ev
		case agent.RunModelUsage:
			usages = append(usages, ev.Usage)
		}
	}
	if got, want := text.String(), "let me look the answer is here"; got != want {
		t.Fatalf("text %q, want %q", got, want)
	}
	if len(finished) != 2 || finished["good1"].IsError || !finished["bad2"].IsError || finished["good1"].ToolName != "t" {
		t.Fatalf("tool events %+v", finished)
	}
	if d := finished["good1"].Duration; d < 2*time.Millisecond {
		t.Fatalf("duration %v, the call took at least 2ms", d)
	}
	if len(usages) != 2 || usages[0].CachedInputTokens != 4 || usages[1].InputTokens != 20 {
		t.Fatalf("usages %+v", usages)
	}
	if want := (agent.Usage{InputTokens: 30, OutputTokens: 5, CachedInputTokens: 4}); turn.Usage != want {
		t.Fatalf("turn usage %+v, want %+v", turn.Usage, want)
	}
	if turn.Output != "the answer is here" {
		t.Fatalf("output %q", turn.Output)
	}
}

func TestRunWithoutObserverDoesNotStream(t *testing.T) {
	m := twoTurns()
	turn, err := agent.RunWithHistory(context.Background(), agent.Spec{ID: "a"}, m, sleepyBox{}, nil, "hi")
	if err != nil {
		t.Fatal(err)
	}
	if m.generate.Load() != 2 || m.strms.Load() != 0 {
		t.Fatalf("Generate %d, GenerateStream %d", m.generate.Load(), m.strms.Load())
	}
	if turn.Usage.Total() != 35 {
		t.Fatalf("usage %+v", turn.Usage)
	}
}

// Guards: agents[].max_tokens_per_run.
func TestMaxTokensPerRun(t *testing.T) {
	for _, tc := range []struct {
		limit   int64
		wantErr bool
	}{{0, false}, {35, false}, {34, true}, {11, true}} {
		turn, err := agent.Run(context.Background(), agent.Spec{ID: "a", MaxTokensPerRun: tc.limit}, twoTurns(), sleepyBox{}, "hi")
		if !tc.wantErr {
			if err != nil || turn != "the answer is here" {
				t.Fatalf("limit %d: %q, %v", tc.limit, turn, err)
			}
			continue
		}
		if !errors.Is(err, agent.ErrMaxTokensPerRun) {
			t.Fatalf("limit %d: err %v, want ErrMaxTokensPerRun", tc.limit, err)
		}
		if !strings.Contains(err.Error(), "max_tokens_per_run is ") || turn != "" {
			t.Fatalf("limit %d: %q, %v", tc.limit, turn, err)
		}
	}
	tr, err := agent.RunWithHistory(context.Background(), agent.Spec{ID: "a", MaxTokensPerRun: 34}, twoTurns(), sleepyBox{}, nil, "hi")
	if want := "agent: max_tokens_per_run crossed: the run used 35 tokens (30 input, 5 output) in 2 model calls; max_tokens_per_run is 34"; err == nil || err.Error() != want {
		t.Fatalf("err %v, want %s", err, want)
	}
	if tr.Usage.Total() != 35 || len(tr.Messages) != 3 { // the tool turn and its two results; not the crossing answer
		t.Fatalf("turn %+v", tr)
	}
	if err := (agent.Spec{ID: "a", MaxTokensPerRun: -1}).Validate(); err == nil || !strings.Contains(err.Error(), "max_tokens_per_run") {
		t.Fatalf("validate: %v", err)
	}
}
