package testutil

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	mcpgoclient "github.com/mark3labs/mcp-go/client"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// AgentInputSchema is the input schema of every agent_<id> MCP tool.
const AgentInputSchema = `{"type":"object","properties":{"input":{"type":"string"},` +
	`"conversation_id":{"type":"string","description":"Optional. \"new\" starts a conversation with the agent; pass the conversation_id a result returned to continue it. Absent: a one-shot call, remembered nowhere."}},` +
	`"required":["input"]}`

// CheckMCPGoAgents drives an axocoatl MCP server with a started
// mark3labs/mcp-go client. Like CheckAgentTools, the server must have an
// agent "echo" that repeats its input and an agent "broken" whose model
// fails with "upstream exploded". It initializes asking for version (the
// client's own preference, 2026-07-28 and server/discover, when it is that
// era's) and expects it negotiated,
// checks every tool's input schema, calls agent_echo (a result),
// agent_broken (a tool error), agent_echo without input (a tool error) and
// an unknown tool (a protocol error), and returns what initialize and
// tools/list answered for the caller's own checks.
func CheckMCPGoAgents(t testing.TB, ctx context.Context, c *mcpgoclient.Client, version string) (*mcpgo.InitializeResult, []mcpgo.Tool) {
	t.Helper()
	init := mcpgo.InitializeRequest{}
	init.Params.ClientInfo = mcpgo.Implementation{Name: "mcp-go-test", Version: "1"}
	if !mcpgo.IsModernProtocol(version) {
		init.Params.ProtocolVersion = version // pinned: no server/discover probe
	}
	res, err := c.Initialize(ctx, init)
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	if res.ProtocolVersion != version {
		t.Errorf("mcp-go negotiated %q, want %s", res.ProtocolVersion, version)
	}
	list, err := c.ListTools(ctx, mcpgo.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var want any
	json.Unmarshal([]byte(AgentInputSchema), &want)
	found := map[string]bool{}
	for _, tool := range list.Tools {
		found[tool.Name] = true
		raw, _ := json.Marshal(tool)
		var m struct{ InputSchema json.RawMessage }
		json.Unmarshal(raw, &m)
		var got any
		if json.Unmarshal(m.InputSchema, &got) != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s schema as mcp-go sees it: %s", tool.Name, m.InputSchema)
		}
	}
	if !found["agent_echo"] || !found["agent_broken"] {
		t.Errorf("tools: %v", found)
	}
	call := func(name string, args any) (*mcpgo.CallToolResult, error) {
		req := mcpgo.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = name, args
		return c.CallTool(ctx, req)
	}
	got, err := call("agent_echo", map[string]any{"input": "via mcp-go"})
	if err != nil || got.IsError || mcpgo.GetTextFromContent(got.Content[0]) != "via mcp-go" {
		t.Errorf("agent_echo: %+v %v", got, err)
	}
	got, err = call("agent_broken", map[string]any{"input": "x"})
	if err != nil || !got.IsError || !strings.Contains(mcpgo.GetTextFromContent(got.Content[0]), "upstream exploded") {
		t.Errorf("agent_broken: %+v %v", got, err)
	}
	got, err = call("agent_echo", map[string]any{})
	if err != nil || !got.IsError {
		t.Errorf("missing input: %+v %v", got, err)
	}
	if _, err := call("agent_nobody", map[string]any{"input": "x"}); err == nil {
		t.Errorf("unknown tool: no error")
	}
	return res, list.Tools
}
