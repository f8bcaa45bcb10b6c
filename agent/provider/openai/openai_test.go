package openai_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/openai"
)

const answer = `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4o-mini",
	"choices":[{"index":0,"message":{"role":"assistant","content":"Hello!"},"finish_reason":"stop"}]}`

func server(t *testing.T, auth *string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*auth = r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func hi() *agent.Request {
	return &agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "Hi"}}}
}

// With OPENAI_API_KEY in the environment and no api_key, the request
// carries the variable's key; with neither, none (and provider.CheckKey,
// which the config layer runs before serving, refuses the config).
func TestKeyFromEnvironment(t *testing.T) {
	var auth string
	srv := server(t, &auth)
	t.Setenv("OPENAI_API_KEY", "sk-from-env")
	m, err := openai.New(provider.Config{BaseURL: srv.URL + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Generate(context.Background(), hi()); err != nil {
		t.Fatal(err)
	}
	if auth != "Bearer sk-from-env" {
		t.Fatalf("Authorization %q, want the key of OPENAI_API_KEY", auth)
	}

	t.Setenv("OPENAI_API_KEY", "")
	m, err = openai.New(provider.Config{BaseURL: srv.URL + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Generate(context.Background(), hi()); err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		t.Fatalf("Authorization %q sent with no key anywhere", auth)
	}
}

// A model for an OpenAI-compatible server (played by httptest). Its key is
// api_key, else OPENAI_API_KEY; its model is the agent's, else
// openai.DefaultModel.
func ExampleNew() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer)
	}))
	defer srv.Close()

	model, err := openai.New(provider.Config{BaseURL: srv.URL + "/v1", APIKey: "sk-..."})
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := model.Generate(context.Background(), &agent.Request{
		Model:    "gpt-4o-mini",
		Messages: []agent.Message{{Role: agent.RoleUser, Content: "Hi"}},
	})
	if err != nil {
		fmt.Println(err) // e.g. "openai: HTTP 401: Incorrect API key provided."
		return
	}
	fmt.Println(resp.Content)
	// Output: Hello!
}
