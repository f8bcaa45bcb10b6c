package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/openai"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
	"github.com/axocoatl/axocoatl-go/lattice"
)

const everythingPkg = "@modelcontextprotocol/server-everything@2026.8.31"

// needNPX skips without npx, except under CI where the peer is required.
func needNPX(t *testing.T) {
	t.Helper()
	testutil.RequireCommand(t, "npx", "install Node.js 20+ and run `npx -y "+everythingPkg+" stdio` once (.ci/run does)")
}

// fakeOpenAI is an OpenAI-compatible Chat Completions server whose model
// asks for echo and get-sum of the given server, then answers with what the
// tools returned.
type fakeOpenAI struct {
	server   string
	sawTools atomic.Value // []string: the tool names of the first request
}

func (f *fakeOpenAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct {
			Role       string `json:"role"`
			Content    any    `json:"content"`
			ToolCallID string `json:"tool_call_id"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	var message map[string]any
	var toolResults []string
	for _, m := range req.Messages {
		if m.Role == "tool" {
			toolResults = append(toolResults, fmt.Sprintf("%s=%v", m.ToolCallID, m.Content))
		}
	}
	if len(toolResults) == 0 {
		var names []string
		for _, t := range req.Tools {
			names = append(names, t.Function.Name)
		}
		f.sawTools.Store(names)
		call := func(id, tool, args string) map[string]any {
			return map[string]any{"id": id, "type": "function", "function": map[string]any{"name": "mcp__" + f.server + "__" + tool, "arguments": args}}
		}
		message = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{
			call("echo", "echo", `{"message":"hello from the model"}`),
			call("sum", "get-sum", `{"a":2,"b":3}`),
		}}
	} else {
		slices.Sort(toolResults)
		message = map[string]any{"role": "assistant", "content": strings.Join(toolResults, "; ")}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "fake",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": message}},
	})
}

// runAgent runs an agent on the fake model and checks both tools round-trip.
func runAgent(t *testing.T, e *axocoatl.Engine, server string) {
	t.Helper()
	f := &fakeOpenAI{server: server}
	llm := httptest.NewServer(f)
	defer llm.Close()
	model, err := openai.New(provider.Config{BaseURL: llm.URL + "/v1", APIKey: "sk-test"})
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("agent-%s-%d", server, len(e.Agents()))
	if err := e.AddAgent(agent.Spec{ID: id, Provider: provider.OpenAI, Model: "fake", Tools: []string{"mcp__" + server + "__*"}}, model); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := e.Execute(ctx, id, "use the tools")
	if err != nil {
		t.Fatal(err)
	}
	want := "echo=Echo: hello from the model; sum=The sum of 2 and 3 is 5."
	if res.Output != want {
		t.Fatalf("agent output:\n got %q\nwant %q", res.Output, want)
	}
	seen, _ := f.sawTools.Load().([]string)
	if !slices.Contains(seen, "mcp__"+server+"__echo") || !slices.Contains(seen, "mcp__"+server+"__get-sum") {
		t.Fatalf("model was offered %v", seen)
	}
}

var everythingTools = []string{
	"echo", "get-annotated-message", "get-env", "get-resource-links", "get-resource-reference",
	"get-structured-content", "get-sum", "get-tiny-image", "gzip-file-as-resource",
	"simulate-research-query", "toggle-simulated-logging", "toggle-subscriber-updates",
	"trigger-long-running-operation",
}

func checkEverythingTools(t *testing.T, e *axocoatl.Engine, server string) {
	t.Helper()
	var want []string
	for _, n := range everythingTools {
		want = append(want, "mcp__"+server+"__"+n)
	}
	waitFor(t, 10*time.Second, func() bool {
		got := toolNamesOf(e)
		for _, w := range want {
			if !slices.Contains(got, w) {
				return false
			}
		}
		return true
	})
}

func TestEverythingStdio(t *testing.T) {
	needNPX(t)
	log, logs := debugLogger()
	cfg := Config{Servers: []ServerConfig{{
		Name:    "everything",
		Command: "npx",
		Args:    []string{"-y", everythingPkg, "stdio"},
		Env:     map[string]secretT{"EVERYTHING_TOKEN": secretValue},
	}}}
	e, m := startModule(t, cfg, log)
	sub, err := e.Bus().Subscribe(lattice.Filter{Types: []string{"McpServer*"}}, 32)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := m.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	checkEverythingTools(t, e, "everything")
	// It announces its tools with list_changed right after init; the
	// refresh must have run (and kept the set).
	waitFor(t, 5*time.Second, func() bool { return m.servers[0].refreshes.Load() >= 1 })
	checkEverythingTools(t, e, "everything")
	runAgent(t, e, "everything")

	// The child's env carries the secret (get-env dumps it): the
	// successful result is scrubbed before the model, events or logs see it.
	res, err := e.CallTool(ctx, axocoatl.ToolCall{Tool: "mcp__everything__get-env"})
	if err != nil || strings.Contains(res.Content, secretValue) || !strings.Contains(res.Content, "[redacted]") {
		t.Fatalf("get-env: %v %.200s", err, res.Content)
	}

	// Kill the child's whole process group (npx → sh → node) mid-run.
	oldPID := m.servers[0].dial.pid()
	if oldPID == 0 || !processGroupAlive(oldPID) {
		t.Fatalf("no child (pid %d)", oldPID)
	}
	drain(sub)
	killed := time.Now()
	if err := syscall.Kill(-oldPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var outageErrs []error
	var back time.Duration
	// The point is that it comes back by itself; how fast depends on how
	// long node takes to start server-everything again (1-3 s idle, and it
	// missed 5 s once at load 15), so the window is generous and the time
	// is logged.
	for time.Since(killed) < 20*time.Second {
		res, err := e.CallTool(ctx, axocoatl.ToolCall{Tool: "mcp__everything__echo", Arguments: json.RawMessage(`{"message":"again"}`)})
		if err == nil && res.Content == "Echo: again" && m.servers[0].dial.pid() != oldPID {
			back = time.Since(killed)
			break
		}
		if err != nil {
			outageErrs = append(outageErrs, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if back == 0 {
		t.Fatalf("not reconnected within 20s; errors: %v", outageErrs)
	}
	t.Logf("reconnected %s after the kill; %d calls failed meanwhile", back, len(outageErrs))
	if len(outageErrs) == 0 {
		t.Fatal("no call failed during the outage")
	}
	for _, err := range outageErrs {
		if !errors.Is(err, ErrServerDown) || !strings.Contains(err.Error(), "everything") {
			t.Fatalf("outage error is not clear: %v", err)
		}
	}
	if processGroupAlive(oldPID) {
		t.Fatal("killed group still alive")
	}
	var types []string
	for len(types) < 2 {
		select {
		case ev := <-sub.Events():
			types = append(types, ev.Type)
		case <-time.After(5 * time.Second):
			t.Fatalf("events: %v", types)
		}
	}
	if types[0] != EventServerDisconnected || types[1] != EventServerConnected {
		t.Fatalf("events: %v", types)
	}
	runAgent(t, e, "everything")

	newPID := m.servers[0].dial.pid()
	closeCtx, cancelClose := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancelClose()
	if err := e.Close(closeCtx); err != nil {
		t.Fatal(err)
	}
	if !groupDies(newPID) {
		t.Fatalf("child group %d alive after Close", newPID)
	}
	if strings.Contains(logs.String(), secretValue) {
		t.Fatal("env value leaked into the log")
	}
}

func drain(sub lattice.Subscription) {
	for {
		select {
		case <-sub.Events():
		default:
			return
		}
	}
}

// startEverythingHTTP runs server-everything in streamableHttp mode and
// returns its base URL once it accepts connections.
func startEverythingHTTP(t *testing.T) string {
	t.Helper()
	addr := testutil.FreeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("npx", "-y", everythingPkg, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+port)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	setProcessGroup(cmd)
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		killProcessGroup(cmd.Process.Pid)
		cmd.Wait()
	})
	deadline := time.Now().Add(90 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return "http://" + addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("server-everything did not listen on %s", addr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestEverythingHTTP(t *testing.T) {
	needNPX(t)
	base := startEverythingHTTP(t)
	target, _ := url.Parse(base)

	// A proxy in front of the real server checks that every request
	// carries the configured headers.
	const token = "Bearer header-secret-123456"
	var requests, missing atomic.Int32
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if r.Header.Get("Authorization") != token || r.Header.Get("X-Tenant") != "tenant-secret-42" {
			missing.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()

	log, logs := debugLogger()
	cfg := Config{Servers: []ServerConfig{{
		Name:    "web",
		URL:     front.URL + "/mcp",
		Headers: map[string]secretT{"Authorization": token, "X-Tenant": "tenant-secret-42"},
	}}}
	e, m := startModule(t, cfg, log)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	checkEverythingTools(t, e, "web")
	runAgent(t, e, "web")
	if requests.Load() < 3 || missing.Load() != 0 {
		t.Fatalf("%d requests, %d without the headers", requests.Load(), missing.Load())
	}
	closeCtx, cancelClose := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancelClose()
	if err := e.Close(closeCtx); err != nil {
		t.Fatal(err)
	}
	for _, secretText := range []string{"header-secret-123456", "tenant-secret-42"} {
		if strings.Contains(logs.String(), secretText) {
			t.Fatalf("header value leaked into the log")
		}
	}
	if !strings.Contains(logs.String(), "transport=http target="+front.URL+"/mcp") {
		t.Errorf("startup log does not name the transport:\n%s", logs.String())
	}
}
