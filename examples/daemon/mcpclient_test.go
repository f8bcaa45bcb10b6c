package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpToolServer is a streamable HTTP MCP server (go-sdk) that wants a key.
func mcpToolServer(t *testing.T, key string) *httptest.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "tools", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "greet", Description: "Greets."},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			Name string `json:"name"`
		}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Hello, " + in.Name}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Key") != key {
			http.Error(w, "no key", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close) // registered first, so it runs after the daemon stops
	return hs
}

const mcpKey = "mcp-key-value-0042"

func mcpClientConfig(url string) string {
	return fmt.Sprintf(`
agents:
  - id: a
approval:
  default: allow # these tests are about the transport, not the gate
mcp_servers:
  - name: tools
    url: %s/mcp
    headers:
      X-Key: ${MCP_KEY}
    timeout: 10s
`, url)
}

func TestMCPServersDoctor(t *testing.T) {
	hs := mcpToolServer(t, mcpKey)
	env := map[string]string{"MCP_KEY": mcpKey}
	code, stdout, stderr := runCLI(t, env, "doctor", "--config", writeConfig(t, mcpClientConfig(hs.URL)))
	if code != exitOK {
		t.Fatalf("doctor exit %d:\n%s\n%s", code, stdout, stderr)
	}
	want := "ok   mcp server tools: http " + hs.URL + "/mcp, 1 tools: mcp__tools__greet"
	if !strings.Contains(stdout, want) || !strings.Contains(stdout, strings.TrimPrefix(hs.URL, "http://")+"  (mcp server tools)") {
		t.Fatalf("doctor output lacks %q or the egress host:\n%s", want, stdout)
	}
	// A wrong key: the server fails, doctor exits 1, the key is not shown.
	code, stdout, _ = runCLI(t, map[string]string{"MCP_KEY": "wrong-key-value-77"}, "doctor", "--config", writeConfig(t, mcpClientConfig(hs.URL)))
	if code != exitFail || !strings.Contains(stdout, "FAIL mcp server tools: connect failed") || strings.Contains(stdout, "wrong-key-value-77") {
		t.Fatalf("doctor with a wrong key: exit %d\n%s", code, stdout)
	}
}

func TestMCPServersServe(t *testing.T) {
	hs := mcpToolServer(t, mcpKey)
	td := startDaemon(t, mcpClientConfig(hs.URL), map[string]string{"MCP_KEY": mcpKey})
	deadline := time.Now().Add(10 * time.Second)
	for !slices.ContainsFunc(td.d.engine.Tools(), func(t axocoatl.Tool) bool { return t.Name == "mcp__tools__greet" }) {
		if time.Now().After(deadline) {
			t.Fatalf("tool not registered:\n%s", td.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	res, err := td.d.engine.CallTool(context.Background(), axocoatl.ToolCall{AgentID: "a", Tool: "mcp__tools__greet", Arguments: json.RawMessage(`{"name":"Ada"}`)})
	if err != nil || res.Content != "Hello, Ada" {
		t.Fatalf("call: %+v %v", res, err)
	}
	logs := td.stderr.String()
	if !strings.Contains(logs, `msg="mcp server configured" server=tools transport=http`) || strings.Contains(logs, mcpKey) {
		t.Fatalf("startup log:\n%s", logs)
	}
}

func TestMCPServersValidate(t *testing.T) {
	code, _, stderr := runCLI(t, nil, "validate", "--config", writeConfig(t, `
agents:
  - id: a
mcp_servers:
  - name: ok
    command: npx
  - name: bad
    url: ftp://example.com/mcp
`))
	if code != exitFail || !strings.Contains(stderr, `:8: mcp_servers[1].url: "ftp://example.com/mcp" must be an absolute http or https URL`) {
		t.Fatalf("validate: exit %d\n%s", code, stderr)
	}
}
