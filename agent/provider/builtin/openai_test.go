package builtin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/openai"
	"github.com/axocoatl/axocoatl-go/secret"
)

// Chat Completions request as it travels on the wire.
type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCallID string          `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Type     string `json:"type"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []chatTool `json:"tools"`
}

type chatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		Parameters  map[string]any `json:"parameters"`
	} `json:"function"`
}

// What OpenAI answers when the model wants two tools in one turn.
const chatToolCalls = `{
  "id": "chatcmpl-1", "object": "chat.completion", "created": 1764460000, "model": "gpt-4o-mini",
  "choices": [{
    "index": 0,
    "message": {
      "role": "assistant", "content": null, "refusal": null,
      "tool_calls": [
        {"id": "call_ok", "type": "function", "function": {"name": "lookup", "arguments": "{\"city\":\"Paris\"}"}},
        {"id": "call_bad", "type": "function", "function": {"name": "broken", "arguments": "{\"city\":\"Lyon\"}"}}
      ]
    },
    "logprobs": null, "finish_reason": "tool_calls"
  }],
  "usage": {"prompt_tokens": 52, "completion_tokens": 31, "total_tokens": 83},
  "system_fingerprint": "fp_1"
}`

const chatFinal = `{
  "id": "chatcmpl-2", "object": "chat.completion", "created": 1764460001, "model": "gpt-4o-mini",
  "choices": [{"index": 0, "message": {"role": "assistant", "content": "Paris: 21°C and sunny.", "refusal": null}, "logprobs": null, "finish_reason": "stop"}],
  "usage": {"prompt_tokens": 90, "completion_tokens": 9, "total_tokens": 99}
}`

func TestOpenAIToolCallRoundTrip(t *testing.T) {
	seen := toolRoundTrip(t, provider.OpenAI,
		func(url string) provider.Config {
			return provider.Config{BaseURL: url + "/v1", APIKey: secret.Secret("sk-test-123")}
		},
		agent.Spec{Model: "gpt-4o-mini", SystemPrompt: "You are terse."}, chatToolCalls, chatFinal)
	for _, x := range seen {
		if x.Method != "POST" || x.Path != "/v1/chat/completions" {
			t.Fatalf("request %s %s", x.Method, x.Path)
		}
		if got := x.Header.Get("Authorization"); got != "Bearer sk-test-123" {
			t.Fatalf("Authorization %q", got)
		}
	}

	var first chatRequest
	if err := json.Unmarshal(seen[0].Body, &first); err != nil {
		t.Fatal(err)
	}
	if first.Model != "gpt-4o-mini" || len(first.Messages) != 2 ||
		first.Messages[0].Role != "system" || string(first.Messages[0].Content) != `"You are terse."` ||
		first.Messages[1].Role != "user" || string(first.Messages[1].Content) != `"Weather in Paris?"` {
		t.Fatalf("first request: %s", seen[0].Body)
	}
	if len(first.Tools) != 2 {
		t.Fatalf("tools: %s", seen[0].Body)
	}
	tool := first.Tools[slices.IndexFunc(first.Tools, func(x chatTool) bool { return x.Function.Name == "lookup" })]
	if tool.Type != "function" || tool.Function.Description != "looks things up" ||
		tool.Function.Parameters["type"] != "object" || tool.Function.Parameters["properties"] == nil {
		t.Fatalf("lookup tool on the wire: %+v", tool)
	}

	// The second request replays the assistant turn and carries both results.
	var second chatRequest
	if err := json.Unmarshal(seen[1].Body, &second); err != nil {
		t.Fatal(err)
	}
	if len(second.Messages) != 5 {
		t.Fatalf("second request has %d messages: %s", len(second.Messages), seen[1].Body)
	}
	asst := second.Messages[2]
	if asst.Role != "assistant" || len(asst.ToolCalls) != 2 || asst.ToolCalls[0].ID != "call_ok" ||
		asst.ToolCalls[0].Type != "function" || asst.ToolCalls[0].Function.Arguments != `{"city":"Paris"}` {
		t.Fatalf("assistant turn: %s", seen[1].Body)
	}
	results := map[string]string{}
	for _, m := range second.Messages[3:] {
		if m.Role != "tool" {
			t.Fatalf("want tool messages: %s", seen[1].Body)
		}
		var s string
		json.Unmarshal(m.Content, &s)
		results[m.ToolCallID] = s
	}
	if results["call_ok"] != "21°C, sunny" {
		t.Fatalf("tool result for call_ok: %q", results["call_ok"])
	}
	if !strings.HasPrefix(results["call_bad"], "Error: ") || !strings.Contains(results["call_bad"], "backend down") {
		t.Fatalf("failed tool result for call_bad: %q", results["call_bad"])
	}
}

// Ollama: the bare host of the contract's example reaches /v1, and no
// Authorization header is sent without a key.
func TestOllamaBareHostNoKey(t *testing.T) {
	var rec recorder
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.record(r)
		writeJSON(w, 200, `{"id":"chatcmpl-9","object":"chat.completion","created":1764460000,"model":"llama3.2",
		  "system_fingerprint":"fp_ollama","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],
		  "usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	defer srv.Close()

	h := newHarness(t, provider.Ollama, provider.Config{BaseURL: srv.URL}, agent.Spec{})
	res, err := h.engine.Execute(context.Background(), "a", "hello")
	if err != nil || res.Output != "hi" {
		t.Fatalf("Execute = %q, %v", res.Output, err)
	}
	seen := rec.all()
	if len(seen) != 1 || seen[0].Path != "/v1/chat/completions" {
		t.Fatalf("requests: %+v", seen)
	}
	if a := seen[0].Header.Get("Authorization"); a != "" {
		t.Fatalf("Authorization %q sent without a key", a)
	}
	var body chatRequest
	json.Unmarshal(seen[0].Body, &body)
	if body.Model != openai.DefaultOllamaModel || body.Tools != nil {
		t.Fatalf("body: %s", seen[0].Body)
	}
}

// Keys the way the SDKs take them: with no api_key, openai sends
// OPENAI_API_KEY, read once when the model is built; api_key wins over it;
// ollama never sends it (it is OpenAI's key, not the local server's); and
// OPENAI_BASE_URL is not read (the request reaches the configured server).
func TestOpenAIKeyFromEnvironment(t *testing.T) {
	var rec recorder
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.record(r)
		writeJSON(w, 200, chatFinal)
	}))
	defer srv.Close()
	t.Setenv("OPENAI_API_KEY", "sk-from-env")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")

	fromEnv := newHarness(t, provider.OpenAI, provider.Config{BaseURL: srv.URL + "/v1"}, agent.Spec{})
	fromConfig := newHarness(t, provider.OpenAI, provider.Config{BaseURL: srv.URL + "/v1", APIKey: "sk-from-config"}, agent.Spec{})
	ollama := newHarness(t, provider.Ollama, provider.Config{BaseURL: srv.URL}, agent.Spec{})
	t.Setenv("OPENAI_API_KEY", "sk-changed-later") // read when built, not per request
	for _, h := range []*harness{fromEnv, fromConfig, ollama} {
		if _, err := h.engine.Execute(context.Background(), "a", "x"); err != nil {
			t.Fatal(err)
		}
	}
	seen := rec.all()
	if len(seen) != 3 {
		t.Fatalf("%d requests", len(seen))
	}
	for i, want := range []string{"Bearer sk-from-env", "Bearer sk-from-config", ""} {
		if got := seen[i].Header.Get("Authorization"); got != want {
			t.Errorf("request %d: Authorization %q, want %q", i, got, want)
		}
	}
}

// One model serves many runs at once.
func TestConcurrentGenerate(t *testing.T) {
	for _, wi := range wires {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, 200, wi.ok)
		}))
		h := newHarness(t, wi.kind, provider.Config{BaseURL: wi.base(srv.URL)}, agent.Spec{})
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for range 16 {
			wg.Go(func() {
				if _, err := h.engine.Execute(context.Background(), "a", "hi"); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		srv.Close()
		close(errs)
		for err := range errs {
			t.Errorf("%s: %v", wi.kind, err)
		}
	}
}

// Compatible servers vary: a tool call without an id, arguments sent as an
// object or as an empty string. The run still works and each result names
// its call.
func TestOpenAICompatibleVariants(t *testing.T) {
	var rec recorder
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n, _ := rec.record(r); n == 1 {
			writeJSON(w, 200, `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls",
			  "message":{"role":"assistant","content":"","tool_calls":[
			    {"type":"function","function":{"name":"lookup","arguments":{"city":"Paris"}}},
			    {"id":"c2","type":"function","function":{"name":"lookup","arguments":""}}]}}]}`)
			return
		}
		writeJSON(w, 200, chatFinal)
	}))
	defer srv.Close()
	h := newHarness(t, provider.OpenAI, provider.Config{BaseURL: srv.URL}, agent.Spec{})
	var lookup toolRecorder
	lookup.register(t, h.engine, "lookup", "ok", false)
	if _, err := h.engine.Execute(context.Background(), "a", "x"); err != nil {
		t.Fatal(err)
	}
	got := lookup.args()
	slices.Sort(got)
	if len(got) != 2 || got[0] != `{"city":"Paris"}` || got[1] != `{}` {
		t.Fatalf("tool arguments %q", got)
	}
	var second chatRequest
	json.Unmarshal(rec.all()[1].Body, &second)
	ids := []string{second.Messages[1].ToolCalls[0].ID, second.Messages[2].ToolCallID, second.Messages[3].ToolCallID}
	if ids[0] == "" || ids[0] != ids[1] || ids[2] != "c2" {
		t.Fatalf("tool call ids replayed as %q: %s", ids, rec.all()[1].Body)
	}
}
