package config_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axocoatl/axocoatl-go/config"
	"github.com/axocoatl/axocoatl-go/httpapi"
)

// modelGap is how long the test's model takes over each call, so that its
// rows have a duration to check.
const modelGap = 30 * time.Millisecond

// usageModel is an OpenAI-wire model that calls tool once per run, then
// answers; each answer reports its tokens (11 in / 4 out, then 20 / 6).
func usageModel(t *testing.T, tool string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Role string `json:"role"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
			http.Error(w, "want a chat completion request", http.StatusBadRequest)
			return
		}
		select { // the model's thinking time; the request's end cuts it short
		case <-time.After(modelGap):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if req.Messages[len(req.Messages)-1].Role == "tool" {
			io.WriteString(w, `{"id":"c2","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"done"}}],"usage":{"prompt_tokens":20,"completion_tokens":6}}`)
			return
		}
		fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[{"id":"t1","type":"function","function":{"name":%q,"arguments":"{\"env\":\"prod\"}"}}]}}],"usage":{"prompt_tokens":11,"completion_tokens":4}}`, tool)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// GET /api/runs/{id}/timeline of a run with two model calls, an MCP tool
// call that waited for a human's approval, and a webhook that refused the
// first attempt of TaskCompleted's delivery: the rows in order, each placed
// inside the run (the delivery after its end), with its tokens, who
// resolved the approval, the delivery's two attempts; a token without the
// admin scope sees no webhook rows, one that does not see the agent no
// timeline, and an unknown task is 404.
func TestRunTimelineRoute(t *testing.T) {
	ctx := context.Background()
	tools := mcp.NewServer(&mcp.Implementation{Name: "ops", Version: "1"}, nil)
	mcp.AddTool(tools, &mcp.Tool{Name: "deploy", Description: "Deploys."},
		func(context.Context, *mcp.CallToolRequest, struct {
			Env string `json:"env"`
		}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deployed"}}}, nil, nil
		})
	mcpSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return tools }, nil))
	defer mcpSrv.Close()
	var hits atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if hits.Add(1) == 1 {
			// A slow refusal: its attempt has a length to place.
			select {
			case <-time.After(modelGap):
			case <-r.Context().Done():
			}
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer hook.Close()

	cfg, err := config.ParseWith(ctx, "timeline.yaml", []byte(fmt.Sprintf(`
server:
  api_token: admin-token-0123456789abcdef
  max_auth_failures: -1
  tokens:
    - { name: reader, token: reader-token-0123456789abcdef, scopes: [read] }
    - { name: other, token: other-token-0123456789abcdef, scopes: [read], agents: [nobody] }
providers:
  openai: { base_url: %s/v1, api_key: sk-test, max_retries: -1 }
agents:
  - { id: deployer, provider: openai, model: m }
mcp_servers:
  - { name: ops, url: %s/mcp }
webhooks:
  - { name: alerts, url: %s/hook, events: [TaskCompleted], backoff_base: 5ms, backoff_max: 20ms }
`, usageModel(t, "mcp__ops__deploy"), mcpSrv.URL, hook.URL)), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Server.DataDir = t.TempDir()
	rt, err := cfg.Build(ctx, config.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	h, err := rt.Handler()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	select {
	case <-rt.MCPReadyChan():
	case <-time.After(20 * time.Second):
		t.Fatal("the MCP server did not connect within 20s")
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(token, path string, out any) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if out != nil {
			if err := json.NewDecoder(res.Body).Decode(out); err != nil {
				t.Fatalf("GET %s: %d: %v", path, res.StatusCode, err)
			}
		}
		return res.StatusCode
	}

	type result struct {
		TaskID string `json:"task_id"`
	}
	done := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/agents/deployer/execute", strings.NewReader(`{"input":"ship it"}`))
		req.Header.Set("Authorization", "Bearer admin-token-0123456789abcdef")
		var r result
		if res, err := client.Do(req); err == nil {
			json.NewDecoder(res.Body).Decode(&r)
			res.Body.Close()
		}
		done <- r
	}()
	// The call waits for a human: resolve it as the admin, over HTTP.
	var approvalID, task string
	for deadline := time.Now().Add(20 * time.Second); approvalID == ""; time.Sleep(10 * time.Millisecond) {
		if p := rt.Approval.Pending(); len(p) > 0 {
			approvalID, task = p[0].ApprovalID, p[0].TaskID
		} else if time.Now().After(deadline) {
			t.Fatal("no pending approval within 20s")
		}
	}
	var live httpapi.TimelineResponse
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if get("admin-token-0123456789abcdef", "/api/runs/"+task+"/timeline", &live) == http.StatusOK &&
			len(live.Rows) > 0 && live.Rows[len(live.Rows)-1].Kind == "approval" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the running timeline never showed the wait: %+v", live)
		}
	}
	if last := live.Rows[len(live.Rows)-1]; live.Status != "running" || last.Status != "waiting" || last.Name != "mcp__ops__deploy" {
		t.Fatalf("while waiting: %s, last row %+v", live.Status, last)
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/approvals/"+approvalID, strings.NewReader(`{"decision":"allow"}`))
	req.Header.Set("Authorization", "Bearer admin-token-0123456789abcdef")
	req.Header.Set("Content-Type", "application/json")
	if res, err := client.Do(req); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("allow: %v %v", res, err)
	} else {
		res.Body.Close()
	}
	if r := <-done; r.TaskID != task {
		t.Fatalf("the run ended as task %q, the approval was of %q", r.TaskID, task)
	}

	// The run is over and its webhook delivered at the second attempt.
	var tl httpapi.TimelineResponse
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		get("admin-token-0123456789abcdef", "/api/runs/"+task+"/timeline", &tl)
		n := len(tl.Rows)
		if tl.Status == "completed" && n > 0 && tl.Rows[n-1].Kind == "webhook" && tl.Rows[n-1].Status == "delivered" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no completed run with its delivery: %+v", tl)
		}
	}
	var kinds []string
	for _, r := range tl.Rows {
		kinds = append(kinds, r.Kind+":"+r.Name)
	}
	if got, want := strings.Join(kinds, " "), "run:deployer model:chat m tool:mcp__ops__deploy approval:mcp__ops__deploy model:chat m webhook:alerts"; got != want {
		t.Fatalf("rows\n %s\nwant\n %s", got, want)
	}
	run, model1, tool, wait, model2, hookRow := tl.Rows[0], tl.Rows[1], tl.Rows[2], tl.Rows[3], tl.Rows[4], tl.Rows[5]
	const slack = 5 // ms: event times are whole milliseconds
	gap := float64(modelGap.Milliseconds())
	if run.StartMS != 0 || run.Status != "completed" || run.Tokens == nil || run.Tokens.InputTokens != 31 || run.Tokens.OutputTokens != 10 {
		t.Errorf("run row %+v", run)
	}
	for i, r := range tl.Rows[1:5] {
		if r.StartMS < -slack || r.StartMS+r.DurationMS > run.DurationMS+slack {
			t.Errorf("row %d (%s) at %.1f+%.1f ms lies outside the run's %.1f ms", i+1, r.Kind, r.StartMS, r.DurationMS, run.DurationMS)
		}
	}
	if model1.DurationMS < gap-slack || model1.Detail != "tool_calls" || model1.Status != "ok" || model1.Tokens == nil || model1.Tokens.InputTokens != 11 || model1.Tokens.OutputTokens != 4 {
		t.Errorf("first model call %+v", model1)
	}
	if model2.DurationMS < gap-slack || model2.Detail != "stop" || model2.Tokens == nil || model2.Tokens.InputTokens != 20 || model2.StartMS < tool.StartMS+tool.DurationMS-slack {
		t.Errorf("second model call %+v (tool ended at %.1f)", model2, tool.StartMS+tool.DurationMS)
	}
	if tool.Status != "ok" || tool.StartMS < model1.StartMS+model1.DurationMS-slack {
		t.Errorf("tool row %+v", tool)
	}
	// The wait lies inside the tool call, resolved by the admin over HTTP.
	if wait.Status != "approved" || !strings.HasPrefix(wait.By, "http") || wait.StartMS < tool.StartMS-slack ||
		wait.StartMS+wait.DurationMS > tool.StartMS+tool.DurationMS+slack {
		t.Errorf("approval row %+v inside tool %+v", wait, tool)
	}
	if hookRow.Detail != "TaskCompleted" || len(hookRow.Attempts) != 2 || hookRow.Attempts[0].StatusCode != 503 || hookRow.Attempts[0].DurationMS < gap-slack ||
		hookRow.Attempts[1].StatusCode != 200 || hookRow.StartMS < run.DurationMS-slack ||
		hookRow.Attempts[1].StartMS < hookRow.Attempts[0].StartMS+hookRow.Attempts[0].DurationMS-slack {
		t.Errorf("webhook row %+v (run %.1f ms)", hookRow, run.DurationMS)
	}
	// Each attempt lies inside its delivery's span.
	for i, a := range hookRow.Attempts {
		if a.StartMS < hookRow.StartMS-slack || a.StartMS+a.DurationMS > hookRow.StartMS+hookRow.DurationMS+slack {
			t.Errorf("attempt %d at %.1f+%.1f ms outside its delivery at %.1f+%.1f ms", i+1, a.StartMS, a.DurationMS, hookRow.StartMS, hookRow.DurationMS)
		}
	}

	// A read token sees the run without the webhook rows; one that does
	// not see the agent, and an unknown task, get 404.
	var read httpapi.TimelineResponse
	if code := get("reader-token-0123456789abcdef", "/api/runs/"+task+"/timeline", &read); code != http.StatusOK || len(read.Rows) != 5 {
		t.Errorf("read token: %d, %d rows", code, len(read.Rows))
	}
	if code := get("other-token-0123456789abcdef", "/api/runs/"+task+"/timeline", nil); code != http.StatusNotFound {
		t.Errorf("a token that does not see the agent: %d", code)
	}
	if code := get("admin-token-0123456789abcdef", "/api/runs/no-such-task/timeline", nil); code != http.StatusNotFound {
		t.Errorf("unknown task: %d", code)
	}
}
