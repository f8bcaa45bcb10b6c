package builtin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/anthropic"
	"github.com/axocoatl/axocoatl-go/secret"
)

// Messages API request as it travels on the wire.
type messagesRequest struct {
	Model     string `json:"model"`
	MaxTokens int    `json:"max_tokens"`
	System    []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"system"`
	Messages []struct {
		Role    string         `json:"role"`
		Content []contentBlock `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		InputSchema map[string]any `json:"input_schema"`
	} `json:"tools"`
}

type contentBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	IsError   *bool           `json:"is_error"`
	Content   []contentBlock  `json:"content"`
}

// What the Messages API answers when the model wants two tools in one turn.
const messagesToolUse = `{
  "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
  "content": [
    {"type": "text", "text": "Let me check."},
    {"type": "tool_use", "id": "toolu_ok", "name": "lookup", "input": {"city": "Paris"}},
    {"type": "tool_use", "id": "toolu_bad", "name": "broken", "input": {"city": "Lyon"}}
  ],
  "stop_reason": "tool_use", "stop_sequence": null,
  "usage": {"input_tokens": 380, "output_tokens": 74}
}`

const messagesFinal = `{
  "id": "msg_02", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
  "content": [{"type": "text", "text": "Paris: 21°C and sunny."}],
  "stop_reason": "end_turn", "stop_sequence": null,
  "usage": {"input_tokens": 470, "output_tokens": 12}
}`

// Guards: bound providers.<kind>.max_tokens (docs/bounds.md).
func TestAnthropicToolUseRoundTrip(t *testing.T) {
	seen := toolRoundTrip(t, provider.Anthropic,
		func(url string) provider.Config {
			return provider.Config{BaseURL: url, APIKey: secret.Secret("sk-ant-test-123")}
		},
		agent.Spec{SystemPrompt: "You are terse."}, messagesToolUse, messagesFinal)
	for _, x := range seen {
		if x.Method != "POST" || x.Path != "/v1/messages" {
			t.Fatalf("request %s %s", x.Method, x.Path)
		}
		if got := x.Header.Get("X-Api-Key"); got != "sk-ant-test-123" {
			t.Fatalf("x-api-key %q", got)
		}
		if x.Header.Get("Anthropic-Version") == "" {
			t.Fatal("no anthropic-version header")
		}
	}

	var first messagesRequest
	if err := json.Unmarshal(seen[0].Body, &first); err != nil {
		t.Fatal(err)
	}
	if first.Model != anthropic.DefaultModel || first.MaxTokens != anthropic.DefaultMaxTokens {
		t.Fatalf("model/max_tokens: %s", seen[0].Body)
	}
	if len(first.System) != 1 || first.System[0].Type != "text" || first.System[0].Text != "You are terse." {
		t.Fatalf("system: %s", seen[0].Body)
	}
	if len(first.Messages) != 1 || first.Messages[0].Role != "user" || first.Messages[0].Content[0].Text != "Weather in Paris?" {
		t.Fatalf("messages: %s", seen[0].Body)
	}
	if len(first.Tools) != 2 || first.Tools[1].Name != "lookup" || first.Tools[1].Description != "looks things up" ||
		first.Tools[1].InputSchema["type"] != "object" || first.Tools[1].InputSchema["properties"] == nil ||
		first.Tools[1].InputSchema["required"] == nil {
		t.Fatalf("tools: %s", seen[0].Body)
	}

	// The second request replays the assistant turn (text + tool_use) and
	// carries both results in one user turn, the failed one with is_error.
	var second messagesRequest
	if err := json.Unmarshal(seen[1].Body, &second); err != nil {
		t.Fatal(err)
	}
	if len(second.Messages) != 3 {
		t.Fatalf("second request has %d messages: %s", len(second.Messages), seen[1].Body)
	}
	asst := second.Messages[1]
	if asst.Role != "assistant" || len(asst.Content) != 3 || asst.Content[0].Text != "Let me check." ||
		asst.Content[1].Type != "tool_use" || asst.Content[1].ID != "toolu_ok" || string(asst.Content[1].Input) != `{"city":"Paris"}` {
		t.Fatalf("assistant turn: %s", seen[1].Body)
	}
	results := second.Messages[2]
	if results.Role != "user" || len(results.Content) != 2 {
		t.Fatalf("results turn: %s", seen[1].Body)
	}
	byID := map[string]contentBlock{}
	for _, b := range results.Content {
		if b.Type != "tool_result" {
			t.Fatalf("block %q in results turn: %s", b.Type, seen[1].Body)
		}
		byID[b.ToolUseID] = b
	}
	ok, bad := byID["toolu_ok"], byID["toolu_bad"]
	if len(ok.Content) != 1 || ok.Content[0].Text != "21°C, sunny" || (ok.IsError != nil && *ok.IsError) {
		t.Fatalf("tool_result toolu_ok: %+v", ok)
	}
	if len(bad.Content) != 1 || !strings.Contains(bad.Content[0].Text, "backend down") || bad.IsError == nil || !*bad.IsError {
		t.Fatalf("tool_result toolu_bad: %+v", bad)
	}
}

// A base URL written with /v1 works as well as the bare host; with no
// api_key the key is ANTHROPIC_API_KEY (read when the model is built), and
// ANTHROPIC_BASE_URL is not read.
func TestAnthropicBaseWithV1KeyFromEnvironment(t *testing.T) {
	var rec recorder
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.record(r)
		writeJSON(w, 200, messagesFinal)
	}))
	defer srv.Close()
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")

	h := newHarness(t, provider.Anthropic, provider.Config{BaseURL: srv.URL + "/v1/", MaxTokens: 100}, agent.Spec{Model: "claude-haiku-4-5"})
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-changed-later")
	if _, err := h.engine.Execute(context.Background(), "a", "x"); err != nil {
		t.Fatal(err)
	}
	x := rec.all()[0]
	if x.Path != "/v1/messages" {
		t.Fatalf("path %s", x.Path)
	}
	if k := x.Header.Get("X-Api-Key"); k != "sk-ant-from-env" {
		t.Fatalf("x-api-key %q, want the one from the environment", k)
	}
	var body messagesRequest
	json.Unmarshal(x.Body, &body)
	if body.Model != "claude-haiku-4-5" || body.MaxTokens != 100 || body.System != nil {
		t.Fatalf("body: %s", x.Body)
	}
}
