package mcpserver_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/mcpserver"
)

// Mount the agents at /mcp on a host's own mux, and call one with the
// go-sdk client. ServeStdio serves the same tools over stdin and stdout.
func Example() {
	ctx := context.Background()
	eng := axocoatl.New(axocoatl.Options{})
	defer eng.Close(ctx)
	if err := eng.AddAgent(agent.Spec{ID: "assistant", Description: "Answers questions."}, provider.EchoModel{}); err != nil {
		log.Fatal(err)
	}

	srv, err := mcpserver.New(mcpserver.Config{})
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.Use(ctx, srv); err != nil { // Engine.Close ends its sessions
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", srv)
	httpSrv := httptest.NewServer(mux)
	defer httpSrv.Close()

	client := mcp.NewClient(&mcp.Implementation{Name: "example", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: httpSrv.URL + "/mcp"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range tools.Tools {
		fmt.Printf("%s: %s\n", t.Name, t.Description)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_assistant", Arguments: map[string]any{"input": "hello"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Content[0].(*mcp.TextContent).Text, res.IsError)
	// Output:
	// agent_assistant: Answers questions.
	// hello false
}
