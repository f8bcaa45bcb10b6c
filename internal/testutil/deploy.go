package testutil

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DeployPeers starts an MCP server "ops" whose tool deploy counts its
// calls, and an OpenAI-wire model that calls mcp__ops__deploy
// {"env":"prod"} once per run, then answers "done: " and what the tool
// said. Both close when the test ends (register them before starting the
// daemon that uses them, so they outlive it).
func DeployPeers(t *testing.T) (modelURL, mcpURL string, calls *atomic.Int32) {
	t.Helper()
	calls = new(atomic.Int32)
	tools := mcp.NewServer(&mcp.Implementation{Name: "ops", Version: "1"}, nil)
	mcp.AddTool(tools, &mcp.Tool{Name: "deploy", Description: "Deploys."},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			Env string `json:"env"`
		}) (*mcp.CallToolResult, any, error) {
			calls.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deployed to " + in.Env}}}, nil, nil
		})
	mcpSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return tools }, nil))
	t.Cleanup(func() {
		for ss := range tools.Sessions() {
			ss.Close()
		}
		mcpSrv.Close()
	})
	return ToolCallModel(t, "mcp__ops__deploy", `{"env":"prod"}`), mcpSrv.URL, calls
}

// ToolCallModel starts an OpenAI-wire model that calls tool with the JSON
// arguments args once per run, then answers "done: " and what the tool
// said. It closes when the test ends; its URL is returned.
func ToolCallModel(t testing.TB, tool, args string) string {
	t.Helper()
	call, err := json.Marshal(map[string]any{"id": "c1", "object": "chat.completion", "model": "m", "choices": []any{map[string]any{
		"index": 0, "finish_reason": "tool_calls", "message": map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{
			map[string]any{"id": "t1", "type": "function", "function": map[string]any{"name": tool, "arguments": args}},
		}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Role    string `json:"role"`
				Content any    `json:"content"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
			http.Error(w, "want a chat completion request with messages", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if last := req.Messages[len(req.Messages)-1]; last.Role == "tool" {
			fmt.Fprintf(w, `{"id":"c2","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":%q}}]}`, fmt.Sprint("done: ", last.Content))
			return
		}
		_, _ = w.Write(call)
	}))
	t.Cleanup(model.Close)
	return model.URL
}
