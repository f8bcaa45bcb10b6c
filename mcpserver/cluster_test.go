package mcpserver_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/mcpserver"
)

// An agent of another daemon (Engine.AddRemoteAgent, as the cluster module
// adds them) becomes a tool at once, with where it runs in _meta, and the
// client is told; when its daemon leaves, the tool goes and the client is
// told again.
func TestRemoteAgentTools(t *testing.T) {
	f := newFixture(t, mcpserver.Config{})
	changed := make(chan struct{}, 8)
	cs := connectInMemory(t, f, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}})
	tool := func() *mcp.Tool {
		list, err := cs.ListTools(ctxT(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		if i := slices.IndexFunc(list.Tools, func(x *mcp.Tool) bool { return x.Name == "agent_far" }); i >= 0 {
			return list.Tools[i]
		}
		return nil
	}
	remove, err := f.eng.AddRemoteAgent(axocoatl.AgentInfo{Spec: agent.Spec{ID: "far", Description: "Runs elsewhere."}, Node: "node-x"},
		func(_ context.Context, req axocoatl.Request) (axocoatl.Result, error) {
			return axocoatl.Result{Output: "far says " + req.Input}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := recv(changed, 5*time.Second); err != nil {
		t.Fatal("no tools/list_changed when a remote agent came")
	}
	if x := tool(); x == nil || x.Meta[mcpserver.MetaNode] != "node-x" || x.Description != "Runs elsewhere." {
		t.Fatalf("agent_far: %+v", x)
	}
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "agent_far", Arguments: map[string]any{"input": "hi"}})
	if err != nil || textOf(t, res) != "far says hi" {
		t.Fatalf("agent_far: %v %v", res, err)
	}
	remove()
	if _, err := recv(changed, 5*time.Second); err != nil {
		t.Fatal("no tools/list_changed when the remote agent left")
	}
	if x := tool(); x != nil {
		t.Fatalf("agent_far still listed: %+v", x)
	}
	if x, _ := f.eng.Agent("slow"); x.ID != "slow" {
		t.Fatal("local agents changed")
	}
}
