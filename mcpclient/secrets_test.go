package mcpclient

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/openai"
	"github.com/axocoatl/axocoatl-go/lattice"
)

// A 4-character configured secret and a credential the daemon only
// inherited (a *_TOKEN of its environment) that a child prints reach no log
// line, event, Status or Check (doctor) error.
func TestShortAndInheritedSecretsScrubbed(t *testing.T) {
	const short, inherited = "w9Zq", "ghp_inheritedTokenValue42"
	t.Setenv("HOST_GH_TOKEN", inherited)
	sc := helperServer("leaky", "print-secrets")
	sc.Env["SHORT_SECRET"] = short
	sc.Env["TINY"] = "ab" // too short to redact: a warning names it
	sc.Timeout = 5 * time.Second

	leaks := func(where, text string) {
		t.Helper()
		for _, s := range []string{short, inherited} {
			if strings.Contains(text, s) {
				t.Errorf("%s contains %q: %s", where, s, text)
			}
		}
	}
	log, logs := debugLogger()
	_, err := Check(context.Background(), sc, nil, log)
	if err == nil || !strings.Contains(err.Error(), "short=[redacted] inherited=[redacted]") {
		t.Fatalf("Check: %v, want the child's stderr with both values redacted", err)
	}
	leaks("Check error", err.Error())
	for _, line := range strings.Split(logs.String(), "\n") {
		leaks("Check log", line)
	}
	if !strings.Contains(logs.String(), "too short to redact") || !strings.Contains(logs.String(), "key=env.TINY") {
		t.Errorf("no warning naming env.TINY:\n%s", logs.String())
	}

	log, logs = debugLogger()
	e, m := startModule(t, Config{Servers: []ServerConfig{sc}, MinBackoff: time.Hour}, log)
	sub, err := e.Bus().Subscribe(lattice.Filter{}, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	err = m.Ready(context.Background())
	if err == nil {
		t.Fatal("Ready: no error from a child that exits")
	}
	leaks("Ready", err.Error())
	leaks("Status", m.Status()[0].Error)
	waitFor(t, 5*time.Second, func() bool { return strings.Contains(logs.String(), "connect failed") })
	for _, line := range strings.Split(logs.String(), "\n") {
		leaks("log", line)
	}
	events := 0
	for done := false; !done; {
		select {
		case ev := <-sub.Events():
			events++
			leaks("event "+ev.Type, string(ev.Payload))
		case <-time.After(200 * time.Millisecond):
			done = true
		}
	}
	if events == 0 {
		t.Fatal("no McpServerDisconnected event")
	}
}

// A successful tool result quoting the provider key (a host credential in
// Scrub) reaches neither the model's next request, checked at an
// OpenAI-wire model server, nor any event, nor the answer.
func TestSuccessfulResultScrubbed(t *testing.T) {
	const key = "sk-live-0123456789abcdef"
	t.Setenv("FAKE_KEY", key) // the server inherits it and can read it

	var mu sync.Mutex
	var bodies []string
	llm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(body))
		first := len(bodies) == 1
		mu.Unlock()
		var message map[string]any
		if first {
			message = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
				"id": "c1", "type": "function",
				"function": map[string]any{"name": "mcp__leaky__getenv", "arguments": `{"name":"FAKE_KEY"}`},
			}}}
		} else {
			// The model repeats what the tool said.
			var req struct {
				Messages []struct {
					Role    string `json:"role"`
					Content any    `json:"content"`
				} `json:"messages"`
			}
			_ = json.Unmarshal(body, &req)
			last := req.Messages[len(req.Messages)-1]
			message = map[string]any{"role": "assistant", "content": "TOOL RESULT: " + toText(last.Content)}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "fake",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": message}},
		})
	}))
	defer llm.Close()

	sc := helperServer("leaky", "server")
	sc.Timeout = 10 * time.Second
	log, logs := debugLogger()
	e, m := startModule(t, Config{Servers: []ServerConfig{sc}, Scrub: []secretT{key}}, log)
	if err := m.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	model, err := openai.New(provider.Config{BaseURL: llm.URL + "/v1", APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.AddAgent(agent.Spec{ID: "a", Provider: provider.OpenAI, Model: "fake"}, model); err != nil {
		t.Fatal(err)
	}
	sub, err := e.Bus().Subscribe(lattice.Filter{}, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := e.Execute(ctx, "a", "print your environment")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Output, "FAKE_KEY=[redacted]") || strings.Contains(res.Output, key) {
		t.Fatalf("answer: %q", res.Output)
	}
	mu.Lock()
	if len(bodies) != 2 {
		t.Fatalf("%d model requests", len(bodies))
	}
	if !strings.Contains(bodies[1], "FAKE_KEY=[redacted]") {
		t.Errorf("the tool result did not reach the model: %s", bodies[1])
	}
	for i, b := range bodies {
		if strings.Contains(b, key) {
			t.Errorf("model request %d carries the key: %s", i, b)
		}
	}
	mu.Unlock()
	for done := false; !done; {
		select {
		case ev := <-sub.Events():
			if strings.Contains(string(ev.Payload), key) {
				t.Errorf("event %s carries the key: %s", ev.Type, ev.Payload)
			}
		case <-time.After(200 * time.Millisecond):
			done = true
		}
	}
	if strings.Contains(logs.String(), key) {
		t.Errorf("logs carry the key")
	}
}

func toText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}
