package mcpclient

import (
	"context"
	"slices"
	"testing"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Server "a" with tool "b__c" and server "a__b" with tool "c" both qualify
// to mcp__a__b__c. Exactly one of them may hold the name: the servers
// connect concurrently, and if both believed they held it, the loser's next
// tool refresh would unregister the winner's live tool. Repeated because
// the servers race.
func TestCrossServerNameHeldOnce(t *testing.T) {
	toolServer := func(tool string) *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: tool, Version: "1"}, nil)
		mcp.AddTool(s, &mcp.Tool{Name: tool}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: tool}}}, nil, nil
		})
		return s
	}
	dial := func(s *mcp.Server) func(context.Context) (mcp.Transport, error) {
		return func(ctx context.Context) (mcp.Transport, error) {
			ct, st := mcp.NewInMemoryTransports()
			if _, err := s.Connect(ctx, st, nil); err != nil {
				return nil, err
			}
			return ct, nil
		}
	}
	sa, sab := toolServer("b__c"), toolServer("c")
	const name = "mcp__a__b__c"
	for i := range 300 {
		cfg := Config{Servers: []ServerConfig{{Name: "a", Dial: dial(sa)}, {Name: "a__b", Dial: dial(sab)}}}
		e, m := startModule(t, cfg, nil)
		if err := m.Ready(context.Background()); err != nil {
			t.Fatal(err)
		}
		var holders []string
		for _, st := range m.Status() {
			if slices.Contains(st.Tools, name) {
				holders = append(holders, st.Name)
			}
		}
		if len(holders) != 1 {
			t.Fatalf("round %d: %s held by %v", i, name, holders)
		}
		res, err := e.CallTool(context.Background(), axocoatl.ToolCall{Tool: name})
		want := map[string]string{"a": "b__c", "a__b": "c"}[holders[0]]
		if err != nil || res.Content != want {
			t.Fatalf("round %d: held by %s, call answered %+v %v", i, holders[0], res, err)
		}
		if err := m.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}
