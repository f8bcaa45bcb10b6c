package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

// The example's promise, checked with the clients others would use: A2A
// and MCP mounted under /ai/ of the host's own mux work for the a2a-go
// client (card resolved from <base>/ai, cards carrying the prefixed URLs)
// and the go-sdk MCP client (at <base>/ai/mcp), the host's own routes work
// beside them, the prefixed doors are guarded, and shutting down while an
// MCP client is still connected returns promptly and leaves no goroutine.
func TestEmbedUnderPrefix(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	var logs testutil.SyncBuffer
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- serve(ctx, ln, slog.New(slog.NewTextHandler(&logs, nil))) }()

	// One transport for every client, so the test can close its idle
	// connections before looking for leaked goroutines.
	tr := &http.Transport{}
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	// The host's own routes.
	if status, body := do(t, hc, "GET", base+"/", ""); status != 200 || body != "the host's own page\n" {
		t.Fatalf("GET /: %d %q", status, body)
	}
	if status, body := do(t, hc, "POST", base+"/ask", "what is MCP?"); status != 200 || body != "what is MCP?\n" {
		t.Fatalf("POST /ask: %d %q", status, body)
	}

	// A2A with the a2a-go client: the card is found from the prefixed
	// base URL and names the prefixed endpoint.
	card, err := agentcard.NewResolver(hc).Resolve(ctx, base+"/ai")
	if err != nil {
		t.Fatalf("resolve the card from %s/ai: %v", base, err)
	}
	if card.URL != base+"/ai/a2a" || len(card.AdditionalInterfaces) != 1 || card.AdditionalInterfaces[0].URL != base+"/ai/a2a" {
		t.Fatalf("card url %q, interfaces %+v: want %s/ai/a2a", card.URL, card.AdditionalInterfaces, base)
	}
	var skills []string
	for _, s := range card.Skills {
		skills = append(skills, s.ID)
	}
	if !slices.Equal(skills, []string{"helper", "shouter"}) {
		t.Fatalf("card skills %v", skills)
	}
	client, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Destroy()
	send := func(c *a2aclient.Client, text string, meta map[string]any) string {
		t.Helper()
		msg := a2a03.NewMessage(a2a03.MessageRoleUser, a2a03.TextPart{Text: text})
		msg.Metadata = meta
		res, err := c.SendMessage(ctx, &a2a03.MessageSendParams{Message: msg})
		if err != nil {
			t.Fatalf("SendMessage %q: %v", text, err)
		}
		task, ok := res.(*a2a03.Task)
		if !ok || task.Status.State != a2a03.TaskStateCompleted || len(task.Artifacts) != 1 || len(task.Artifacts[0].Parts) != 1 {
			t.Fatalf("SendMessage %q: %#v", text, res)
		}
		out, _ := task.Artifacts[0].Parts[0].(a2a03.TextPart)
		return out.Text
	}
	if got := send(client, "hello a2a", map[string]any{"receiver_id": "shouter"}); got != "HELLO A2A" {
		t.Fatalf("A2A answer of shouter: %q", got)
	}
	if got := send(client, "Hello first", nil); got != "Hello first" { // no receiver: the first agent
		t.Fatalf("A2A answer of helper: %q", got)
	}

	// One agent as its own A2A endpoint, under the prefix too.
	one, err := agentcard.NewResolver(hc).Resolve(ctx, base+"/ai/a2a/agents/shouter")
	if err != nil {
		t.Fatal(err)
	}
	if one.URL != base+"/ai/a2a/agents/shouter" || len(one.Skills) != 1 || one.Skills[0].ID != "shouter" {
		t.Fatalf("shouter's card: url %q, skills %+v", one.URL, one.Skills)
	}
	oneClient, err := a2aclient.NewFromCard(ctx, one, a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		t.Fatal(err)
	}
	defer oneClient.Destroy()
	if got := send(oneClient, "just me", nil); got != "JUST ME" {
		t.Fatalf("A2A answer at shouter's own endpoint: %q", got)
	}

	// The Axocoatl card, and a task sent to the endpoint it names.
	status, body := do(t, hc, "GET", base+"/ai/.well-known/agent.json", "")
	var axo struct{ URL, Endpoint string }
	if err := json.Unmarshal([]byte(body), &axo); status != 200 || err != nil {
		t.Fatalf("Axocoatl card: %d %q %v", status, body, err)
	}
	if axo.URL != base+"/ai" || axo.Endpoint != base+"/ai/a2a/tasks" {
		t.Fatalf("Axocoatl card url %q endpoint %q: want %s/ai and %s/ai/a2a/tasks", axo.URL, axo.Endpoint, base, base)
	}
	status, body = do(t, hc, "POST", axo.Endpoint, `{"receiver_id":"shouter","input":"task"}`)
	if status != 200 || !strings.Contains(body, `"status":"completed"`) || !strings.Contains(body, `"content":"TASK"`) {
		t.Fatalf("POST %s: %d %s", axo.Endpoint, status, body)
	}

	// MCP with the go-sdk client at the prefixed endpoint.
	mc := mcp.NewClient(&mcp.Implementation{Name: "embed-test", Version: "1"}, nil)
	cs, err := mc.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/ai/mcp", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatalf("MCP connect to %s/ai/mcp: %v", base, err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	hints := map[string][2]bool{} // tool → destructive, open world
	for _, tool := range tools.Tools {
		a := tool.Annotations
		if a == nil || a.DestructiveHint == nil || a.OpenWorldHint == nil {
			t.Fatalf("tool %s without destructive/open-world hints: %+v", tool.Name, a)
		}
		hints[tool.Name] = [2]bool{*a.DestructiveHint, *a.OpenWorldHint}
	}
	// The echo model declares itself offline; the host's own model does
	// not, so its agent (which may call any tool) is destructive and open.
	if len(hints) != 2 || hints["agent_helper"] != [2]bool{false, false} || hints["agent_shouter"] != [2]bool{true, true} {
		t.Fatalf("MCP tools (destructive, open world): %v", hints)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_shouter", Arguments: map[string]any{"input": "over mcp"}})
	if err != nil {
		t.Fatal(err)
	}
	if text, ok := res.Content[0].(*mcp.TextContent); res.IsError || len(res.Content) != 1 || !ok || text.Text != "OVER MCP" {
		t.Fatalf("agent_shouter result: %+v", res)
	}

	// The prefixed doors are behind the Engine's guard by default: a
	// token-less host answers only Host names of this machine (DNS
	// rebinding), whatever the door.
	for _, path := range []string{"/ai/mcp", "/ai/a2a", "/ai/a2a/tasks"} {
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(`{}`))
		req.Host = "evil.example"
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("POST %s with Host evil.example: %d, want 403", path, resp.StatusCode)
		}
	}

	// Shut down with the MCP session (and its GET stream) still open:
	// serve must not wait for the client to leave.
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("serve did not return within 5s of its context ending (an open MCP stream holding Shutdown?)")
	}
	if !strings.Contains(logs.String(), "type=TaskCompleted") {
		t.Fatalf("finished tasks not logged from the lattice:\n%s", logs.String())
	}
	cs.Close()
	client.Destroy()
	oneClient.Destroy()
	tr.CloseIdleConnections()
	goleak.VerifyNone(t)
}

func do(t *testing.T, hc *http.Client, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
