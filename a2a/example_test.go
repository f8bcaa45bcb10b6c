package a2a_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/a2a"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
)

// Mount the A2A doors on a host's own mux; other agents then reach the
// Engine's agents through the cards, POST /a2a/tasks and POST /a2a.
func ExampleHandler_Mount() {
	eng := axocoatl.New(axocoatl.Options{})
	defer eng.Close(context.Background())
	_ = eng.AddAgent(agent.Spec{ID: "assistant"}, provider.EchoModel{})

	h, err := a2a.New(eng, a2a.Config{PublicURL: "https://agents.example.com"})
	if err != nil {
		panic(err)
	}
	_ = eng.Use(context.Background(), h) // Engine.Close now ends the handler's runs too
	mux := http.NewServeMux()
	h.Mount(mux)

	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/a2a/tasks", "application/json",
		strings.NewReader(`{"id":"t-1","receiver_id":"assistant","input":"hello"}`))
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Print(string(body))
	// Output:
	// {"task_id":"t-1","receiver_id":"assistant","status":"completed","output":{"content":"hello"},"error":null}
}
