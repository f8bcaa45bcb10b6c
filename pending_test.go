package axocoatl_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

func offered(req agent.Request) []string {
	var names []string
	for _, d := range req.Tools {
		names = append(names, d.Name)
	}
	return names
}

// A run that starts while a tool source its agent may use is still on its
// first attempt waits for it and is offered its tools; an agent whose
// allow-list cannot match the source does not wait at all.
func TestRunWaitsForPendingTools(t *testing.T) {
	e := newEngine(t)
	all, native := &scriptModel{}, &scriptModel{}
	must(t, e.AddAgent(agent.Spec{ID: "all"}, all))
	must(t, e.AddAgent(agent.Spec{ID: "native", Tools: []string{"native_*", "mcp__fsx__read"}}, native))
	// An hour: a run that waited for it would time the test out.
	ready := e.AddPendingTools(axocoatl.PendingTools{Source: "fs", Prefix: "mcp__fs__", Wait: time.Hour})
	defer ready()

	events := subscribe(t, e, axocoatl.EventAgentActivated)
	if _, err := e.Execute(context.Background(), "native", "hi"); err != nil {
		t.Fatal(err)
	}
	if _, p := next(t, events); p["tools_pending"] != nil {
		t.Fatalf("native's run lists a source it cannot use: %v", p)
	}

	done := make(chan error, 1)
	go func() { _, err := e.Execute(context.Background(), "all", "hi"); done <- err }()
	// The run is counted before it waits; the model is only called after.
	for {
		if info, _ := e.Agent("all"); info.Running == 1 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the run ended (%v) while fs was still pending: it did not wait", err)
		case <-time.After(time.Millisecond):
		}
	}
	must(t, e.RegisterTool(axocoatl.Tool{Name: "mcp__fs__read", Call: func(context.Context, axocoatl.ToolCall) (axocoatl.ToolResult, error) {
		return axocoatl.ToolResult{Content: "x"}, nil
	}}))
	ready()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	all.mu.Lock()
	defer all.mu.Unlock()
	if len(all.reqs) == 0 || !slices.Contains(offered(all.reqs[0]), "mcp__fs__read") {
		t.Fatalf("the model was offered %v, want mcp__fs__read", offered(all.reqs[0]))
	}
	if _, p := next(t, events); p["tools_pending"] != nil {
		t.Fatalf("a source that came lists as pending: %v", p)
	}
}

// A source still pending after its Wait: the run goes on without its tools,
// and the log and the AgentActivated event name it.
func TestRunGoesOnWithoutPendingTools(t *testing.T) {
	logs := &testutil.SyncBuffer{}
	e := axocoatl.New(axocoatl.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	t.Cleanup(func() { must(t, e.Close(context.Background())) })
	m := &scriptModel{}
	must(t, e.AddAgent(agent.Spec{ID: "a", Tools: []string{"mcp__*"}}, m))
	ready := e.AddPendingTools(axocoatl.PendingTools{Source: "slow", Prefix: "mcp__slow__", Wait: 20 * time.Millisecond})
	defer ready()
	readyB := e.AddPendingTools(axocoatl.PendingTools{Source: "also", Prefix: "mcp__also__", Wait: 20 * time.Millisecond})
	defer readyB()
	events := subscribe(t, e, axocoatl.EventAgentActivated)
	res, err := e.Execute(context.Background(), "a", "hi")
	if err != nil || res.Output != "done" {
		t.Fatalf("%+v %v", res, err)
	}
	_, p := next(t, events)
	got, _ := p["tools_pending"].([]any)
	if len(got) != 2 || got[0] != "also" || got[1] != "slow" {
		t.Fatalf("tools_pending %v, want [also slow]", p["tools_pending"])
	}
	if !strings.Contains(logs.String(), "tools_pending=\"[also slow]\"") {
		t.Fatalf("no warning naming the sources: %s", logs.String())
	}
}
