package mcpclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// benchEngine attaches one server to an Engine with an agent whose
// allow-list admits it and a pass-through interceptor: the full path a
// model's tool call takes.
func benchEngine(b *testing.B, sc ServerConfig) *axocoatl.Engine {
	e, _ := benchModule(b, sc)
	return e
}

func benchModule(b *testing.B, sc ServerConfig) (*axocoatl.Engine, *Module) {
	e, m := startModule(b, Config{Servers: []ServerConfig{sc}}, nil)
	if err := m.Ready(context.Background()); err != nil {
		b.Fatal(err)
	}
	if err := e.AddAgent(agent.Spec{ID: "bench", Tools: []string{"mcp__" + sc.Name + "__*"}}, provider.EchoModel{}); err != nil {
		b.Fatal(err)
	}
	e.Intercept(func(ctx context.Context, call axocoatl.ToolCall, next axocoatl.ToolFunc) (axocoatl.ToolResult, error) {
		return next(ctx, call)
	})
	return e, m
}

func benchViaEngine(b *testing.B, e *axocoatl.Engine, server string) {
	call := axocoatl.ToolCall{AgentID: "bench", Tool: "mcp__" + server + "__echo", Arguments: json.RawMessage(`{"message":"hi"}`)}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := e.CallTool(ctx, call)
		if err != nil || res.Content != "Echo: hi" {
			b.Fatal(res, err)
		}
	}
}

func benchDirect(b *testing.B, t mcp.Transport) {
	ctx := context.Background()
	c := mcp.NewClient(clientImpl, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	cs, err := c.Connect(ctx, t, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	discover(b, cs)
	args := json.RawMessage(`{"message":"hi"}`)
	b.ReportAllocs()
	for b.Loop() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: args})
		if err != nil || res.Content[0].(*mcp.TextContent).Text != "Echo: hi" {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkToolCall compares a call through the Engine (qualified name,
// allow-list, interceptor chain, events) with the same call made directly on
// a go-sdk ClientSession, against the same server in the same run.
func BenchmarkToolCall(b *testing.B) {
	b.Run("inmemory", func(b *testing.B) {
		ts := newTestServer()
		b.Run("engine", func(b *testing.B) {
			benchViaEngine(b, benchEngine(b, ServerConfig{Name: "mem", Dial: ts.dial}), "mem")
		})
		b.Run("direct", func(b *testing.B) {
			t, err := ts.dial(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			benchDirect(b, t)
		})
	})
	b.Run("stdio", func(b *testing.B) {
		b.Run("engine", func(b *testing.B) {
			benchViaEngine(b, benchEngine(b, helperServer("stdio", "server")), "stdio")
		})
		b.Run("direct", func(b *testing.B) {
			cmd := exec.Command(os.Args[0], "-test.run=^$", helperFlag+"server")
			benchDirect(b, &mcp.CommandTransport{Command: cmd})
		})
	})
}

// BenchmarkToolCallPaired makes the two calls of BenchmarkToolCall
// alternately in one loop, so both see the same machine load, and reports
// the ratio engine/direct of their total times.
func BenchmarkToolCallPaired(b *testing.B) {
	// "-bounded": the direct call also gets the module's per-call timeout,
	// so both sides carry a deadline.
	for _, bounded := range []bool{false, true} {
		suffix := ""
		if bounded {
			suffix = "-bounded"
		}
		b.Run("inmemory"+suffix, func(b *testing.B) {
			ts := newTestServer()
			e := benchEngine(b, ServerConfig{Name: "mem", Dial: ts.dial})
			t, err := ts.dial(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			paired(b, e, "mem", t, bounded)
		})
		b.Run("stdio"+suffix, func(b *testing.B) {
			e := benchEngine(b, helperServer("stdio", "server"))
			paired(b, e, "stdio", &mcp.CommandTransport{Command: exec.Command(os.Args[0], "-test.run=^$", helperFlag+"server")}, bounded)
		})
	}
	// Direct calls on the module's own session: what remains is only the
	// Engine and the module's wrapper (same session, same server).
	b.Run("inmemory-same-session", func(b *testing.B) {
		ts := newTestServer()
		e, m := benchModule(b, ServerConfig{Name: "mem", Dial: ts.dial})
		pairedOn(b, e, "mem", m.servers[0].liveSession(), true)
	})
	b.Run("stdio-same-session", func(b *testing.B) {
		e, m := benchModule(b, helperServer("stdio", "server"))
		pairedOn(b, e, "stdio", m.servers[0].liveSession(), true)
	})
}

func paired(b *testing.B, e *axocoatl.Engine, server string, t mcp.Transport, bounded bool) {
	ctx := context.Background()
	c := mcp.NewClient(clientImpl, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	cs, err := c.Connect(ctx, t, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	discover(b, cs)
	pairedOn(b, e, server, cs, bounded)
}

// discover lists the server's tools on a direct session, as any client that
// discovers tools does (and as the module did on its own session): the SDK
// then attaches the tool's definition to each of its calls, so both sides
// of a comparison make the same call.
func discover(b *testing.B, cs *mcp.ClientSession) {
	if _, err := listTools(context.Background(), cs, ServerConfig{}); err != nil {
		b.Fatal(err)
	}
}

// pairedOn compares the Engine path with direct calls on session cs.
func pairedOn(b *testing.B, e *axocoatl.Engine, server string, cs *mcp.ClientSession, bounded bool) {
	ctx := context.Background()
	args := json.RawMessage(`{"message":"hi"}`)
	call := axocoatl.ToolCall{AgentID: "bench", Tool: "mcp__" + server + "__echo", Arguments: json.RawMessage(`{"message":"hi"}`)}
	viaEngine := func() {
		if res, err := e.CallTool(ctx, call); err != nil || res.Content != "Echo: hi" {
			b.Fatal(res, err)
		}
	}
	direct := func() {
		ctx := ctx
		if bounded {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
			defer cancel()
		}
		// Fresh params per call, as a real caller has: the SDK writes its
		// _meta into the params it is given, so a reused params value would
		// skip that work on every call after the first.
		if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: args}); err != nil || res.Content[0].(*mcp.TextContent).Text != "Echo: hi" {
			b.Fatal(res, err)
		}
	}
	testutil.Paired(b, viaEngine, direct)
}

// BenchmarkEngineOverhead is the Engine's own cost per call (allow-list,
// interceptor, events, routing) with a tool that returns at once.
func BenchmarkEngineOverhead(b *testing.B) {
	e := axocoatl.New(axocoatl.Options{})
	defer e.Close(context.Background())
	if err := e.AddAgent(agent.Spec{ID: "bench", Tools: []string{"mcp__x__*"}}, provider.EchoModel{}); err != nil {
		b.Fatal(err)
	}
	e.Intercept(func(ctx context.Context, call axocoatl.ToolCall, next axocoatl.ToolFunc) (axocoatl.ToolResult, error) {
		return next(ctx, call)
	})
	e.RegisterTool(axocoatl.Tool{Name: "mcp__x__echo", Server: "x", Call: func(context.Context, axocoatl.ToolCall) (axocoatl.ToolResult, error) {
		return axocoatl.ToolResult{Content: "ok"}, nil
	}})
	call := axocoatl.ToolCall{AgentID: "bench", Tool: "mcp__x__echo", Arguments: json.RawMessage(`{}`)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.CallTool(context.Background(), call); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStartup4Slow measures Start to all-connected with four stdio
// servers that each take 1s to become ready.
func BenchmarkStartup4Slow(b *testing.B) {
	for b.Loop() {
		d := startSlow(b)
		b.ReportMetric(d.Seconds(), "s/ready")
	}
}

func startSlow(tb testing.TB) time.Duration { return startSlowN(tb, 4) }

// startSlowN starts n stdio servers that each take 1s to become ready and
// returns the time from Use to all connected.
func startSlowN(tb testing.TB, n int) time.Duration {
	var servers []ServerConfig
	for i := range n {
		servers = append(servers, helperServer(fmt.Sprintf("s%d", i+1), "slow"))
	}
	e := axocoatl.New(axocoatl.Options{})
	defer e.Close(context.Background())
	m, err := New(Config{Servers: servers})
	if err != nil {
		tb.Fatal(err)
	}
	start := time.Now()
	if err := e.Use(context.Background(), m); err != nil {
		tb.Fatal(err)
	}
	if err := m.Ready(context.Background()); err != nil {
		tb.Fatal(err)
	}
	took := time.Since(start)
	for _, s := range m.Status() {
		if !s.Connected {
			tb.Fatalf("%s not connected", s.Name)
		}
	}
	return took
}

// The four servers are started side by side, not one after another: each
// waits, before it speaks MCP, until all four have started (they meet on
// a Unix socket the test holds), so one after another the first would wait
// for ever. The order is what this asserts, not the clock (a race-built
// child can take seconds to start on a loaded machine):
// BenchmarkStartup4Slow measures the time.
func TestStartupParallel(t *testing.T) {
	const n = 4
	sock := filepath.Join(t.TempDir(), "meet.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	arrived := make(chan net.Conn, n)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			arrived <- c
		}
	}()
	var servers []ServerConfig
	for i := range n {
		sc := helperServer(fmt.Sprintf("s%d", i+1), "meet")
		sc.Env = map[string]secretT{meetEnv: secretT(sock)}
		servers = append(servers, sc)
	}
	e := axocoatl.New(axocoatl.Options{})
	defer e.Close(context.Background())
	m, err := New(Config{Servers: servers})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Use(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	var met []net.Conn
	defer func() {
		for _, c := range met {
			c.Close()
		}
	}()
	bound := time.After(time.Minute) // a failure bound: the arrivals are waited for
	for len(met) < n {
		select {
		case c := <-arrived:
			met = append(met, c)
		case <-bound:
			t.Fatalf("%d of %d servers started while none was ready: they are not started side by side", len(met), n)
		}
	}
	for _, c := range met { // all four are up: let them serve
		if _, err := c.Write([]byte{1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, s := range m.Status() {
		if !s.Connected {
			t.Fatalf("%s not connected: %+v", s.Name, s)
		}
	}
}

func (s *server) liveSession() *mcp.ClientSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.session
}
