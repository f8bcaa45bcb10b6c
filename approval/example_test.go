package approval_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/approval"
	"github.com/axocoatl/axocoatl-go/lattice"
)

// A gate that asks before a file is deleted. Here the "human" is a
// goroutine that reads the ApprovalRequested event and allows the call;
// a host mounts the module's routes so that its UI can do the same.
func Example() {
	ctx := context.Background()
	e := axocoatl.New(axocoatl.Options{})
	defer e.Close(ctx)

	gate, err := approval.New(approval.Config{
		Default: approval.Prompt, // ask about anything no rule decides
		Rules:   []approval.Rule{{Tool: "fs_read_*", Decision: approval.Allow}},
	})
	if err != nil {
		panic(err)
	}
	if err := e.Use(ctx, gate); err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/approvals", gate)  // GET: pending approvals
	mux.Handle("/api/approvals/", gate) // POST /api/approvals/{id}: a verdict; decisions

	e.RegisterTool(axocoatl.Tool{Name: "fs_delete", Description: "Deletes a file.",
		Call: func(_ context.Context, c axocoatl.ToolCall) (axocoatl.ToolResult, error) {
			return axocoatl.ToolResult{Content: "deleted " + string(c.Arguments)}, nil
		}})

	requests, _ := e.Bus().Subscribe(lattice.Filter{Types: []string{approval.EventRequested}}, 1)
	go func() {
		ev := <-requests.Events()
		var p approval.PendingApproval
		_ = json.Unmarshal(ev.Payload, &p)
		fmt.Println("asked:", p.Tool, p.Arguments)
		_ = gate.Resolve(ctx, p.ApprovalID, approval.Allow, approval.Once, "example")
	}()

	res, _ := e.CallTool(ctx, axocoatl.ToolCall{Tool: "fs_delete", Arguments: json.RawMessage(`{"path":"/tmp/x"}`)})
	fmt.Println(res.Content)
	// Output:
	// asked: fs_delete {"path":"/tmp/x"}
	// deleted {"path":"/tmp/x"}
}
