package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/config"
)

// chatModel is an httptest server speaking the OpenAI chat-completions
// wire that records every request's messages. It answers "answer to
// <the last user line>"; a user line containing BLOCK makes it signal
// blocked and hold the request until the client goes away.
type chatModel struct {
	*httptest.Server
	mu       sync.Mutex
	requests [][]chatMessage
	blocked  chan struct{}
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

func newChatModel(t *testing.T) *chatModel {
	m := &chatModel{blocked: make(chan struct{}, 4)}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []chatMessage `json:"messages"`
		}
		if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Messages) == 0 {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		m.mu.Lock()
		m.requests = append(m.requests, req.Messages)
		m.mu.Unlock()
		last := req.Messages[len(req.Messages)-1].Content
		if strings.Contains(last, "BLOCK") {
			m.blocked <- struct{}{}
			<-r.Context().Done() // the client (the killed daemon) went away
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "c", "object": "chat.completion", "model": "m",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": "answer to " + last}}}})
	}))
	t.Cleanup(m.Close)
	return m
}

// last is the messages of the model's latest request.
func (m *chatModel) last(t *testing.T) []chatMessage {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.requests) == 0 {
		t.Fatal("the model was never called")
	}
	return m.requests[len(m.requests)-1]
}

// conversationConfig is a daemon config whose agent talks to model, its
// conversations in dataDir.
func conversationConfig(t *testing.T, model, dataDir string) string {
	return writeConfig(t, fmt.Sprintf(`
server:
  data_dir: %s
providers:
  openai:
    api_key: sk-test-not-a-real-key
    base_url: %s/v1
agents:
  - id: assistant
    provider: openai
    system_prompt: be brief
`, dataDir, model))
}

// childTurn runs one turn in a new process: this test binary, re-run as
// TestConversationTurnProcess, which loads the config and builds the
// daemon's Engine as `serve` does (config.Load, config.Build), runs the
// turn and exits. Each call is a restart of the daemon.
func childTurn(t *testing.T, cfgPath, conversationID, input string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestConversationTurnProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "AXOCOATL_TEST_TURN=1", "TURN_CONFIG="+cfgPath, "TURN_CONVERSATION="+conversationID, "TURN_INPUT="+input)
	return cmd
}

// TestConversationTurnProcess is the child of childTurn (it does nothing
// in a normal run).
func TestConversationTurnProcess(t *testing.T) {
	if os.Getenv("AXOCOATL_TEST_TURN") != "1" {
		t.Skip("run by childTurn only")
	}
	ctx := context.Background()
	cfg, err := config.Load(ctx, config.LoadOptions{Path: os.Getenv("TURN_CONFIG"), Lookup: mapEnv(nil)})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := cfg.Build(ctx, config.BuildOptions{Logger: cfg.NewLogger(os.Stderr)})
	if err != nil {
		t.Fatal(err)
	}
	res, err := rt.Engine.ExecuteRequest(ctx, axocoatl.Request{AgentID: "assistant", Input: os.Getenv("TURN_INPUT"),
		ConversationID: os.Getenv("TURN_CONVERSATION"), CreateConversation: true, Source: axocoatl.SourceAPI})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("TURN-OK %s %q\n", res.ConversationID, res.Output)
	closeCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := rt.Close(closeCtx); err != nil {
		t.Fatal(err)
	}
	// Exit here, as the daemon does: TestMain's leak check would count
	// the provider's idle keep-alive connections, which a process that
	// exits does not leak (the parent's own check runs as usual).
	os.Exit(0)
}

func runTurn(t *testing.T, cfgPath, conversationID, input string) {
	t.Helper()
	out, err := childTurn(t, cfgPath, conversationID, input).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "TURN-OK "+conversationID+" ") {
		t.Fatalf("turn %q in a new process: %v\n%s", input, err, out)
	}
}

// contents lists a request's user and assistant lines, without the system
// prompt.
func contents(msgs []chatMessage) []string {
	var out []string
	for _, m := range msgs {
		if m.Role == "user" || m.Role == "assistant" {
			out = append(out, m.Role+": "+m.Content)
		}
	}
	return out
}

// The process restarted between two turns: the second turn's model
// request holds the first (read back from conversations.db).
func TestConversationContinuesAfterRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs processes; skipped with -short")
	}
	model := newChatModel(t)
	cfgPath := conversationConfig(t, model.URL, t.TempDir())
	runTurn(t, cfgPath, "c-restart", "my name is Ana")
	runTurn(t, cfgPath, "c-restart", "what is my name?")
	got := contents(model.last(t))
	want := []string{"user: my name is Ana", "assistant: answer to my name is Ana", "user: what is my name?"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the second turn's request after a restart:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// SIGKILL during a turn (the model holds the request): the killed turn is
// lost, every earlier one is intact, and the store opens at the next
// start, whose turn sees them all.
func TestConversationSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("runs processes; skipped with -short")
	}
	model := newChatModel(t)
	dataDir := t.TempDir()
	cfgPath := conversationConfig(t, model.URL, dataDir)
	runTurn(t, cfgPath, "c-kill", "turn one")
	runTurn(t, cfgPath, "c-kill", "turn two")

	cmd := childTurn(t, cfgPath, "c-kill", "turn three BLOCK")
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-model.blocked:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("the third turn never reached the model")
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatal("the killed process exited cleanly")
	}

	runTurn(t, cfgPath, "c-kill", "turn four")
	got := contents(model.last(t))
	want := []string{"user: turn one", "assistant: answer to turn one", "user: turn two", "assistant: answer to turn two", "user: turn four"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("after SIGKILL mid-turn, the next turn's request:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := os.Stat(filepath.Join(dataDir, "conversations.db")); err != nil {
		t.Fatal(err)
	}
}

// executeTurn posts one turn to the binary's HTTP door; ok is false when
// this build's execute does not take conversation_id yet.
func executeTurn(t *testing.T, base, conversationID, input string) (id string, ok bool) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"input": input, "conversation_id": conversationID})
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Post(base+"/api/agents/assistant/execute", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusBadRequest && strings.Contains(string(raw), "conversation_id") {
		return "", false
	}
	var res struct {
		ConversationID string `json:"conversation_id"`
		Status         string `json:"status"`
	}
	if err := json.Unmarshal(raw, &res); err != nil || resp.StatusCode != http.StatusOK || res.ConversationID == "" {
		t.Fatalf("execute %q: %d %s", input, resp.StatusCode, raw)
	}
	return res.ConversationID, true
}

// The built binary over its HTTP door: restarted (SIGTERM) between two
// turns, then killed (SIGKILL) during a third; the fourth turn's model
// request holds the first two. Skipped while the execute door does not
// take conversation_id (it comes with the HTTP conversation routes).
func TestBinaryConversationRestartAndKill(t *testing.T) {
	bin := buildBinary(t)
	model := newChatModel(t)
	cfgPath := conversationConfig(t, model.URL, t.TempDir())
	args := []string{"serve", "--config", cfgPath, "--addr", "127.0.0.1:0"}

	base, cmd, stderr := startBinary(t, bin, nil, args...)
	if !strings.Contains(stderr.String(), "conversations=\"bolt ") {
		t.Errorf("the ready line does not say where conversations are:\n%s", stderr.String())
	}
	id, ok := executeTurn(t, base, "new", "turn one")
	if !ok {
		t.Skip("POST /api/agents/{id}/execute does not take conversation_id in this build")
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, stderr.String())
	}

	// The same process takes turn two after the restart, then turn three,
	// which blocks in the model: the daemon is killed meanwhile.
	base, cmd, _ = startBinary(t, bin, nil, args...)
	executeTurn(t, base, id, "turn two")
	if got := contents(model.last(t)); len(got) != 3 || got[0] != "user: turn one" {
		t.Fatalf("after a restart, turn two's request: %q", got)
	}
	body, _ := json.Marshal(map[string]string{"input": "turn three BLOCK", "conversation_id": id})
	go func() {
		// Fails when the daemon dies: that is the point.
		if resp, err := (&http.Client{Timeout: 60 * time.Second}).Post(base+"/api/agents/assistant/execute", "application/json", strings.NewReader(string(body))); err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case <-model.blocked:
	case <-time.After(60 * time.Second):
		t.Fatal("turn three never reached the model")
	}
	cmd.Process.Kill()
	cmd.Wait()

	base, _, _ = startBinary(t, bin, nil, args...)
	executeTurn(t, base, id, "turn four")
	want := []string{"user: turn one", "assistant: answer to turn one", "user: turn two", "assistant: answer to turn two", "user: turn four"}
	if got := contents(model.last(t)); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("after SIGKILL mid-turn:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
