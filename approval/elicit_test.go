package approval_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/approval"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
	"github.com/axocoatl/axocoatl-go/mcpserver"
)

// legacy asks a go-sdk client for MCP 2025-11-25, the era with
// elicitation mid-call.
var legacy = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}

// An MCP client of the handshake era (2025-11-25) with an elicitation
// handler (the go-sdk client) calls agent_<id> through mcpserver over
// stdio (as under `axocoatl mcp serve`) and over streamable HTTP (as on
// /mcp): the agent's MCP tool call is put to the client's user as a form;
// accept runs it once, decline or cancel never runs it.
func TestElicitationApprovesInnerCall(t *testing.T) {
	t.Run("stdio", func(t *testing.T) { testElicitation(t, false) })
	t.Run("http", func(t *testing.T) { testElicitation(t, true) })
}

// elicitEnv is an approval env with a files server, an agent "writer" whose
// model (an OpenAI-wire peer) calls its write tool, and mcpserver started.
func elicitEnv(t *testing.T, cfg approval.Config, opts axocoatl.Options) (*env, *filesServer, *mcpserver.Server) {
	t.Helper()
	return elicitEnvMCP(t, cfg, opts, mcpserver.Config{})
}

// elicitEnvMCP is elicitEnv with the MCP server's config.
func elicitEnvMCP(t *testing.T, cfg approval.Config, opts axocoatl.Options, mcfg mcpserver.Config) (*env, *filesServer, *mcpserver.Server) {
	t.Helper()
	peer := newOpenAIPeer(t)
	v := newEnv(t, cfg, opts)
	fs := newFilesServer()
	fs.attach(t, v.e, "")
	if err := v.e.AddAgent(agent.Spec{ID: "writer", Provider: "openai", Description: "Writes files."}, peer.model(t)); err != nil {
		t.Fatal(err)
	}
	srv, err := mcpserver.New(mcfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.e.Use(context.Background(), srv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return v, fs, srv
}

// connectEra connects client to srv over HTTP or stdio, in the era so picks
// (nil: the go-sdk's default, 2026-07-28).
func connectEra(t *testing.T, ctx context.Context, client *mcp.Client, srv *mcpserver.Server, overHTTP bool, so *mcp.ClientSessionOptions) *mcp.ClientSession {
	t.Helper()
	if overHTTP {
		hs := httptest.NewServer(srv)
		t.Cleanup(hs.Close)
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1}, so)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	c2sR, c2sW := io.Pipe()
	s2cR, s2cW := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- srv.ServeStdio(context.Background(), c2sR, s2cW)
		s2cW.Close()
	}()
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: s2cR, Writer: c2sW}, so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		<-served
	})
	return cs
}

// An MCP client of the stateless era (2026-07-28, the go-sdk's default)
// that declares no form elicitation cannot be asked: with the host's
// channels undeclared (an embedding host that may resolve from anywhere)
// the call waits for another verdict and, with none, is denied when the
// approval expires: closed, never run; the reason is logged.
func TestElicitationStatelessEraFailsClosed(t *testing.T) {
	for _, overHTTP := range []bool{false, true} {
		name := map[bool]string{false: "stdio", true: "http"}[overHTTP]
		t.Run(name, func(t *testing.T) {
			var logs testutil.SyncBuffer
			v, fs, srv := elicitEnv(t, approval.Config{Timeout: 300 * time.Millisecond}, axocoatl.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			client := mcp.NewClient(&mcp.Implementation{Name: "plain-2026", Version: "1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cs := connectEra(t, ctx, client, srv, overHTTP, nil)
			if v := cs.InitializeResult().ProtocolVersion; v != mcpserver.ProtocolVersion2026 {
				t.Fatalf("negotiated %s", v)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_writer", Arguments: map[string]any{"input": ask("mcp__files__write", `{"path":"d.txt","text":"x"}`)}})
			if err != nil {
				t.Fatal(err)
			}
			if text := res.Content[0].(*mcp.TextContent).Text; fs.calls.Load() != 0 || !strings.Contains(text, "no human answered") {
				t.Fatalf("the tool ran %d times, the agent answered %q: want no run, and an expired approval", fs.calls.Load(), text)
			}
			if got := v.next(t, approval.EventResolved); got["status"] != "expired" {
				t.Fatalf("ApprovalResolved %v, want expired", got)
			}
			if !strings.Contains(logs.String(), "declared no form elicitation") {
				t.Errorf("the reason is not logged:\n%s", logs.String())
			}
		})
	}
}

func testElicitation(t *testing.T, overHTTP bool) {
	v, fs, srv := elicitEnv(t, approval.Config{Timeout: time.Minute}, axocoatl.Options{})
	var action atomic.Value
	var asked atomic.Value
	client := mcp.NewClient(&mcp.Implementation{Name: "elicit-test", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked.Store(req.Params.Message)
			return &mcp.ElicitResult{Action: action.Load().(string)}, nil
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := connectEra(t, ctx, client, srv, overHTTP, legacy)
	input := ask("mcp__files__write", `{"path":"c.txt","text":"x"}`)
	for _, c := range []struct {
		action string
		runs   int64
		status string
	}{{"accept", 1, "approved"}, {"decline", 0, "denied"}, {"cancel", 0, "denied"}} {
		before := fs.calls.Load()
		action.Store(c.action)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_writer", Arguments: map[string]any{"input": input}})
		if err != nil {
			t.Fatal(err)
		}
		if ran := fs.calls.Load() - before; ran != c.runs {
			t.Fatalf("%s: the tool ran %d times, want %d", c.action, ran, c.runs)
		}
		text := res.Content[0].(*mcp.TextContent).Text
		if c.runs == 1 && !strings.Contains(text, "wrote c.txt") || c.runs == 0 && !strings.Contains(text, "A human denied") {
			t.Fatalf("%s: agent answered %q", c.action, text)
		}
		if msg, _ := asked.Load().(string); !strings.Contains(msg, "mcp__files__write") || !strings.Contains(msg, `"path":"c.txt"`) {
			t.Fatalf("the form said %q", msg)
		}
		got := v.next(t, approval.EventResolved)
		if got["status"] != c.status || got["resolved_by"] != mcpserver.ElicitationBy {
			t.Fatalf("%s: ApprovalResolved %v", c.action, got)
		}
	}
}

// A client without elicitation is not asked; the approval waits for
// another verdict, which wins.
func TestNoElicitationWaitsForVerdict(t *testing.T) {
	v := newEnv(t, approval.Config{Timeout: time.Minute}, axocoatl.Options{})
	var rec recorder
	if err := v.e.RegisterTool(rec.tool("t", "", "")); err != nil {
		t.Fatal(err)
	}
	if err := v.e.AddAgent(agent.Spec{ID: "a"}, &oneCall{tool: "t"}); err != nil {
		t.Fatal(err)
	}
	srv, err := mcpserver.New(mcpserver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.e.Use(context.Background(), srv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.MCP().Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "plain", Version: "1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}}).Connect(context.Background(), ct, legacy)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cs.Close(); ss.Wait() }()
	done := make(chan string, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "agent_a", Arguments: map[string]any{"input": "x"}})
		if err != nil {
			done <- err.Error()
			return
		}
		done <- res.Content[0].(*mcp.TextContent).Text
	}()
	req := v.next(t, approval.EventRequested)
	if err := v.m.Resolve(context.Background(), req["approval_id"].(string), approval.Allow, "", "http"); err != nil {
		t.Fatal(err)
	}
	if text := <-done; !strings.Contains(text, "wrote") || rec.n.Load() != 1 {
		t.Fatalf("%q, %d runs", text, rec.n.Load())
	}
}

// The first verdict wins: a verdict over HTTP while the client's user has
// the form open resolves the approval, and the form's request is
// withdrawn (its context ends).
func TestFirstVerdictWinsOverOpenForm(t *testing.T) {
	v := newEnv(t, approval.Config{Timeout: time.Minute}, axocoatl.Options{})
	var rec recorder
	if err := v.e.RegisterTool(rec.tool("t", "", "")); err != nil {
		t.Fatal(err)
	}
	if err := v.e.AddAgent(agent.Spec{ID: "a"}, &oneCall{tool: "t"}); err != nil {
		t.Fatal(err)
	}
	srv, err := mcpserver.New(mcpserver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.e.Use(context.Background(), srv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	formOpen := make(chan struct{}, 1)
	formGone := make(chan error, 1)
	client := mcp.NewClient(&mcp.Implementation{Name: "slow-user", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{},
		ElicitationHandler: func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			formOpen <- struct{}{}
			select {
			case <-ctx.Done():
				formGone <- ctx.Err()
			case <-time.After(10 * time.Second):
				formGone <- nil
			}
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
	})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.MCP().Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := client.Connect(context.Background(), ct, legacy)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cs.Close(); ss.Wait() }()
	done := make(chan string, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "agent_a", Arguments: map[string]any{"input": "x"}})
		if err != nil {
			done <- err.Error()
			return
		}
		done <- res.Content[0].(*mcp.TextContent).Text
	}()
	req := v.next(t, approval.EventRequested)
	<-formOpen
	if r := v.do(t, "POST", "/api/approvals/"+req["approval_id"].(string), `{"decision":"allow"}`); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	if text := <-done; !strings.Contains(text, "wrote") || rec.n.Load() != 1 {
		t.Fatalf("%q, %d runs", text, rec.n.Load())
	}
	if err := <-formGone; err == nil {
		t.Fatal("the form stayed open after the approval was resolved elsewhere")
	}
	if got := v.next(t, approval.EventResolved); got["resolved_by"] != "http" || got["status"] != "approved" {
		t.Fatalf("%v", got)
	}
}
