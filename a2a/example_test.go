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

// Mount the A2A doors under a prefix of a host's own mux; other agents then
// reach the Engine's agents through the cards, POST /ai/a2a/tasks and
// POST /ai/a2a.
func ExampleNew() {
	eng := axocoatl.New(axocoatl.Options{HTTP: axocoatl.HTTPOptions{PublicURL: "https://agents.example.com"}})
	defer eng.Close(context.Background())
	_ = eng.AddAgent(agent.Spec{ID: "assistant"}, provider.EchoModel{})

	h, err := a2a.New(a2a.Config{})
	if err != nil {
		panic(err)
	}
	if err := eng.Use(context.Background(), h); err != nil { // Engine.Close ends the handler's runs too
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ai/", http.StripPrefix("/ai", h))

	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/ai/a2a/tasks", "application/json",
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
