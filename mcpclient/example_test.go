package mcpclient_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/mcpclient"
	"github.com/axocoatl/axocoatl-go/secret"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Attach MCP servers to an Engine: their tools become mcp__<server>__<tool>.
// A stdio server is configured with Command (and Env), an HTTP one with URL
// (and Headers); here an in-process go-sdk server is reached through Dial.
func Example() {
	srv := mcp.NewServer(&mcp.Implementation{Name: "greeter", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "greet", Description: "Greets someone."},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct{ Name string }) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Hello, " + in.Name}}}, nil, nil
		})

	ctx := context.Background()
	engine := axocoatl.New(axocoatl.Options{})
	defer engine.Close(ctx)

	client, err := mcpclient.New(mcpclient.Config{Servers: []mcpclient.ServerConfig{
		{
			Name: "greeter",
			Dial: func(ctx context.Context) (mcp.Transport, error) {
				ct, st := mcp.NewInMemoryTransports()
				_, err := srv.Connect(ctx, st, nil)
				return ct, err
			},
			Timeout: 10 * time.Second,
		},
		// The forms a config file uses (not started in this example):
		// {Name: "fs", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/srv"},
		//  Env: map[string]secret.Secret{"API_KEY": "…"}},
		// {Name: "search", URL: "https://mcp.example.com/mcp",
		//  Headers: map[string]secret.Secret{"Authorization": "Bearer …"}},
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := engine.Use(ctx, client); err != nil { // returns at once
		fmt.Println(err)
		return
	}
	if err := client.Ready(ctx); err != nil { // optional: wait for the first connects
		fmt.Println(err)
		return
	}
	res, err := engine.CallTool(ctx, axocoatl.ToolCall{Tool: "mcp__greeter__greet", Arguments: json.RawMessage(`{"Name":"Ada"}`)})
	fmt.Println(res.Content, err)
	fmt.Println(client.Status()[0].Tools)
	// Output:
	// Hello, Ada <nil>
	// [mcp__greeter__greet]
}

var _ secret.Secret // the Secret type holds env and header values
