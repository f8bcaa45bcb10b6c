package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Guards: bound server.max_concurrent_runs (docs/bounds.md) at every door.
// With the bound at 1 and one run of "held" in flight (its model answers
// only when the test lets it), a second task is refused at once on each
// door the way the table says: the HTTP API answers 503 busy with
// Retry-After, A2A JSON-RPC a failed task naming the limit, MCP a tool
// result with isError. Once the held run ends, a task runs again.
func TestMaxConcurrentRunsAtEveryDoor(t *testing.T) {
	release := make(chan struct{})
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"held answer"}}]}`)
	}))
	t.Cleanup(model.Close)
	td := startDaemon(t, fmt.Sprintf(`
server:
  max_concurrent_runs: 1
providers:
  ollama: { base_url: %s/v1 }
agents:
  - id: held
    provider: ollama
    model: m
`, model.URL), nil)
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	wait := td.startHeldRun(t)

	start := time.Now()
	r := td.do(t, "POST", "/api/agents/held/execute", `{"input":"second"}`)
	if e, _ := r.json(t)["error"].(map[string]any); r.status != http.StatusServiceUnavailable || e["code"] != "busy" || r.header.Get("Retry-After") == "" {
		t.Fatalf("HTTP execute at the bound: %d Retry-After %q %s, want 503 busy", r.status, r.header.Get("Retry-After"), r.body)
	}
	r = td.do(t, "POST", "/a2a", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"messageId":"m","role":"user","parts":[{"kind":"text","text":"second"}]}}}`)
	if body := string(r.body); r.status != http.StatusOK || !strings.Contains(body, `"state":"failed"`) || !strings.Contains(body, "1 tasks in flight") {
		t.Fatalf("A2A message/send at the bound: %d %s, want a failed task naming the limit", r.status, body)
	}
	cs, err := mcpClient().Connect(mcpCtx(t), &mcp.StreamableClientTransport{Endpoint: td.url + "/mcp", MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(mcpCtx(t), &mcp.CallToolParams{Name: "agent_held", Arguments: map[string]any{"input": "second"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(mcpText(res), "1 tasks in flight") {
		t.Fatalf("MCP tools/call at the bound: %+v %q, want isError naming the limit", res, mcpText(res))
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("the refusals took %v: they should come at once", took)
	}

	close(release)
	released = true
	if r := wait(); r.status != http.StatusOK {
		t.Fatalf("the held run: %d %s", r.status, r.body)
	}
	if r := td.do(t, "POST", "/api/agents/held/execute", `{"input":"after"}`); r.status != http.StatusOK {
		t.Fatalf("after the held run ended: %d %s", r.status, r.body)
	}
}

// startHeldRun runs the agent "held" from another goroutine and returns
// once the Engine has the run in flight; wait returns its response.
func (td *testDaemon) startHeldRun(t *testing.T) (wait func() response) {
	t.Helper()
	done := make(chan response, 1)
	go func() {
		req, _ := http.NewRequestWithContext(context.Background(), "POST", td.url+"/api/agents/held/execute", strings.NewReader(`{"input":"first"}`))
		resp, err := td.client.Do(req)
		if err != nil {
			done <- response{}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		done <- response{status: resp.StatusCode, header: resp.Header, body: b}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for td.d.engine.Agents()[0].Running == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the run of held did not start within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return func() response { return <-done }
}

// Guards: bound server.max_auth_failures (docs/bounds.md), from the key to
// every door's guard (internal/httpguard's tests check the window itself).
// At max_auth_failures 3, a client's three wrong tokens get 401 and then
// even the right token gets 429 with Retry-After, on the API and on /mcp
// alike; at -1 (no bound) twenty wrong tokens all get 401 and the right
// one is served.
func TestMaxAuthFailuresKey(t *testing.T) {
	const token = "tok-0123456789abcdef"
	for _, tc := range []struct {
		limit, wrong int
	}{{3, 3}, {-1, 20}} {
		t.Run(fmt.Sprint(tc.limit), func(t *testing.T) {
			td := startDaemon(t, fmt.Sprintf("server:\n  api_token: %s\n  max_auth_failures: %d\nagents:\n  - id: assistant\n    provider: echo\n", token, tc.limit), nil)
			for i := range tc.wrong {
				if r := td.do(t, "GET", "/api/agents", "", "Authorization", "Bearer wrong-"+fmt.Sprint(i)); r.status != http.StatusUnauthorized {
					t.Fatalf("wrong token %d: %d %s, want 401", i+1, r.status, r.body)
				}
			}
			if tc.limit < 0 {
				if r := td.do(t, "GET", "/api/agents", "", "Authorization", "Bearer "+token); r.status != http.StatusOK {
					t.Fatalf("the right token after %d wrong ones, no bound: %d", tc.wrong, r.status)
				}
				return
			}
			for _, path := range []string{"/api/agents", "/mcp"} {
				r := td.do(t, "GET", path, "", "Authorization", "Bearer "+token)
				if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
					t.Fatalf("%s with the right token after %d wrong ones: %d Retry-After %q, want 429", path, tc.wrong, r.status, r.header.Get("Retry-After"))
				}
			}
		})
	}
}
