package axocoatl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/lattice"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newEngine(t *testing.T) *axocoatl.Engine {
	t.Helper()
	e := axocoatl.New(axocoatl.Options{})
	t.Cleanup(func() {
		if err := e.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return e
}

func subscribe(t *testing.T, e *axocoatl.Engine, types ...string) lattice.Subscription {
	t.Helper()
	s, err := e.Bus().Subscribe(lattice.Filter{Types: types}, 1024)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func next(t *testing.T, s lattice.Subscription) (lattice.Event, map[string]any) {
	t.Helper()
	select {
	case ev := <-s.Events():
		var p map[string]any
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			t.Fatalf("payload of %s: %v", ev.Type, err)
		}
		return ev, p
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
	}
	panic("unreachable")
}

func TestExecuteEcho(t *testing.T) {
	e := newEngine(t)
	if err := e.AddAgent(agent.Spec{ID: "assistant"}, provider.EchoModel{}); err != nil {
		t.Fatal(err)
	}
	events := subscribe(t, e)
	res, err := e.Execute(context.Background(), "assistant", "hello there")
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != "hello there" || res.TaskID == "" || res.AgentID != "assistant" {
		t.Fatalf("result %+v", res)
	}
	ev, p := next(t, events)
	if ev.Type != axocoatl.EventAgentActivated || p["task_id"] != res.TaskID || p["source"] != "library" || p["agent_id"] != "assistant" {
		t.Fatalf("first event %s %v", ev.Type, p)
	}
	// The model call, recorded without its text.
	ev, p = next(t, events)
	if ev.Type != axocoatl.EventModelResult || p["task_id"] != res.TaskID || p["call"] != 1.0 || p["ok"] != true ||
		p["finish_reason"] != axocoatl.FinishStop || ev.Class != lattice.ClassTelemetry {
		t.Fatalf("second event %s %v", ev.Type, p)
	}
	if u, _ := p["usage"].(map[string]any); u["input_tokens"] != 2.0 || u["output_tokens"] != 2.0 || strings.Contains(string(ev.Payload), "hello") {
		t.Fatalf("ModelResult payload %s", ev.Payload)
	}
	ev, p = next(t, events)
	if ev.Type != axocoatl.EventTaskCompleted || p["output"] != "hello there" || p["task_id"] != res.TaskID {
		t.Fatalf("third event %s %v", ev.Type, p)
	}
	if _, ok := p["duration_ms"]; !ok {
		t.Fatalf("TaskCompleted lacks duration_ms: %v", p)
	}

	_, err = e.Execute(context.Background(), "nobody", "x")
	if !errors.Is(err, axocoatl.ErrAgentNotFound) {
		t.Fatalf("unknown agent: %v, want ErrAgentNotFound", err)
	}
	if err := e.AddAgent(agent.Spec{ID: "assistant"}, provider.EchoModel{}); !errors.Is(err, axocoatl.ErrAgentExists) {
		t.Fatalf("duplicate agent: %v", err)
	}
	if err := e.AddAgent(agent.Spec{ID: "Bad Id"}, provider.EchoModel{}); err == nil {
		t.Fatal("invalid id accepted")
	}
}

// scriptModel is an agent.Model that plays a fixed script of turns and
// records every request it got.
type scriptModel struct {
	mu    sync.Mutex
	turns []agent.Response
	reqs  []agent.Request
}

func (m *scriptModel) Generate(ctx context.Context, req *agent.Request) (*agent.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := *req
	r.Messages = append([]agent.Message(nil), req.Messages...)
	m.reqs = append(m.reqs, r)
	if len(m.turns) == 0 {
		return &agent.Response{Content: "done"}, nil
	}
	t := m.turns[0]
	m.turns = m.turns[1:]
	return &t, nil
}

func call(id, name, args string) agent.ToolCall {
	return agent.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
}

func TestToolsAllowListErrorsAndConcurrency(t *testing.T) {
	e := newEngine(t)
	var inFlight, peak atomic.Int32
	// The two reads wait for each other: run side by side they meet at
	// once; one after the other, the first waits out the bound alone and
	// the peak stays 1 (a clock on the turn failed on a loaded machine).
	both := make(chan struct{})
	var met sync.Once
	slowTool := func(ctx context.Context, c axocoatl.ToolCall) (axocoatl.ToolResult, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		if n >= 2 {
			met.Do(func() { close(both) })
		}
		select {
		case <-both:
		case <-time.After(10 * time.Second): // a failure bound
		}
		return axocoatl.ToolResult{Content: "slept:" + string(c.Arguments)}, nil
	}
	must(t, e.RegisterTool(axocoatl.Tool{Name: "mcp__fs__read", Server: "fs", Call: slowTool}))
	must(t, e.RegisterTool(axocoatl.Tool{Name: "mcp__fs__fail", Server: "fs", Call: func(context.Context, axocoatl.ToolCall) (axocoatl.ToolResult, error) {
		return axocoatl.ToolResult{}, errors.New("disk on fire")
	}}))
	must(t, e.RegisterTool(axocoatl.Tool{Name: "mcp__secret__get", Call: slowTool}))

	model := &scriptModel{turns: []agent.Response{
		{ToolCalls: []agent.ToolCall{
			call("1", "mcp__fs__read", `{"p":1}`),
			call("2", "mcp__fs__read", `{"p":2}`),
			call("3", "mcp__fs__fail", `{}`),
			call("4", "mcp__secret__get", `{}`),
			call("5", "no_such_tool", `{}`),
		}},
		{Content: "final answer"},
	}}
	must(t, e.AddAgent(agent.Spec{ID: "reader", Tools: []string{"mcp__fs__*"}}, model))
	events := subscribe(t, e, "Tool*")

	res, err := e.Execute(context.Background(), "reader", "go")
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != "final answer" {
		t.Fatalf("output %q", res.Output)
	}
	if peak.Load() < 2 {
		t.Fatalf("tool calls of one turn did not run concurrently (peak %d)", peak.Load())
	}
	// The model was offered only the allowed tools...
	var offered []string
	for _, d := range model.reqs[0].Tools {
		offered = append(offered, d.Name)
	}
	if strings.Join(offered, ",") != "mcp__fs__fail,mcp__fs__read" {
		t.Fatalf("offered tools %v", offered)
	}
	// ...and heard back about every call, failures as errors.
	results := map[string]agent.Message{}
	for _, m := range model.reqs[1].Messages {
		if m.Role == agent.RoleTool {
			results[m.ToolCallID] = m
		}
	}
	want := map[string]struct {
		isErr bool
		text  string
	}{
		"1": {false, `slept:{"p":1}`},
		"2": {false, `slept:{"p":2}`},
		"3": {true, "disk on fire"},
		"4": {true, "not allowed"},
		"5": {true, "not allowed"}, // outside the allow-list before it is unknown
	}
	for id, w := range want {
		got, ok := results[id]
		if !ok || got.IsError != w.isErr || !strings.Contains(got.Content, w.text) {
			t.Errorf("tool result %s = %+v, want error=%v containing %q", id, got, w.isErr, w.text)
		}
	}
	// ToolCalled/ToolResult events for the three calls that reached a tool.
	var failed, ok int
	for range 6 {
		ev, p := next(t, events)
		if ev.Type == axocoatl.EventToolResult {
			if p["ok"] == true {
				ok++
			} else if strings.Contains(p["error"].(string), "disk on fire") {
				failed++
			}
		}
	}
	if ok != 2 || failed != 1 {
		t.Fatalf("ToolResult events: %d ok, %d failed", ok, failed)
	}
}

// Guards: bound agents[].max_iterations (docs/bounds.md).
func TestMaxIterations(t *testing.T) {
	e := newEngine(t)
	must(t, e.RegisterTool(axocoatl.Tool{Name: "loop", Call: func(context.Context, axocoatl.ToolCall) (axocoatl.ToolResult, error) {
		return axocoatl.ToolResult{Content: "again"}, nil
	}}))
	var turns []agent.Response
	for i := range 10 {
		turns = append(turns, agent.Response{ToolCalls: []agent.ToolCall{call(string(rune('a'+i)), "loop", `{}`)}})
	}
	model := &scriptModel{turns: turns}
	must(t, e.AddAgent(agent.Spec{ID: "looper", MaxIterations: 3}, model))
	failed := subscribe(t, e, axocoatl.EventAgentFailed)
	_, err := e.Execute(context.Background(), "looper", "x")
	if !errors.Is(err, agent.ErrMaxIterations) {
		t.Fatalf("err = %v, want ErrMaxIterations", err)
	}
	if len(model.reqs) != 3 {
		t.Fatalf("model called %d times, want 3", len(model.reqs))
	}
	_, p := next(t, failed)
	if !strings.Contains(p["error"].(string), "max_iterations") {
		t.Fatalf("AgentFailed payload %v", p)
	}
}

// blockingModel waits until its context ends.
type blockingModel struct{ started chan struct{} }

func (m blockingModel) Generate(ctx context.Context, _ *agent.Request) (*agent.Response, error) {
	close(m.started)
	<-ctx.Done()
	return nil, ctx.Err()
}

// Guards: bound agents[].timeout (docs/bounds.md).
func TestTimeoutAndCloseCancelRuns(t *testing.T) {
	e := newEngine(t)
	must(t, e.AddAgent(agent.Spec{ID: "slow", Timeout: 50 * time.Millisecond}, blockingModel{make(chan struct{})}))
	_, err := e.Execute(context.Background(), "slow", "x")
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("err = %v, want a timeout", err)
	}

	e2 := axocoatl.New(axocoatl.Options{})
	m := blockingModel{make(chan struct{})}
	must(t, e2.AddAgent(agent.Spec{ID: "hang"}, m))
	errc := make(chan error, 1)
	go func() { _, err := e2.Execute(context.Background(), "hang", "x"); errc <- err }()
	<-m.started
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := e2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, axocoatl.ErrClosed) {
		t.Fatalf("in-flight run ended with %v, want ErrClosed", err)
	}
	if _, err := e2.Execute(context.Background(), "hang", "x"); !errors.Is(err, axocoatl.ErrClosed) {
		t.Fatalf("Execute after Close = %v", err)
	}
}

func TestInterceptorChainOrderAndRefusal(t *testing.T) {
	e := newEngine(t)
	var order []string
	var mu sync.Mutex
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	e.Intercept(func(ctx context.Context, c axocoatl.ToolCall, next axocoatl.ToolFunc) (axocoatl.ToolResult, error) {
		note("outer:" + c.Server)
		return next(ctx, c)
	})
	e.Intercept(func(ctx context.Context, c axocoatl.ToolCall, next axocoatl.ToolFunc) (axocoatl.ToolResult, error) {
		note("inner")
		if strings.HasSuffix(c.Tool, "rm") {
			return axocoatl.ToolResult{}, errors.New("denied by a human")
		}
		return next(ctx, c)
	})
	must(t, e.RegisterTool(axocoatl.Tool{Name: "mcp__fs__ls", Server: "fs", Call: func(context.Context, axocoatl.ToolCall) (axocoatl.ToolResult, error) {
		note("tool")
		return axocoatl.ToolResult{Content: "a b"}, nil
	}}))
	must(t, e.RegisterTool(axocoatl.Tool{Name: "mcp__fs__rm", Server: "fs", Call: func(context.Context, axocoatl.ToolCall) (axocoatl.ToolResult, error) {
		t.Error("refused tool ran")
		return axocoatl.ToolResult{}, nil
	}}))
	res, err := e.CallTool(context.Background(), axocoatl.ToolCall{Tool: "mcp__fs__ls"})
	if err != nil || res.Content != "a b" {
		t.Fatalf("ls: %+v %v", res, err)
	}
	if strings.Join(order, ",") != "outer:fs,inner,tool" {
		t.Fatalf("order %v", order)
	}
	if _, err := e.CallTool(context.Background(), axocoatl.ToolCall{Tool: "mcp__fs__rm"}); err == nil || !strings.Contains(err.Error(), "denied by a human") {
		t.Fatalf("rm: %v", err)
	}
	if !e.UnregisterTool("mcp__fs__ls") || e.UnregisterTool("mcp__fs__ls") {
		t.Fatal("UnregisterTool")
	}
	if _, err := e.CallTool(context.Background(), axocoatl.ToolCall{Tool: "mcp__fs__ls"}); !errors.Is(err, axocoatl.ErrToolNotFound) {
		t.Fatalf("removed tool: %v", err)
	}
}

// recordModule checks the Module lifecycle and that Stop runs after in-flight runs.
type recordModule struct{ started, stopped atomic.Bool }

func (m *recordModule) Name() string { return "record" }
func (m *recordModule) Start(_ context.Context, e *axocoatl.Engine) error {
	m.started.Store(true)
	return e.RegisterTool(axocoatl.Tool{Name: "from_module", Call: func(context.Context, axocoatl.ToolCall) (axocoatl.ToolResult, error) {
		return axocoatl.ToolResult{Content: "ok"}, nil
	}})
}
func (m *recordModule) Stop(context.Context) error { m.stopped.Store(true); return nil }

func TestModuleLifecycle(t *testing.T) {
	e := axocoatl.New(axocoatl.Options{})
	m := &recordModule{}
	must(t, e.Use(context.Background(), m))
	if !m.started.Load() || len(e.Tools()) != 1 {
		t.Fatal("module not started")
	}
	must(t, e.Close(context.Background()))
	if !m.stopped.Load() {
		t.Fatal("module not stopped")
	}
	if err := e.Use(context.Background(), &recordModule{}); !errors.Is(err, axocoatl.ErrClosed) {
		t.Fatalf("Use after Close: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func BenchmarkExecuteEcho(b *testing.B) {
	e := axocoatl.New(axocoatl.Options{})
	defer e.Close(context.Background())
	if err := e.AddAgent(agent.Spec{ID: "assistant"}, provider.EchoModel{}); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Execute(ctx, "assistant", "hello"); err != nil {
			b.Fatal(err)
		}
	}
}

// The registry keeps its own copy of an agent's allow-list: neither the
// slice passed to AddAgent nor one returned by Agents can widen it later.
func TestAllowListIsCopied(t *testing.T) {
	e := newEngine(t)
	must(t, e.RegisterTool(axocoatl.Tool{Name: "mcp__secret__read", Call: func(context.Context, axocoatl.ToolCall) (axocoatl.ToolResult, error) {
		return axocoatl.ToolResult{Content: "secret"}, nil
	}}))
	tools := []string{"mcp__fs__*"}
	must(t, e.AddAgent(agent.Spec{ID: "a", Tools: tools}, provider.EchoModel{}))
	tools[0] = "*"
	e.Agents()[0].Tools[0] = "*"
	info, _ := e.Agent("a")
	info.Tools[0] = "*"
	if _, err := e.CallTool(context.Background(), axocoatl.ToolCall{AgentID: "a", Tool: "mcp__secret__read"}); !errors.Is(err, axocoatl.ErrToolDenied) {
		t.Fatalf("allow-list widened from outside: %v", err)
	}
}

// slowStartModule blocks in Start until released, so Close can run meanwhile.
type slowStartModule struct {
	recordModule
	release chan struct{}
}

func (m *slowStartModule) Start(context.Context, *axocoatl.Engine) error {
	<-m.release
	m.started.Store(true)
	return nil
}

// A module whose Start overlaps Engine.Close is stopped, not leaked.
func TestUseRacingClose(t *testing.T) {
	e := axocoatl.New(axocoatl.Options{})
	m := &slowStartModule{release: make(chan struct{})}
	errc := make(chan error, 1)
	go func() { errc <- e.Use(context.Background(), m) }()
	time.Sleep(20 * time.Millisecond) // Use is inside Start
	must(t, e.Close(context.Background()))
	close(m.release)
	if err := <-errc; !errors.Is(err, axocoatl.ErrClosed) {
		t.Fatalf("Use during Close = %v, want ErrClosed", err)
	}
	if !m.started.Load() || !m.stopped.Load() {
		t.Fatalf("module started=%v stopped=%v: a started module must be stopped", m.started.Load(), m.stopped.Load())
	}
}

// The two events of a tool call share one payload buffer: each must be
// exactly its own JSON, untouched by the other, also when a long error
// outgrows the buffer and when the caller's context is already done.
func TestToolCallEventPayloads(t *testing.T) {
	e := newEngine(t)
	long := strings.Repeat("disk on fire <&> ", 64)
	must(t, e.RegisterTool(axocoatl.Tool{Name: "ok", Call: func(context.Context, axocoatl.ToolCall) (axocoatl.ToolResult, error) {
		return axocoatl.ToolResult{Content: "fine"}, nil
	}}))
	must(t, e.RegisterTool(axocoatl.Tool{Name: "bad", Call: func(context.Context, axocoatl.ToolCall) (axocoatl.ToolResult, error) {
		return axocoatl.ToolResult{}, errors.New(long)
	}}))
	events := subscribe(t, e, "Tool*")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		ctx  context.Context
		tool string
		err  string
	}{
		{context.Background(), "ok", ""},
		{context.Background(), "bad", long},
		{cancelled, "ok", ""},
	} {
		_, _ = e.CallTool(c.ctx, axocoatl.ToolCall{TaskID: "task-1", Tool: c.tool})
		calledEv, _ := next(t, events)
		resultEv, result := next(t, events)
		want, _ := json.Marshal(map[string]string{"agent_id": "", "task_id": "task-1", "tool": c.tool})
		if calledEv.Type != axocoatl.EventToolCalled || string(calledEv.Payload) != string(want) {
			t.Fatalf("%s: ToolCalled %s payload %s, want %s", c.tool, calledEv.Type, calledEv.Payload, want)
		}
		if resultEv.Type != axocoatl.EventToolResult || result["tool"] != c.tool || result["ok"] != (c.err == "") {
			t.Fatalf("%s: ToolResult %s payload %s", c.tool, resultEv.Type, resultEv.Payload)
		}
		if c.err != "" && result["error"] != c.err {
			t.Fatalf("%s: error in payload %q", c.tool, result["error"])
		}
	}
}

// A client's cancel is not the agent failing: AgentFailed says canceled,
// and the log line is at info, not a warning; a timeout stays a failure.
func TestCancelIsNotAFailure(t *testing.T) {
	var logs bytes.Buffer
	e := axocoatl.New(axocoatl.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer e.Close(context.Background())
	m := blockingModel{make(chan struct{})}
	must(t, e.AddAgent(agent.Spec{ID: "hang"}, m))
	must(t, e.AddAgent(agent.Spec{ID: "slow", Timeout: 20 * time.Millisecond}, blockingModel{make(chan struct{})}))
	sub := subscribe(t, e, axocoatl.EventAgentFailed)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-m.started; cancel() }()
	if _, err := e.Execute(ctx, "hang", "x"); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if _, p := next(t, sub); p["canceled"] != true {
		t.Errorf("AgentFailed payload %v, want canceled: true", p)
	}
	e.Execute(context.Background(), "slow", "x")
	if _, p := next(t, sub); p["canceled"] != nil {
		t.Errorf("timeout payload %v says canceled", p)
	}
	if out := logs.String(); !strings.Contains(out, "level=INFO msg=\"task canceled\"") || strings.Count(out, "level=WARN") != 1 {
		t.Errorf("logs:\n%s", out)
	}
}

// gatedModel answers "done" once release is closed, saying on started
// that a run began.
type gatedModel struct{ started, release chan struct{} }

func (m gatedModel) Generate(ctx context.Context, _ *agent.Request) (*agent.Response, error) {
	m.started <- struct{}{}
	select {
	case <-m.release:
		return &agent.Response{Content: "done"}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Past MaxRuns tasks in flight a new one is refused at once with ErrBusy
// (and publishes nothing); once a run ends there is room again.
//
// Guards: bound server.max_concurrent_runs (docs/bounds.md).
func TestMaxRunsRefusesBeyond(t *testing.T) {
	e := axocoatl.New(axocoatl.Options{MaxRuns: 2})
	t.Cleanup(func() { e.Close(context.Background()) })
	m := gatedModel{started: make(chan struct{}, 3), release: make(chan struct{})}
	must(t, e.AddAgent(agent.Spec{ID: "gated"}, m))
	errc := make(chan error, 2)
	for range 2 {
		go func() { _, err := e.Execute(context.Background(), "gated", "x"); errc <- err }()
		<-m.started
	}
	sub, err := e.Bus().Subscribe(lattice.Filter{}, 8)
	must(t, err)
	defer sub.Close()
	start := time.Now()
	_, err = e.Execute(context.Background(), "gated", "x")
	if !errors.Is(err, axocoatl.ErrBusy) || !strings.Contains(err.Error(), "2 tasks in flight") {
		t.Fatalf("third run: err = %v, want ErrBusy naming the limit", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("refusal took %s, want at once", d)
	}
	select {
	case ev := <-sub.Events():
		t.Fatalf("a refused task published %s", ev.Type)
	case <-time.After(20 * time.Millisecond):
	}
	close(m.release)
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if res, err := e.Execute(context.Background(), "gated", "x"); err != nil || res.Output != "done" {
		t.Fatalf("after the runs ended: %q, %v", res.Output, err)
	}
}

// panicModel panics on every call, as a provider with a bug would.
type panicModel struct{}

func (panicModel) Generate(_ context.Context, req *agent.Request) (*agent.Response, error) {
	return &agent.Response{Content: req.Messages[len(req.Messages)+1].Content}, nil // index out of range
}

// A tool or an interceptor that panics is a failed call (the model is
// told, the run goes on); a model that panics is a failed run. The process
// (this test) survives both, and the next run works.
func TestPanicsAreContained(t *testing.T) {
	e := newEngine(t)
	must(t, e.RegisterTool(axocoatl.Tool{Name: "mcp__x__boom", Server: "x", Call: func(context.Context, axocoatl.ToolCall) (axocoatl.ToolResult, error) {
		panic("tool bug")
	}}))
	m := &scriptModel{turns: []agent.Response{{ToolCalls: []agent.ToolCall{call("1", "mcp__x__boom", `{}`)}}, {Content: "survived"}}}
	must(t, e.AddAgent(agent.Spec{ID: "caller"}, m))
	res, err := e.Execute(context.Background(), "caller", "go")
	if err != nil || res.Output != "survived" {
		t.Fatalf("run with a panicking tool: %q, %v", res.Output, err)
	}
	if last := m.reqs[len(m.reqs)-1].Messages; !strings.Contains(last[len(last)-1].Content, "tool panicked") {
		t.Fatalf("the model was told %q, want the tool panicked", last[len(last)-1].Content)
	}
	remove := e.Intercept(func(context.Context, axocoatl.ToolCall, axocoatl.ToolFunc) (axocoatl.ToolResult, error) {
		panic("interceptor bug")
	})
	if _, err := e.CallTool(context.Background(), axocoatl.ToolCall{Tool: "mcp__x__boom"}); !errors.Is(err, axocoatl.ErrToolPanicked) {
		t.Fatalf("panicking interceptor: %v, want ErrToolPanicked", err)
	}
	remove()

	must(t, e.AddAgent(agent.Spec{ID: "broken"}, panicModel{}))
	if _, err := e.Execute(context.Background(), "broken", "go"); !errors.Is(err, axocoatl.ErrModelPanicked) {
		t.Fatalf("panicking model: %v, want ErrModelPanicked", err)
	}
	if res, err := e.Execute(context.Background(), "caller", "again"); err != nil || res.Output != "done" {
		t.Fatalf("a run after the panics: %q, %v", res.Output, err)
	}
}

// One run per task id at a time: a request naming the id of a running
// task is refused with ErrTaskExists and publishes nothing; the id is free
// again once that run ended, and after a request that failed before its
// run began (an invalid conversation id).
func TestTaskIDInUse(t *testing.T) {
	e := newEngine(t)
	m := gatedModel{started: make(chan struct{}, 2), release: make(chan struct{})}
	if err := e.AddAgent(agent.Spec{ID: "a"}, m); err != nil {
		t.Fatal(err)
	}
	if err := e.AddAgent(agent.Spec{ID: "echo"}, provider.EchoModel{}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first := make(chan error, 1)
	go func() {
		_, err := e.ExecuteRequest(ctx, axocoatl.Request{AgentID: "a", Input: "x", TaskID: "t1"})
		first <- err
	}()
	<-m.started
	sub := subscribe(t, e, axocoatl.EventAgentActivated)
	defer sub.Close()
	res, err := e.ExecuteRequest(ctx, axocoatl.Request{AgentID: "echo", Input: "intrude", TaskID: "t1"})
	if !errors.Is(err, axocoatl.ErrTaskExists) || res.TaskID != "t1" || res.Output != "" {
		t.Fatalf("a second run under a running id: %+v %v, want ErrTaskExists", res, err)
	}
	select {
	case ev := <-sub.Events():
		t.Fatalf("the refused request published %s", ev.Type)
	case <-time.After(50 * time.Millisecond):
	}
	close(m.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if _, err := e.ExecuteRequest(ctx, axocoatl.Request{AgentID: "echo", Input: "x", TaskID: "t1", ConversationID: "not a valid id"}); err == nil {
		t.Fatal("an invalid conversation id was taken")
	}
	if res, err := e.ExecuteRequest(ctx, axocoatl.Request{AgentID: "echo", Input: "again", TaskID: "t1"}); err != nil || res.Output != "again" {
		t.Fatalf("the id once free: %+v %v", res, err)
	}
}
