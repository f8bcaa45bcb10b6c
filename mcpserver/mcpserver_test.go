package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
	"github.com/axocoatl/axocoatl-go/lattice"
	"github.com/axocoatl/axocoatl-go/mcpserver"
)

const wantSchema = testutil.AgentInputSchema

// checkSession runs the acceptance checks any client session must pass:
// the tool list, an echo call, a failing agent, bad arguments, an unknown
// tool, and a ping.
// checkSession runs the acceptance checks on a session that negotiated
// version want.
func checkSession(t *testing.T, cs *mcp.ClientSession, era string) {
	t.Helper()
	ctx := ctxT(t)
	if got := cs.InitializeResult().ProtocolVersion; got != era {
		t.Errorf("negotiated %q, want %s", got, era)
	}
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	byName := map[string]*mcp.Tool{}
	var names []string
	for _, tool := range list.Tools {
		byName[tool.Name] = tool
		names = append(names, tool.Name)
	}
	for _, want := range []string{"agent_echo", "agent_broken", "agent_worker"} {
		if byName[want] == nil {
			t.Fatalf("tools/list = %v, missing %s", names, want)
		}
	}
	var want any
	json.Unmarshal([]byte(wantSchema), &want)
	for _, tool := range list.Tools {
		if !reflect.DeepEqual(tool.InputSchema, want) {
			t.Errorf("%s input schema = %v, want %s", tool.Name, tool.InputSchema, wantSchema)
		}
	}
	echo := byName["agent_echo"]
	if echo.Description != "Repeats its input." || echo.Title != "Echo" {
		t.Errorf("agent_echo description %q title %q", echo.Description, echo.Title)
	}
	if d := byName["agent_broken"].Description; d != "Broken" {
		t.Errorf("agent_broken description = %q, want the name as fallback", d)
	}
	a := echo.Annotations
	if a == nil || a.ReadOnlyHint || a.IdempotentHint || a.DestructiveHint == nil || *a.DestructiveHint || a.OpenWorldHint == nil || *a.OpenWorldHint {
		t.Errorf("agent_echo annotations = %+v: want not read-only, not idempotent, not destructive, closed world", a)
	}
	if a := byName["agent_worker"].Annotations; a == nil || a.ReadOnlyHint || a.DestructiveHint == nil || !*a.DestructiveHint || a.OpenWorldHint == nil || !*a.OpenWorldHint {
		t.Errorf("agent_worker annotations = %+v: want destructive, open world", a)
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_echo", Arguments: map[string]any{"input": "hello, agents"}})
	if err != nil {
		t.Fatalf("call agent_echo: %v", err)
	}
	if res.IsError || textOf(t, res) != "hello, agents" {
		t.Errorf("agent_echo = %q (isError %v), want the input back", textOf(t, res), res.IsError)
	}
	if id, _ := res.Meta[mcpserver.MetaTaskID].(string); id == "" {
		t.Errorf("result _meta has no %s: %v", mcpserver.MetaTaskID, res.Meta)
	}

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_broken", Arguments: map[string]any{"input": "hi"}})
	if err != nil {
		t.Fatalf("call agent_broken: %v", err)
	}
	if msg := textOf(t, res); !res.IsError || !strings.Contains(msg, "HTTP 500") || !strings.Contains(msg, "upstream exploded") {
		t.Errorf("agent_broken = %q (isError %v), want isError with the provider's reason", msg, res.IsError)
	}
	if strings.Contains(textOf(t, res), "sk-test") {
		t.Errorf("the provider's API key reached the client: %q", textOf(t, res))
	}

	for _, args := range []any{map[string]any{}, map[string]any{"input": 42}, map[string]any{"input": nil}, map[string]any{"text": "hi"}} {
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_echo", Arguments: args})
		if err != nil {
			t.Fatalf("call with %v: %v", args, err)
		}
		if msg := textOf(t, res); !res.IsError || !strings.Contains(msg, `"input"`) {
			t.Errorf("call with %v = %q (isError %v), want isError naming input", args, msg, res.IsError)
		}
	}

	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_nobody", Arguments: map[string]any{"input": "hi"}})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(werr.Message, "agent_nobody") {
		t.Errorf("unknown tool: err = %v, want JSON-RPC -32602 naming the tool", err)
	}
	// ping is gone from the stateless era (see TestHTTPGoSDKClient); a
	// session of that era on stdio still answers it, as a request without
	// _meta on a session that has its client's parameters.
	if era != mcpserver.ProtocolVersion2026 {
		if err := cs.Ping(ctx, nil); err != nil {
			t.Errorf("ping in %s: %v", era, err)
		}
	}
	// Still serving after all that.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_echo", Arguments: map[string]any{"input": "still here"}})
	if err != nil || textOf(t, res) != "still here" {
		t.Errorf("after errors: %v %v", res, err)
	}
}

// legacy asks a go-sdk client for the handshake era.
var legacy = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}

func TestInMemory(t *testing.T) {
	f := newFixture(t, mcpserver.Config{})
	checkSession(t, connectInMemory(t, f, nil), mcpserver.ProtocolVersion2026)
	checkSession(t, connectInMemory(t, f, nil, legacy), "2025-11-25")
}

func TestCallPublishesMCPSource(t *testing.T) {
	f := newFixture(t, mcpserver.Config{})
	sub, err := f.eng.Bus().Subscribe(lattice.Filter{Types: []string{axocoatl.EventAgentActivated, axocoatl.EventTaskCompleted}}, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	cs := connectInMemory(t, f, nil)
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "agent_echo", Arguments: map[string]any{"input": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	taskID := res.Meta[mcpserver.MetaTaskID]
	for _, typ := range []string{axocoatl.EventAgentActivated, axocoatl.EventTaskCompleted} {
		ev, err := recv(sub.Events(), 5*time.Second)
		if err != nil {
			t.Fatalf("waiting for %s: %v", typ, err)
		}
		var p struct {
			TaskID string `json:"task_id"`
			Source string `json:"source"`
		}
		json.Unmarshal(ev.Payload, &p)
		if ev.Type != typ || p.Source != "mcp" || p.TaskID != taskID {
			t.Errorf("event %s %s, want %s with source mcp and task %v", ev.Type, ev.Payload, typ, taskID)
		}
	}
}

// A client cancelling its call cancels the agent's run.
func TestCancelStopsRun(t *testing.T) {
	f := newFixture(t, mcpserver.Config{})
	checkCancel(t, f, connectInMemory(t, f, nil))
	checkCancel(t, f, connectInMemory(t, f, nil, legacy))
}

func checkCancel(t *testing.T, f *fixture, cs *mcp.ClientSession) {
	t.Helper()
	sub, err := f.eng.Bus().Subscribe(lattice.Filter{Types: []string{axocoatl.EventAgentFailed}}, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ctx, cancel := context.WithCancel(ctxT(t))
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_slow", Arguments: map[string]any{"input": "x"}})
		errc <- err
	}()
	if _, err := recv(f.slow.started, 5*time.Second); err != nil {
		t.Fatal("the run did not start")
	}
	cancel()
	if err, _ := recv(errc, 5*time.Second); !errors.Is(err, context.Canceled) {
		t.Errorf("CallTool = %v, want context.Canceled", err)
	}
	if err, terr := recv(f.slow.ended, 5*time.Second); terr != nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("the model's context: %v (%v), want canceled", err, terr)
	}
	ev, err := recv(sub.Events(), 5*time.Second)
	if err != nil || !strings.Contains(string(ev.Payload), "canceled") {
		t.Errorf("AgentFailed = %s (%v), want a cancelled run", ev.Payload, err)
	}
	// The session is fine afterwards.
	if _, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "agent_echo", Arguments: map[string]any{"input": "x"}}); err != nil {
		t.Errorf("call after cancel: %v", err)
	}
}

type progressLog struct {
	mu   sync.Mutex
	msgs []string
	vals []float64
	seen chan struct{}
}

func newProgressLog() *progressLog { return &progressLog{seen: make(chan struct{}, 100)} }

func (p *progressLog) handler(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	p.mu.Lock()
	p.msgs = append(p.msgs, req.Params.Message)
	p.vals = append(p.vals, req.Params.Progress)
	p.mu.Unlock()
	select {
	case p.seen <- struct{}{}:
	default:
	}
}

func (p *progressLog) snapshot() ([]string, []float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.msgs), slices.Clone(p.vals)
}

// checkProgress calls agent_worker (which calls the tool clock) with a
// progress token and expects a report of the start and of the tool call, in
// increasing order, before the result.
func checkProgress(t *testing.T, cs *mcp.ClientSession, log *progressLog) {
	t.Helper()
	params := &mcp.CallToolParams{Name: "agent_worker", Arguments: map[string]any{"input": "what time is it"}}
	params.SetProgressToken("tok-1")
	res, err := cs.CallTool(ctxT(t), params)
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, res); got != "the clock says noon" {
		t.Fatalf("agent_worker = %q", got)
	}
	want := []string{"agent worker started", "calling tool clock", "tool clock done"}
	// The client handles notifications on its own goroutine: they may land
	// just after the result. The last is the answer's text (the model
	// does not stream: one delta, sent before the result).
	for range len(want) + 1 {
		if _, err := recv(log.seen, 5*time.Second); err != nil {
			break
		}
	}
	msgs, vals := log.snapshot()
	if len(msgs) < len(want)+1 {
		t.Fatalf("progress messages %q, want at least %q and the answer", msgs, want)
	}
	// The text and the tool events reach the reporter on two channels:
	// the status messages are in order among themselves.
	var status []string
	text := 0
	for _, m := range msgs {
		if isText(m) {
			text++
			if m != "the clock says noon" {
				t.Errorf("progress text %q, want the answer", m)
			}
			continue
		}
		status = append(status, m)
	}
	if text != 1 || len(status) < len(want) {
		t.Fatalf("progress messages %q: want %q and the answer once", msgs, want)
	}
	for i, w := range want {
		if !strings.Contains(status[i], w) {
			t.Errorf("progress status[%d] = %q, want %q", i, status[i], w)
		}
	}
	for i := 1; i < len(vals); i++ {
		if vals[i] <= vals[i-1] {
			t.Errorf("progress values %v do not increase", vals)
		}
	}
	// No progress without a token.
	before := len(msgs)
	if _, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "agent_worker", Arguments: map[string]any{"input": "again"}}); err != nil {
		t.Fatal(err)
	}
	if msgs, _ := log.snapshot(); len(msgs) != before {
		t.Errorf("progress sent without a progress token: %q", msgs[before:])
	}
}

func TestProgressInMemory(t *testing.T) {
	f := newFixture(t, mcpserver.Config{})
	log := newProgressLog()
	checkProgress(t, connectInMemory(t, f, &mcp.ClientOptions{ProgressNotificationHandler: log.handler}), log)
}

// A long run reports that it is still going.
func TestProgressHeartbeat(t *testing.T) {
	f := newFixture(t, mcpserver.Config{ProgressInterval: 20 * time.Millisecond})
	log := newProgressLog()
	cs := connectInMemory(t, f, &mcp.ClientOptions{ProgressNotificationHandler: log.handler})
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	params := &mcp.CallToolParams{Name: "agent_slow", Arguments: map[string]any{"input": "x"}}
	params.SetProgressToken(7)
	errc := make(chan error, 1)
	go func() { _, err := cs.CallTool(ctx, params); errc <- err }()
	for range 3 {
		if _, err := recv(log.seen, 5*time.Second); err != nil {
			t.Fatal("no progress while the run goes")
		}
	}
	cancel()
	<-errc
	msgs, _ := log.snapshot()
	if !strings.Contains(msgs[len(msgs)-1], "running for") {
		t.Errorf("heartbeat message %q", msgs[len(msgs)-1])
	}
}

// Agents added after the server was built show up, and clients are told:
// in the handshake era on the session (over HTTP, its GET stream), in the
// stateless era on the client's subscriptions/listen stream (over HTTP, a
// POST that stays open).
func TestAgentAddedLater(t *testing.T) {
	connect := map[string]func(*testing.T, *fixture, *mcp.ClientOptions) *mcp.ClientSession{
		"in-memory 2026-07-28": func(t *testing.T, f *fixture, o *mcp.ClientOptions) *mcp.ClientSession {
			return connectInMemory(t, f, o)
		},
		"in-memory 2025-11-25": func(t *testing.T, f *fixture, o *mcp.ClientOptions) *mcp.ClientSession {
			return connectInMemory(t, f, o, legacy)
		},
		"http 2026-07-28": func(t *testing.T, f *fixture, o *mcp.ClientOptions) *mcp.ClientSession {
			return connectHTTP(t, serveHTTP(t, f).URL+"/mcp", o)
		},
		"http 2025-11-25": func(t *testing.T, f *fixture, o *mcp.ClientOptions) *mcp.ClientSession {
			return connectHTTP(t, serveHTTP(t, f).URL+"/mcp", o, legacy)
		},
	}
	for name, connect := range connect {
		t.Run(name, func(t *testing.T) { testAgentAddedLater(t, connect) })
	}
}

func testAgentAddedLater(t *testing.T, connect func(*testing.T, *fixture, *mcp.ClientOptions) *mcp.ClientSession) {
	f := newFixture(t, mcpserver.Config{})
	changed := make(chan struct{}, 4)
	cs := connect(t, f, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}})
	if err := f.eng.AddAgent(agent.Spec{ID: "late", Provider: provider.Echo}, provider.EchoModel{}); err != nil {
		t.Fatal(err)
	}
	// A call of the new tool works before any tools/list.
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "agent_late", Arguments: map[string]any{"input": "made it"}})
	if err != nil || textOf(t, res) != "made it" {
		t.Fatalf("agent_late: %v %v", res, err)
	}
	if _, err := recv(changed, 5*time.Second); err != nil {
		t.Error("no tools/list_changed notification")
	}
	list, err := cs.ListTools(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(list.Tools, func(tool *mcp.Tool) bool { return tool.Name == "agent_late" && tool.Description == "late" }) {
		t.Errorf("agent_late missing from tools/list")
	}
}

func TestConfigValidate(t *testing.T) {
	for _, cfg := range []mcpserver.Config{
		{MaxMessageBytes: -1},
		{MaxMessageDepth: 1000},
		{MaxBytesInFlight: mcpserver.DefaultMaxMessageBytes - 1},
		{MaxMessageBytes: 2 << 20, MaxBytesInFlight: 1 << 20},
	} {
		if err := cfg.Validate(); !errors.Is(err, mcpserver.ErrInvalidConfig) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
		if _, err := mcpserver.New(cfg); !errors.Is(err, mcpserver.ErrInvalidConfig) {
			t.Errorf("New(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
}
