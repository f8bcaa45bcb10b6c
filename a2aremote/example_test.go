package a2aremote_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"

	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/a2aremote"
	"github.com/axocoatl/axocoatl-go/secret"
)

// greeter is a remote A2A agent that greets whoever the text names.
type greeter struct{}

func (greeter) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a1.Event, error] {
	return func(yield func(a2a1.Event, error) bool) {
		yield(a2a1.NewMessage(a2a1.MessageRoleAgent, a2a1.NewTextPart("Hello, "+ec.Message.Parts[0].Text())), nil)
	}
}

func (greeter) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a1.Event, error] {
	return func(yield func(a2a1.Event, error) bool) {
		yield(a2a1.NewStatusUpdateEvent(ec, a2a1.TaskStateCanceled, nil), nil)
	}
}

// Attach a remote A2A agent to an Engine: it becomes the tool a2a__<name>,
// taking {"input": "…"}. Here the remote is a2a-go/v2's reference server.
func Example() {
	mux := http.NewServeMux()
	remote := httptest.NewServer(mux)
	defer remote.Close()
	mux.Handle("/a2a", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(greeter{})))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(&a2a1.AgentCard{
		Name: "Greeter", Description: "Greets people.", Version: "1",
		SupportedInterfaces: []*a2a1.AgentInterface{a2a1.NewAgentInterface(remote.URL+"/a2a", a2a1.TransportProtocolJSONRPC)},
	}))

	ctx := context.Background()
	engine := axocoatl.New(axocoatl.Options{})
	defer engine.Close(ctx)
	m, err := a2aremote.New(a2aremote.Config{Agents: []a2aremote.AgentConfig{{
		Name:    "greeter",
		URL:     remote.URL, // the card is read at /.well-known/agent-card.json
		Headers: map[string]secret.Secret{"Authorization": "Bearer example-token"},
	}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := engine.Use(ctx, m); err != nil { // returns at once
		fmt.Println(err)
		return
	}
	if err := m.Ready(ctx); err != nil { // optional: wait for the first card read
		fmt.Println(err)
		return
	}
	res, err := engine.CallTool(ctx, axocoatl.ToolCall{Tool: "a2a__greeter", Arguments: json.RawMessage(`{"input":"Ada"}`)})
	fmt.Println(res.Content, err)
	st := m.Status()[0]
	fmt.Println(st.Tool, st.Resolved, st.Generation)
	// Output:
	// Hello, Ada <nil>
	// a2a__greeter true 1.0
}
