package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

// Acceptance of #27's MCP parts on the built binary: a gated MCP tool call
// of an agent, run by a go-sdk v1.8 client of the 2026-07-28 era, over
// `axocoatl mcp serve` (the binary as a subprocess) and over /mcp; a
// client without form elicitation; and `mcp serve --http`, whose approvals
// API answers for a client that cannot show forms.

// noteServer is an MCP server (streamable HTTP) with one tool, note,
// counting its runs.
type noteServer struct {
	url  string
	runs atomic.Int64
}

func newNoteServer(t *testing.T) *noteServer {
	ns := &noteServer{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "note", Description: "Takes a note."},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			Q string `json:"q"`
		}) (*mcp.CallToolResult, any, error) {
			ns.runs.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "noted " + in.Q}}}, nil, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	// A daemon killed as a subprocess never ends its session: end them.
	t.Cleanup(func() {
		for ss := range srv.Sessions() {
			ss.Close()
		}
	})
	ns.url = hs.URL
	return ns
}

// inputConfig: agent "a" (a ChatRecorder model) calls mcp__notes__note,
// which the approval gate asks about (its default, prompt).
func inputConfig(t *testing.T, ns *noteServer, extra string) string {
	rec := testutil.NewChatRecorder(t, "mcp__notes__note")
	return writeConfig(t, fmt.Sprintf(`
server:
  shutdown_grace: 5s
  data_dir: %s
providers:
  openai: { base_url: %s, api_key: sk-test, max_retries: -1 }
agents:
  - id: a
    provider: openai
    model: m
mcp_servers:
  - name: notes
    url: %s/mcp
    timeout: 10s
%s`, t.TempDir(), rec.URL, ns.url, extra))
}

func formClient(forms *atomic.Int64, disabled bool) *mcp.Client {
	opts := &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			forms.Add(1)
			if !strings.Contains(req.Params.Message, "mcp__notes__note") {
				return &mcp.ElicitResult{Action: "decline"}, nil
			}
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
	}
	if disabled {
		opts.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
	}
	return mcp.NewClient(&mcp.Implementation{Name: "forms", Version: "1"}, opts)
}

// checkInputRound: the round trip approves and runs the tool once; a
// tampered requestState is refused.
func checkInputRound(t *testing.T, connect func(*mcp.Client) *mcp.ClientSession, ns *noteServer) {
	ctx := mcpCtx(t)
	var forms atomic.Int64
	cs := connect(formClient(&forms, false))
	if v := cs.InitializeResult().ProtocolVersion; v != era2026 {
		t.Fatalf("negotiated %s", v)
	}
	before := ns.runs.Load()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_a", Arguments: map[string]any{"input": "milk"}})
	if err != nil || res.IsError || !strings.Contains(mcpText(res), "noted milk") {
		t.Fatalf("agent_a: %q %v", mcpText(res), err)
	}
	if n := ns.runs.Load() - before; n != 1 || forms.Load() != 1 {
		t.Fatalf("the tool ran %d times after %d forms, want 1 and 1", n, forms.Load())
	}

	manual := connect(formClient(&forms, true))
	first, err := manual.CallTool(ctx, &mcp.CallToolParams{Name: "agent_a", Arguments: map[string]any{"input": "eggs"}})
	if err != nil || !first.NeedsInput() || first.RequestState == "" {
		t.Fatalf("first round: %+v %v", first, err)
	}
	answers := mcp.InputResponseMap{}
	for k := range first.InputRequests {
		answers[k] = &mcp.ElicitResult{Action: "accept"}
	}
	_, err = manual.CallTool(ctx, &mcp.CallToolParams{Name: "agent_a", Arguments: map[string]any{"input": "eggs"}, InputResponses: answers, RequestState: first.RequestState + "-TAMPERED"})
	if err == nil || !strings.Contains(err.Error(), "invalid requestState") {
		t.Fatalf("tampered: %v", err)
	}
	done, err := manual.CallTool(ctx, &mcp.CallToolParams{Name: "agent_a", Arguments: map[string]any{"input": "eggs"}, InputResponses: answers, RequestState: first.RequestState})
	if err != nil || !strings.Contains(mcpText(done), "noted eggs") {
		t.Fatalf("genuine retry: %q %v", mcpText(done), err)
	}
}

func TestMCPInputRequiredBinary(t *testing.T) {
	bin := buildBinary(t)
	ns := newNoteServer(t)
	config := inputConfig(t, ns, "")

	t.Run("mcp serve", func(t *testing.T) {
		var stderr testutil.SyncBuffer
		connect := func(c *mcp.Client) *mcp.ClientSession {
			cmd := mcpCommand(t, bin, config)
			cmd.Stderr = &stderr
			cs, err := c.Connect(mcpCtx(t), &mcp.CommandTransport{Command: cmd}, nil)
			if err != nil {
				t.Fatalf("connect: %v\n%s", err, stderr.String())
			}
			t.Cleanup(func() { cs.Close() })
			return cs
		}
		checkInputRound(t, connect, ns)

		// A client that cannot show forms, with no other channel: denied
		// at once, saying how approvals are answered.
		cs := connect(mcpClient())
		before := ns.runs.Load()
		start := time.Now()
		res, err := cs.CallTool(mcpCtx(t), &mcp.CallToolParams{Name: "agent_a", Arguments: map[string]any{"input": "bread"}})
		took := time.Since(start)
		if err != nil || took > time.Second || ns.runs.Load() != before {
			t.Fatalf("took %s (err %v), the tool ran %d times", took, err, ns.runs.Load()-before)
		}
		for _, want := range []string{"could not be put to anyone", "declared no form elicitation", "dashboard"} {
			if !strings.Contains(mcpText(res), want) {
				t.Fatalf("answer %q lacks %q", mcpText(res), want)
			}
		}
		logs := stderr.String()
		for _, want := range []string{"approvals can be answered only by the calling MCP client's forms", "--http", "status=unanswerable"} {
			if !strings.Contains(logs, want) {
				t.Errorf("the log lacks %q:\n%s", want, logs)
			}
		}
	})

	t.Run("/mcp", func(t *testing.T) {
		base, _, _ := startBinary(t, bin, nil, "serve", "--addr", "127.0.0.1:0", "--config", config)
		connect := func(c *mcp.Client) *mcp.ClientSession {
			cs, err := c.Connect(mcpCtx(t), &mcp.StreamableClientTransport{Endpoint: base + "/mcp", MaxRetries: -1}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })
			return cs
		}
		checkInputRound(t, connect, ns)
	})
}

var mcpHTTPLine = regexp.MustCompile(`msg="axocoatl mcp serve ready".* http=(\S+)`)

// `axocoatl mcp serve --http 127.0.0.1:0`: the startup log says where
// approvals are answered; a go-sdk client without forms calls agent_a over
// stdio, the approval appears on the approvals API of --http, allowing it
// there lets the call complete with the tool run once. The token rules
// are the daemon's: a non-loopback --http without server.api_token is
// refused.
func TestMCPServeHTTPAnswersApprovals(t *testing.T) {
	bin := buildBinary(t)
	ns := newNoteServer(t)
	config := inputConfig(t, ns, "")
	cmd := mcpCommand(t, bin, config)
	cmd.Args = append(cmd.Args, "--http", "127.0.0.1:0")
	stderr := &testutil.SyncBuffer{}
	cmd.Stderr = stderr
	cs, err := mcpClient().Connect(mcpCtx(t), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() { cs.Close() })
	var base string
	eventuallyDaemon(t, "the ready line with http=", func() bool {
		m := mcpHTTPLine.FindStringSubmatch(stderr.String())
		if m != nil {
			base = "http://" + m[1]
		}
		return m != nil
	})
	if !strings.Contains(stderr.String(), "the approvals API "+base+"/api/approvals") {
		t.Fatalf("the startup log does not say where approvals are answered:\n%s", stderr.String())
	}
	done := make(chan string, 1)
	go func() {
		res, err := cs.CallTool(mcpCtx(t), &mcp.CallToolParams{Name: "agent_a", Arguments: map[string]any{"input": "tea"}})
		if err != nil {
			done <- err.Error()
			return
		}
		done <- mcpText(res)
	}()
	var id string
	eventuallyDaemon(t, "a pending approval on --http", func() bool {
		resp, err := http.Get(base + "/api/approvals")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var body struct {
			Approvals []struct {
				ApprovalID string `json:"approval_id"`
				Tool       string `json:"tool"`
			} `json:"approvals"`
		}
		if json.NewDecoder(resp.Body).Decode(&body) != nil || len(body.Approvals) == 0 {
			return false
		}
		id = body.Approvals[0].ApprovalID
		return body.Approvals[0].Tool == "mcp__notes__note"
	})
	resp, err := http.Post(base+"/api/approvals/"+id, "application/json", strings.NewReader(`{"decision":"allow"}`))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("allow: %v %v", resp, err)
	}
	resp.Body.Close()
	select {
	case text := <-done:
		if !strings.Contains(text, "noted tea") || ns.runs.Load() != 1 {
			t.Fatalf("the call answered %q, the tool ran %d times", text, ns.runs.Load())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the call did not complete:\n%s", stderr.String())
	}

	code, _, errOut := runCLI(t, nil, "mcp", "serve", "--config", config, "--http", "0.0.0.0:0")
	if code != exitFail || !strings.Contains(errOut, "api_token") {
		t.Fatalf("non-loopback --http without a token: exit %d\n%s", code, errOut)
	}
}

func eventuallyDaemon(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 20s: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
