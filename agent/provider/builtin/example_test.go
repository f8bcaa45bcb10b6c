package builtin_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/builtin"
	"github.com/axocoatl/axocoatl-go/secret"
)

// A model from the config's providers section: here an OpenAI-compatible
// server (played by httptest) with a key and a per-call timeout.
func ExampleNew() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4o-mini",
			"choices":[{"index":0,"message":{"role":"assistant","content":"Hello!"},"finish_reason":"stop"}]}`)
	}))
	defer srv.Close()

	model, err := builtin.New(provider.OpenAI, provider.Config{
		BaseURL: srv.URL + "/v1",
		APIKey:  secret.Secret("sk-..."),
		Timeout: 30 * time.Second,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := model.Generate(context.Background(), &agent.Request{
		Messages: []agent.Message{{Role: agent.RoleUser, Content: "Hi"}},
	})
	if err != nil {
		fmt.Println(err) // e.g. "openai: HTTP 401: Incorrect API key provided."
		return
	}
	fmt.Println(resp.Content)
	// Output: Hello!
}

// The doctor's probe: one cheap authenticated call, a clear error or nil.
func ExampleCheck() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
	}))
	defer srv.Close()

	err := builtin.Check(context.Background(), provider.Anthropic, provider.Config{BaseURL: srv.URL, APIKey: "sk-ant-wrong"})
	fmt.Println(err)
	// Output: anthropic: HTTP 401: invalid x-api-key
}
