package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/lattice"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The test binary doubles as the stdio servers the tests spawn.
	if mode := helperMode(); mode != "" {
		runHelper(mode)
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

type echoIn struct {
	Message string `json:"message"`
}
type sumIn struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}
type sumOut struct {
	Sum float64 `json:"sum"`
}

// testServer is a go-sdk MCP server with a few tools of every outcome.
type testServer struct {
	srv         *mcp.Server
	hungStarted chan struct{}
	hungEnded   chan error // the server-side ctx error of the hung tool
}

func newTestServer() *testServer {
	ts := &testServer{hungStarted: make(chan struct{}, 1), hungEnded: make(chan error, 1)}
	ts.srv = mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
	})
	mcp.AddTool(ts.srv, &mcp.Tool{Name: "echo", Description: "Echoes.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Echo: " + in.Message}}}, nil, nil
		})
	mcp.AddTool(ts.srv, &mcp.Tool{Name: "sum"},
		func(_ context.Context, _ *mcp.CallToolRequest, in sumIn) (*mcp.CallToolResult, sumOut, error) {
			return nil, sumOut{Sum: in.A + in.B}, nil
		})
	mcp.AddTool(ts.srv, &mcp.Tool{Name: "fail"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "disk on fire"}}}, nil, nil
		})
	mcp.AddTool(ts.srv, &mcp.Tool{Name: "mixed"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "first"},
				&mcp.ImageContent{MIMEType: "image/png", Data: []byte{1, 2, 3}},
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///a.txt", Text: "hello"}},
				&mcp.ResourceLink{URI: "file:///b.bin", Name: "b"},
			}}, nil, nil
		})
	mcp.AddTool(ts.srv, &mcp.Tool{Name: "hang"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			ts.hungStarted <- struct{}{}
			<-ctx.Done()
			ts.hungEnded <- ctx.Err()
			return nil, nil, ctx.Err()
		})
	mcp.AddTool(ts.srv, &mcp.Tool{Name: "dotted.name"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "dotted"}}}, nil, nil
		})
	return ts
}

// dial connects a fresh in-memory session of the server for each attempt.
func (ts *testServer) dial(ctx context.Context) (mcp.Transport, error) {
	ct, st := mcp.NewInMemoryTransports()
	if _, err := ts.srv.Connect(ctx, st, nil); err != nil {
		return nil, err
	}
	return ct, nil
}

// startModule attaches a module to a fresh Engine and waits for its first
// connect attempts; cleanup closes the Engine (stopping the module).
func startModule(t testing.TB, cfg Config, log *slog.Logger) (*axocoatl.Engine, *Module) {
	t.Helper()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := axocoatl.New(axocoatl.Options{Logger: log})
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Use(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := e.Close(ctx); err != nil {
			t.Errorf("engine close: %v", err)
		}
	})
	return e, m
}

func toolNamesOf(e *axocoatl.Engine) []string {
	var names []string
	for _, t := range e.Tools() {
		names = append(names, t.Name)
	}
	return names
}

// An in-process go-sdk server through the module: tools, results, errors,
// a hung call, the allow-list.
//
// Guards: bound mcp_servers[].timeout (docs/bounds.md): the hung tool's
// call ends at the server's timeout with ErrTimeout and is cancelled on
// the server.
func TestInProcess(t *testing.T) {
	ts := newTestServer()
	e, m := startModule(t, Config{Servers: []ServerConfig{{Name: "mem", Dial: ts.dial, Timeout: 500 * time.Millisecond}}}, nil)
	ctx := context.Background()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := m.Ready(rctx); err != nil {
		t.Fatal(err)
	}

	t.Run("qualified names", func(t *testing.T) {
		got := strings.Join(toolNamesOf(e), " ")
		want := "mcp__mem__dotted_name mcp__mem__echo mcp__mem__fail mcp__mem__hang mcp__mem__mixed mcp__mem__sum"
		if got != want {
			t.Fatalf("tools:\n got %s\nwant %s", got, want)
		}
		for _, tool := range e.Tools() {
			if tool.Server != "mem" {
				t.Errorf("%s: Server = %q", tool.Name, tool.Server)
			}
			if tool.Name == "mcp__mem__echo" {
				if tool.Description != "Echoes." {
					t.Errorf("description %q", tool.Description)
				}
				if !strings.Contains(string(tool.InputSchema), `"message"`) {
					t.Errorf("input schema %s", tool.InputSchema)
				}
				if !strings.Contains(string(tool.Annotations), `"readOnlyHint":true`) {
					t.Errorf("annotations %s", tool.Annotations)
				}
			}
		}
		st := m.Status()
		if len(st) != 1 || !st[0].Connected || len(st[0].Tools) != 6 || st[0].Transport != "custom" {
			t.Fatalf("status %+v", st)
		}
	})

	t.Run("round trip", func(t *testing.T) {
		res, err := e.CallTool(ctx, axocoatl.ToolCall{Tool: "mcp__mem__echo", Arguments: json.RawMessage(`{"message":"hi"}`)})
		if err != nil || res.IsError || res.Content != "Echo: hi" {
			t.Fatalf("echo: %+v, %v", res, err)
		}
		res, err = e.CallTool(ctx, axocoatl.ToolCall{Tool: "mcp__mem__sum", Arguments: json.RawMessage(`{"a":2,"b":3}`)})
		if err != nil || res.IsError || string(res.Structured) != `{"sum":5}` {
			t.Fatalf("sum: %+v, %v", res, err)
		}
		res, err = e.CallTool(ctx, axocoatl.ToolCall{Tool: "mcp__mem__dotted_name"})
		if err != nil || res.Content != "dotted" {
			t.Fatalf("dotted: %+v, %v", res, err)
		}
		res, err = e.CallTool(ctx, axocoatl.ToolCall{Tool: "mcp__mem__mixed", Arguments: json.RawMessage(`{}`)})
		want := "first\n[image: image/png, 3 bytes]\n[resource file:///a.txt]\nhello\n[resource link: file:///b.bin (b)]"
		if err != nil || res.Content != want {
			t.Fatalf("mixed: %q, %v", res.Content, err)
		}
	})

	t.Run("isError is a failed call", func(t *testing.T) {
		sub, err := e.Bus().Subscribe(lattice.Filter{Types: []string{axocoatl.EventToolResult}}, 8)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		res, err := e.CallTool(ctx, axocoatl.ToolCall{AgentID: "", Tool: "mcp__mem__fail", Arguments: json.RawMessage(`{}`)})
		if err != nil || !res.IsError || res.Content != "disk on fire" {
			t.Fatalf("fail: %+v, %v", res, err)
		}
		ev := <-sub.Events()
		var p struct {
			OK    bool   `json:"ok"`
			Error string `json:"error"`
		}
		json.Unmarshal(ev.Payload, &p)
		if p.OK || p.Error != "disk on fire" {
			t.Fatalf("ToolResult event %s", ev.Payload)
		}
	})

	t.Run("hung tool times out and is cancelled on the server", func(t *testing.T) {
		start := time.Now()
		_, err := e.CallTool(ctx, axocoatl.ToolCall{Tool: "mcp__mem__hang", Arguments: json.RawMessage(`{}`)})
		took := time.Since(start)
		if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
		if took > 500*time.Millisecond+time.Second {
			t.Fatalf("took %s", took)
		}
		if !strings.Contains(err.Error(), "mem") || !strings.Contains(err.Error(), "hang") {
			t.Fatalf("error does not name server and tool: %v", err)
		}
		select {
		case <-ts.hungEnded:
		case <-time.After(2 * time.Second):
			t.Fatal("server-side handler was not cancelled")
		}
		// The session survives a timeout.
		res, err := e.CallTool(ctx, axocoatl.ToolCall{Tool: "mcp__mem__echo", Arguments: json.RawMessage(`{"message":"after"}`)})
		if err != nil || res.Content != "Echo: after" {
			t.Fatalf("after timeout: %+v %v", res, err)
		}
	})

	t.Run("agent allow-list", func(t *testing.T) {
		if err := e.AddAgent(agent.Spec{ID: "narrow", Tools: []string{"mcp__mem__echo"}}, provider.EchoModel{}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.CallTool(ctx, axocoatl.ToolCall{AgentID: "narrow", Tool: "mcp__mem__sum", Arguments: json.RawMessage(`{"a":1,"b":1}`)}); !errors.Is(err, axocoatl.ErrToolDenied) {
			t.Fatalf("sum for narrow agent: %v", err)
		}
		res, err := e.CallTool(ctx, axocoatl.ToolCall{AgentID: "narrow", Tool: "mcp__mem__echo", Arguments: json.RawMessage(`{"message":"ok"}`)})
		if err != nil || res.Content != "Echo: ok" {
			t.Fatalf("echo for narrow agent: %+v %v", res, err)
		}
	})

	t.Run("list_changed adds and removes", func(t *testing.T) {
		mcp.AddTool(ts.srv, &mcp.Tool{Name: "late"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "late"}}}, nil, nil
		})
		ts.srv.RemoveTools("mixed")
		waitFor(t, 5*time.Second, func() bool {
			names := strings.Join(toolNamesOf(e), " ")
			return strings.Contains(names, "mcp__mem__late") && !strings.Contains(names, "mcp__mem__mixed")
		})
		res, err := e.CallTool(ctx, axocoatl.ToolCall{Tool: "mcp__mem__late"})
		if err != nil || res.Content != "late" {
			t.Fatalf("late: %+v %v", res, err)
		}
	})
}

func waitFor(t testing.TB, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestDownServerFailsFastAndReconnects(t *testing.T) {
	ts := newTestServer()
	var refuse atomic.Bool
	var attempts atomic.Int32
	dial := func(ctx context.Context) (mcp.Transport, error) {
		attempts.Add(1)
		if refuse.Load() {
			return nil, errors.New("refused for the test")
		}
		return ts.dial(ctx)
	}
	cfg := Config{Servers: []ServerConfig{{Name: "flaky", Dial: dial}}, MinBackoff: 50 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}
	e, m := startModule(t, cfg, nil)
	if err := m.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	sub, err := e.Bus().Subscribe(lattice.Filter{Types: []string{"McpServer*"}}, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	// End every server session: the client sees its session end.
	refuse.Store(true)
	for ss := range ts.srv.Sessions() {
		ss.Close()
	}
	ev := <-sub.Events()
	if ev.Type != EventServerDisconnected || !strings.Contains(string(ev.Payload), `"server":"flaky"`) {
		t.Fatalf("event %s %s", ev.Type, ev.Payload)
	}
	start := time.Now()
	_, err = e.CallTool(context.Background(), axocoatl.ToolCall{Tool: "mcp__flaky__echo", Arguments: json.RawMessage(`{"message":"x"}`)})
	if !errors.Is(err, ErrServerDown) || !strings.Contains(err.Error(), "flaky") || time.Since(start) > 100*time.Millisecond {
		t.Fatalf("call while down: %v after %s", err, time.Since(start))
	}
	// Backoff is capped: attempts keep coming at ≤100ms.
	n := attempts.Load()
	time.Sleep(400 * time.Millisecond)
	if attempts.Load()-n < 2 {
		t.Fatalf("only %d attempts in 400ms", attempts.Load()-n)
	}
	refuse.Store(false)
	waitFor(t, 3*time.Second, func() bool { return m.Status()[0].Connected })
	res, err := e.CallTool(context.Background(), axocoatl.ToolCall{Tool: "mcp__flaky__echo", Arguments: json.RawMessage(`{"message":"back"}`)})
	if err != nil || res.Content != "Echo: back" {
		t.Fatalf("after reconnect: %+v %v", res, err)
	}
}

func TestStopUnregisters(t *testing.T) {
	ts := newTestServer()
	e, m := startModule(t, Config{Servers: []ServerConfig{{Name: "mem", Dial: ts.dial}}}, nil)
	if err := m.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(e.Tools()) == 0 {
		t.Fatal("no tools")
	}
	if err := m.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(e.Tools()); n != 0 {
		t.Fatalf("%d tools left after Stop", n)
	}
}
