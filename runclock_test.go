package axocoatl_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
)

// waitTool is a tool that waits d, pausing the run's clock while it waits
// when pause is set (as an approval gate does).
func waitTool(d time.Duration, pause bool) axocoatl.Tool {
	return axocoatl.Tool{Name: "wait", Call: func(ctx context.Context, _ axocoatl.ToolCall) (axocoatl.ToolResult, error) {
		if pause {
			resume := axocoatl.PauseRunClock(ctx)
			defer resume()
			defer resume() // resuming twice is harmless
		}
		select {
		case <-time.After(d):
			return axocoatl.ToolResult{Content: "waited"}, nil
		case <-ctx.Done():
			return axocoatl.ToolResult{}, ctx.Err()
		}
	}}
}

// A tool that pauses the run's clock may wait longer than the agent's
// timeout; one that does not is cut by it.
func TestPauseRunClock(t *testing.T) {
	for _, pause := range []bool{true, false} {
		e := newEngine(t)
		must(t, e.RegisterTool(waitTool(400*time.Millisecond, pause)))
		m := &scriptModel{turns: []agent.Response{{ToolCalls: []agent.ToolCall{call("1", "wait", `{}`)}}}}
		must(t, e.AddAgent(agent.Spec{ID: "a", Timeout: 150 * time.Millisecond}, m))
		res, err := e.Execute(context.Background(), "a", "go")
		if pause && (err != nil || res.Output != "done") {
			t.Fatalf("paused: %v, %+v; want the run to finish", err, res)
		}
		if !pause && (!errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "timed out after 150ms")) {
			t.Fatalf("not paused: err = %v, want the run's timeout", err)
		}
	}
}

// Paused time is not counted, running time is: a run whose model blocks
// after a paused wait still ends at its timeout, counted without the pause.
func TestRunClockCountsOnlyRunningTime(t *testing.T) {
	e := newEngine(t)
	must(t, e.RegisterTool(waitTool(300*time.Millisecond, true)))
	m := &blockAfter{scriptModel: scriptModel{turns: []agent.Response{{ToolCalls: []agent.ToolCall{call("1", "wait", `{}`)}}}}}
	must(t, e.AddAgent(agent.Spec{ID: "a", Timeout: 200 * time.Millisecond}, m))
	start := time.Now()
	_, err := e.Execute(context.Background(), "a", "go")
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the run's timeout", err)
	}
	// 300 ms paused + 200 ms running.
	if took < 480*time.Millisecond || took > 3*time.Second {
		t.Fatalf("run took %v, want about 500ms", took)
	}
}

// Concurrent pauses of one run nest: the clock runs again only when the
// last one resumes.
func TestRunClockNestedPauses(t *testing.T) {
	e := newEngine(t)
	var mu sync.Mutex
	var order []string
	short := axocoatl.Tool{Name: "short", Call: func(ctx context.Context, _ axocoatl.ToolCall) (axocoatl.ToolResult, error) {
		resume := axocoatl.PauseRunClock(ctx)
		time.Sleep(20 * time.Millisecond)
		resume()
		mu.Lock()
		order = append(order, "short")
		mu.Unlock()
		return axocoatl.ToolResult{Content: "ok"}, nil
	}}
	must(t, e.RegisterTool(short))
	must(t, e.RegisterTool(waitTool(400*time.Millisecond, true)))
	m := &scriptModel{turns: []agent.Response{{ToolCalls: []agent.ToolCall{call("1", "short", `{}`), call("2", "wait", `{}`)}}}}
	must(t, e.AddAgent(agent.Spec{ID: "a", Timeout: 150 * time.Millisecond}, m))
	if _, err := e.Execute(context.Background(), "a", "go"); err != nil {
		t.Fatalf("err = %v; the long pause must hold the clock after the short one resumed", err)
	}
}

// Outside a run, PauseRunClock does nothing; the caller's own deadline is
// never paused.
func TestPauseRunClockOutsideARunAndCallerDeadline(t *testing.T) {
	axocoatl.PauseRunClock(context.Background())()
	e := newEngine(t)
	must(t, e.RegisterTool(waitTool(time.Second, true)))
	m := &scriptModel{turns: []agent.Response{{ToolCalls: []agent.ToolCall{call("1", "wait", `{}`)}}}}
	must(t, e.AddAgent(agent.Spec{ID: "a", Timeout: time.Minute}, m))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := e.Execute(ctx, "a", "go")
	if err == nil || time.Since(start) > 900*time.Millisecond {
		t.Fatalf("err = %v after %v, want the caller's deadline to end the run", err, time.Since(start))
	}
}

func TestUserPrompterContext(t *testing.T) {
	if axocoatl.UserPrompterFrom(context.Background()) != nil {
		t.Fatal("prompter in a bare context")
	}
	p := axocoatl.UserPrompterFunc(func(context.Context, axocoatl.UserPrompt) (axocoatl.UserAnswer, error) {
		return axocoatl.UserAnswer{Accepted: true, By: "test"}, nil
	})
	e := newEngine(t)
	got := make(chan axocoatl.UserPrompter, 1)
	must(t, e.RegisterTool(axocoatl.Tool{Name: "t", Call: func(ctx context.Context, _ axocoatl.ToolCall) (axocoatl.ToolResult, error) {
		got <- axocoatl.UserPrompterFrom(ctx)
		return axocoatl.ToolResult{Content: "ok"}, nil
	}}))
	m := &scriptModel{turns: []agent.Response{{ToolCalls: []agent.ToolCall{call("1", "t", `{}`)}}}}
	must(t, e.AddAgent(agent.Spec{ID: "a"}, m))
	if _, err := e.Execute(axocoatl.WithUserPrompter(context.Background(), p), "a", "go"); err != nil {
		t.Fatal(err)
	}
	a, err := (<-got).PromptUser(context.Background(), axocoatl.UserPrompt{Message: "ok?"})
	if err != nil || !a.Accepted || a.By != "test" {
		t.Fatalf("the tool did not see the door's prompter: %+v %v", a, err)
	}
}

// blockAfter plays its script, then blocks until ctx ends.
type blockAfter struct{ scriptModel }

func (m *blockAfter) Generate(ctx context.Context, req *agent.Request) (*agent.Response, error) {
	m.mu.Lock()
	empty := len(m.turns) == 0
	m.mu.Unlock()
	if empty {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return m.scriptModel.Generate(ctx, req)
}
