package configs

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/approval"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
	"github.com/axocoatl/axocoatl-go/lattice"
)

// scriptedModel is an OpenAI-compatible Chat Completions server (OpenAI
// itself cannot run here) whose model, on the README tour's request, lists
// the directory, then writes haiku.txt into it, then says it is done: one
// step per tool result it has been given.
func scriptedModel(t *testing.T, root, haiku string) *httptest.Server {
	steps := []map[string]any{
		{"role": "assistant", "tool_calls": []any{toolCall("c1", "mcp__fs__list_directory", map[string]string{"path": root})}},
		{"role": "assistant", "tool_calls": []any{toolCall("c2", "mcp__fs__write_file", map[string]string{"path": filepath.Join(root, "haiku.txt"), "content": haiku})}},
		{"role": "assistant", "content": "done: wrote haiku.txt"},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Role string `json:"role"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.URL.Path != "/v1/chat/completions" {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		results := 0
		for _, m := range req.Messages {
			if m.Role == "tool" {
				results++
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"index": 0, "message": steps[min(results, len(steps)-1)]}}})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func toolCall(id, name string, args map[string]string) map[string]any {
	text, _ := json.Marshal(args)
	return map[string]any{"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": string(text)}}
}

// TestTourFilesystemApproval runs steps 1 and 2 of the README's tour on
// openai-filesystem-approval.yaml as written, with the real filesystem MCP
// server (npx, the pinned version) and a scripted model in OpenAI's place:
// the read (list_directory) runs without asking, the write waits for a
// human and, once allowed, writes the file. Exactly one approval is asked.
func TestTourFilesystemApproval(t *testing.T) {
	testutil.RequireCommand(t, "npx", "install Node.js 20+ and run `npx -y @modelcontextprotocol/server-filesystem@2026.8.31 /tmp` once")
	root, err := filepath.EvalSymlinks(t.TempDir()) // the server compares resolved paths
	if err != nil {
		t.Fatal(err)
	}
	const haiku = "Oaxaca morning\nmezcal smoke over the hills\nthe market wakes up\n"
	model := scriptedModel(t, root, haiku)
	cfg := load(t, "openai-filesystem-approval.yaml", map[string]string{"OPENAI_API_KEY": "sk-test-not-a-real-key", "FS_ROOT": root})
	p := cfg.Providers["openai"]
	p.BaseURL = model.URL + "/v1"
	cfg.Providers["openai"] = p
	rt := build(t, cfg)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := rt.MCPClient.Ready(ctx); err != nil {
		testutil.MissingPeer(t, "the filesystem MCP server did not start (npx could not fetch it?): "+err.Error())
	}
	asked, err := rt.Engine.Bus().Subscribe(lattice.Filter{Types: []string{approval.EventRequested}}, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer asked.Close()

	type result struct {
		output string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		res, err := rt.Engine.Execute(ctx, "assistant", "Write a haiku about Oaxaca to haiku.txt")
		done <- result{res.Output, err}
	}()

	var pending approval.PendingApproval
	select {
	case ev := <-asked.Events():
		if err := json.Unmarshal(ev.Payload, &pending); err != nil {
			t.Fatal(err)
		}
	case r := <-done:
		t.Fatalf("the run ended without asking: %+v", r)
	case <-ctx.Done():
		t.Fatal("no approval was asked")
	}
	if pending.Tool != "mcp__fs__write_file" || pending.AgentID != "assistant" {
		t.Fatalf("asked about %+v; want the write only (the read is allowed by a rule)", pending)
	}
	if _, err := os.Stat(filepath.Join(root, "haiku.txt")); !os.IsNotExist(err) {
		t.Fatalf("haiku.txt exists before the verdict: %v", err)
	}
	if err := rt.Approval.Resolve(ctx, pending.ApprovalID, "allow", "once", "test"); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		t.Fatal("the run did not end after the verdict")
	}
	if r.err != nil || r.output != "done: wrote haiku.txt" {
		t.Fatalf("run: %q %v", r.output, r.err)
	}
	if got, err := os.ReadFile(filepath.Join(root, "haiku.txt")); err != nil || string(got) != haiku {
		t.Fatalf("haiku.txt: %q %v", got, err)
	}
	select {
	case ev := <-asked.Events():
		t.Fatalf("a second approval was asked: %s", ev.Payload)
	default:
	}
}
