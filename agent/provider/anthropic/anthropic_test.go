package anthropic_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/anthropic"
)

// With ANTHROPIC_API_KEY in the environment and no api_key, the request
// carries the variable's key, and the default model is the current one.
func TestKeyFromEnvironmentAndDefaultModel(t *testing.T) {
	var key, model string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key = r.Header.Get("X-Api-Key")
		var body struct {
			Model string `json:"model"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		model = body.Model
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"Hello!"}],"stop_reason":"end_turn"}`)
	}))
	defer srv.Close()
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
	m, err := anthropic.New(provider.Config{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := m.Generate(context.Background(), &agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "Hi"}}})
	if err != nil || resp.Content != "Hello!" {
		t.Fatalf("Generate = %+v, %v", resp, err)
	}
	if key != "sk-ant-from-env" {
		t.Fatalf("x-api-key %q, want the key of ANTHROPIC_API_KEY", key)
	}
	if model != anthropic.DefaultModel || model != m.DefaultModel() {
		t.Fatalf("model %q, want %q", model, anthropic.DefaultModel)
	}
}
