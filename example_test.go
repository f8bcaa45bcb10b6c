package axocoatl_test

import (
	"context"
	"fmt"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/lattice"
)

func ExampleEngine_Execute() {
	engine := axocoatl.New(axocoatl.Options{})
	defer engine.Close(context.Background())

	if err := engine.AddAgent(agent.Spec{ID: "assistant"}, provider.EchoModel{}); err != nil {
		panic(err)
	}
	done, _ := engine.Bus().Subscribe(lattice.Filter{Types: []string{axocoatl.EventTaskCompleted}}, 0)

	res, err := engine.Execute(context.Background(), "assistant", "hello")
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Output)
	fmt.Println((<-done.Events()).Type)
	// Output:
	// hello
	// TaskCompleted
}

func ExampleEngine_Intercept() {
	engine := axocoatl.New(axocoatl.Options{})
	defer engine.Close(context.Background())

	engine.RegisterTool(axocoatl.Tool{
		Name: "mcp__fs__delete",
		Call: func(ctx context.Context, call axocoatl.ToolCall) (axocoatl.ToolResult, error) {
			return axocoatl.ToolResult{Content: "deleted"}, nil
		},
	})
	// A gate in front of every tool call: here, refuse deletions.
	engine.Intercept(func(ctx context.Context, call axocoatl.ToolCall, next axocoatl.ToolFunc) (axocoatl.ToolResult, error) {
		if call.Tool == "mcp__fs__delete" {
			return axocoatl.ToolResult{Content: "refused by policy", IsError: true}, nil
		}
		return next(ctx, call)
	})
	res, _ := engine.CallTool(context.Background(), axocoatl.ToolCall{Tool: "mcp__fs__delete"})
	fmt.Println(res.IsError, res.Content)
	// Output: true refused by policy
}
