package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
	v1client "github.com/a2aproject/a2a-go/v2/a2aclient"
	v1card "github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// hangingModelServer is an OpenAI-compatible endpoint that never answers:
// it holds each chat completion until the caller gives up, which makes an
// agent on it a slow run to cancel.
func hangingModelServer(t *testing.T) (url string, started chan struct{}) {
	started = make(chan struct{}, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Reading the body lets the server notice the client hanging up.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case started <- struct{}{}:
		default:
		}
		<-r.Context().Done()
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv.URL + "/v1", started
}

func TestDaemonA2AWithA2AGoClient(t *testing.T) {
	slowURL, started := hangingModelServer(t)
	td := startDaemon(t, `
server:
  addr: 127.0.0.1:0
  api_token: ${TOKEN}
providers:
  openai: { base_url: `+slowURL+`, api_key: none, max_retries: -1 }
agents:
  - { id: assistant, name: Assistant, provider: echo }
  - { id: second, name: Second, description: Also echoes., provider: echo }
  - { id: slow, provider: openai, model: m, timeout: 30s }
a2a:
  max_tasks: 50
`, map[string]string{"TOKEN": "tok-123-0123456789abc"})
	ctx := context.Background()

	// The card is public, names every agent and the token schemes.
	card, err := agentcard.DefaultResolver.Resolve(ctx, td.url)
	if err != nil {
		t.Fatal(err)
	}
	if card.URL != td.url+"/a2a" || card.ProtocolVersion != "0.3.0" || len(card.Skills) != 3 || card.SecuritySchemes["bearer"] == nil {
		t.Fatalf("card: %+v", card)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: bearer{"tok-123-0123456789abc", tr}}
	c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy()

	send := func(text string, meta map[string]any) *a2a03.Task {
		t.Helper()
		msg := a2a03.NewMessage(a2a03.MessageRoleUser, a2a03.TextPart{Text: text})
		msg.Metadata = meta
		res, err := c.SendMessage(ctx, &a2a03.MessageSendParams{Message: msg})
		if err != nil {
			t.Fatalf("SendMessage: %v", err)
		}
		task, ok := res.(*a2a03.Task)
		if !ok || task.Status.State != a2a03.TaskStateCompleted || task.Artifacts[0].Parts[0].(a2a03.TextPart).Text != text {
			t.Fatalf("SendMessage result: %#v", res)
		}
		return task
	}
	send("to the default", nil)
	named := send("to second", map[string]any{"receiver_id": "second"})
	got, err := c.GetTask(ctx, &a2a03.TaskQueryParams{ID: named.ID})
	if err != nil || got.Status.State != a2a03.TaskStateCompleted {
		t.Fatalf("GetTask: %v %+v", err, got)
	}
	if _, err := c.GetTask(ctx, &a2a03.TaskQueryParams{ID: "nope"}); !errors.Is(err, a2a03.ErrTaskNotFound) {
		t.Fatalf("GetTask unknown: %v", err)
	}

	// Streaming to the end.
	var kinds []string
	for ev, err := range c.SendStreamingMessage(ctx, &a2a03.MessageSendParams{Message: a2a03.NewMessage(a2a03.MessageRoleUser, a2a03.TextPart{Text: "stream"})}) {
		if err != nil {
			t.Fatal(err)
		}
		switch e := ev.(type) {
		case *a2a03.Task:
			kinds = append(kinds, "task")
		case *a2a03.TaskStatusUpdateEvent:
			kinds = append(kinds, string(e.Status.State))
		case *a2a03.TaskArtifactUpdateEvent:
			text := e.Artifact.Parts[0].(a2a03.TextPart).Text
			if n := len(kinds); n > 0 && e.Append && strings.HasPrefix(kinds[n-1], "artifact:") {
				kinds[n-1] += text // the text and the closing lastChunk update, as one
				continue
			}
			kinds = append(kinds, "artifact:"+text)
		}
	}
	if strings.Join(kinds, " ") != "task working artifact:stream completed" {
		t.Fatalf("stream events: %v", kinds)
	}

	// Cancel a slow run from a second call while it streams.
	var last a2a03.Event
	for ev, err := range c.SendStreamingMessage(ctx, &a2a03.MessageSendParams{Message: &a2a03.Message{
		ID: "m-slow", Role: a2a03.MessageRoleUser, Parts: a2a03.ContentParts{a2a03.TextPart{Text: "take your time"}},
		Metadata: map[string]any{"receiver_id": "slow"},
	}}) {
		if err != nil {
			t.Fatal(err)
		}
		if task, ok := ev.(*a2a03.Task); ok {
			<-started
			if _, err := c.CancelTask(ctx, &a2a03.TaskIDParams{ID: task.ID}); err != nil {
				t.Fatalf("CancelTask: %v", err)
			}
		}
		last = ev
	}
	if st, ok := last.(*a2a03.TaskStatusUpdateEvent); !ok || !st.Final || st.Status.State != a2a03.TaskStateCanceled {
		t.Fatalf("stream end after cancel: %#v", last)
	}

	// The Axocoatl surface, curl-shaped, behind the same token.
	r := td.do(t, http.MethodPost, "/a2a/tasks", `{"receiver_id":"second","input":{"q":1}}`, "X-API-Key", "tok-123-0123456789abc")
	var out struct {
		Status string
		Output struct{ Content string }
	}
	if err := json.Unmarshal(r.body, &out); err != nil || r.status != 200 || out.Status != "completed" || !strings.Contains(out.Output.Content, `"q": 1`) {
		t.Fatalf("/a2a/tasks: %d %s", r.status, r.body)
	}
	if r := td.do(t, http.MethodPost, "/a2a/tasks", `{"receiver_id":"second","input":"x"}`); r.status != http.StatusUnauthorized {
		t.Fatalf("/a2a/tasks without token: %d", r.status)
	}
	if r := td.do(t, http.MethodPost, "/a2a", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}`); r.status != http.StatusUnauthorized {
		t.Fatalf("/a2a without token: %d", r.status)
	}
	// Oversized JSON-RPC bodies get a JSON-RPC error with HTTP 200.
	big := `{"jsonrpc":"2.0","id":2,"method":"message/send","params":{"x":"` + strings.Repeat("a", 1<<20) + `"}}`
	if r := td.do(t, http.MethodPost, "/a2a", big, "Authorization", "Bearer tok-123-0123456789abc"); r.status != 200 || !strings.Contains(string(r.body), `"code":-32600`) {
		t.Fatalf("oversized JSON-RPC: %d %.200s", r.status, r.body)
	}
	// The per-agent card and the Axocoatl card.
	if r := td.do(t, http.MethodGet, "/a2a/agents/second/.well-known/agent-card.json", ""); r.status != 200 || r.json(t)["url"] != td.url+"/a2a/agents/second" {
		t.Fatalf("per-agent card: %d %s", r.status, r.body)
	}
	if r := td.do(t, http.MethodGet, "/.well-known/agent.json", ""); r.status != 200 || r.json(t)["endpoint"] != td.url+"/a2a/tasks" {
		t.Fatalf("axocoatl card: %d %s", r.status, r.body)
	}
}

func TestDaemonA2ASectionRejectsServerKeys(t *testing.T) {
	code, _, stderr := runCLI(t, nil, "validate", "--config", writeConfig(t, "a2a:\n  public_url: http://x\n"))
	if code != exitFail || !strings.Contains(stderr, "set server.public_url instead") {
		t.Fatalf("validate: %d %s", code, stderr)
	}
}

// A client that sends its body too slowly to the A2A and MCP routes is
// answered when server.body_timeout ends, as on /api, instead of holding a
// handler and a connection for as long as it likes (those routes skip the
// mux's body handling, so their handlers must bound the read themselves).
func TestSlowBodyTimesOutOnA2AAndMCP(t *testing.T) {
	td := startDaemon(t, "server:\n  body_timeout: 200ms\nagents:\n  - id: assistant\n", nil)
	for _, tc := range []struct {
		path, header string
		status       int
	}{
		{"/a2a", "", http.StatusOK}, // JSON-RPC: an error, with HTTP 200
		{"/a2a/agents/assistant", "", http.StatusOK},
		{"/a2a/tasks", "", http.StatusBadRequest},
		{"/mcp", "Accept: application/json, text/event-stream\r\n", http.StatusBadRequest},
	} {
		t.Run(strings.TrimPrefix(tc.path, "/"), func(t *testing.T) {
			conn, err := net.Dial("tcp", strings.TrimPrefix(td.url, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			start := time.Now()
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n%sContent-Length: 100\r\n\r\n{\"jsonrpc\":", tc.path, conn.RemoteAddr(), tc.header)
			conn.SetReadDeadline(time.Now().Add(3 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer within 3s (body_timeout 200ms): %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || time.Since(start) > 2*time.Second || !strings.Contains(string(body), "200ms") {
				t.Fatalf("status %d after %s: %s", resp.StatusCode, time.Since(start), body)
			}
		})
	}
}

// The body deadline ends with the body: an A2A run and an MCP call that
// last longer than server.body_timeout are answered from the model, not cut.
func TestA2AAndMCPRunsOutliveBodyTimeout(t *testing.T) {
	const runTime = 600 * time.Millisecond
	td := slowDaemon(t, runTime, "  body_timeout: 100ms\n")

	start := time.Now()
	r := td.do(t, "POST", "/a2a", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"messageId":"m","role":"user","parts":[{"kind":"text","text":"x"}]}}}`)
	if took := time.Since(start); r.status != http.StatusOK || !strings.Contains(string(r.body), `"state":"completed"`) || !strings.Contains(string(r.body), "slow answer") || took < runTime {
		t.Fatalf("a2a: %d after %s: %s", r.status, took, r.body)
	}

	cs, err := mcpClient().Connect(mcpCtx(t), &mcp.StreamableClientTransport{Endpoint: td.url + "/mcp", MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	start = time.Now()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "agent_slow", Arguments: map[string]any{"input": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); res.IsError || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "slow answer" || took < runTime {
		t.Fatalf("mcp: after %s: %+v", took, res)
	}
}

// The daemon's doors speak A2A 1.0 too: the a2a-go/v2 client over JSON-RPC
// and over HTTP+JSON (whose message:send and message:stream are routes of
// their own, colon and all), on the instance endpoint and on a
// per-agent one, with the token.
func TestDaemonA2AV1BothBindings(t *testing.T) {
	td := startDaemon(t, `
server:
  addr: 127.0.0.1:0
  api_token: ${TOKEN}
agents:
  - { id: assistant, name: Assistant, provider: echo }
  - { id: second, name: Second, provider: echo }
`, map[string]string{"TOKEN": "tok-123-0123456789abc"})
	ctx := context.Background()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: bearer{"tok-123-0123456789abc", tr}}
	for _, base := range []string{td.url, td.url + "/a2a/agents/second"} {
		card, err := v1card.NewResolver(hc).Resolve(ctx, base)
		if err != nil {
			t.Fatal(err)
		}
		for _, binding := range []a2a1.TransportProtocol{a2a1.TransportProtocolJSONRPC, a2a1.TransportProtocolHTTPJSON} {
			c, err := v1client.NewFromCard(ctx, card, v1client.WithJSONRPCTransport(hc), v1client.WithRESTTransport(hc),
				v1client.WithConfig(v1client.Config{PreferredTransports: []a2a1.TransportProtocol{binding}}))
			if err != nil {
				t.Fatal(err)
			}
			res, err := c.SendMessage(ctx, &a2a1.SendMessageRequest{Message: a2a1.NewMessage(a2a1.MessageRoleUser, a2a1.NewTextPart("one point oh"))})
			if err != nil {
				t.Fatalf("%s %s: %v", base, binding, err)
			}
			task, ok := res.(*a2a1.Task)
			if !ok || task.Status.State != a2a1.TaskStateCompleted || task.Artifacts[0].Parts[0].Text() != "one point oh" {
				t.Fatalf("%s %s: %#v", base, binding, res)
			}
			var last a2a1.Event
			for ev, err := range c.SendStreamingMessage(ctx, &a2a1.SendMessageRequest{Message: a2a1.NewMessage(a2a1.MessageRoleUser, a2a1.NewTextPart("s"))}) {
				if err != nil {
					t.Fatalf("%s %s stream: %v", base, binding, err)
				}
				last = ev
			}
			if s, ok := last.(*a2a1.TaskStatusUpdateEvent); !ok || s.Status.State != a2a1.TaskStateCompleted {
				t.Fatalf("%s %s stream end: %#v", base, binding, last)
			}
			got, err := c.GetTask(ctx, &a2a1.GetTaskRequest{ID: task.ID})
			if err != nil || got.Status.State != a2a1.TaskStateCompleted {
				t.Fatalf("%s %s GetTask: %v %+v", base, binding, err, got)
			}
			_ = c.Destroy()
		}
	}
}
