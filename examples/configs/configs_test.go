// Package configs holds complete, commented daemon configs for the common
// setups; its tests load and build each one as the daemon does, so a
// config here never goes stale.
package configs

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/config"
	"github.com/axocoatl/axocoatl-go/egress"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

// env is the whole environment a config sees: nothing of the test
// process's (no real key, no AXOCOATL_* override) but what the case gives,
// and a data dir of the test's own so nothing is written beside the files.
func env(t *testing.T, vars map[string]string) func(string) (string, bool) {
	t.Helper()
	all := map[string]string{"AXOCOATL_DATA_DIR": t.TempDir()}
	for k, v := range vars {
		all[k] = v
	}
	return func(name string) (string, bool) {
		v, ok := all[name]
		return v, ok
	}
}

// load reads one file of this directory as the daemon would, failing the
// test on any error or warning (an unknown section would be a warning).
func load(t *testing.T, name string, vars map[string]string) *config.Config {
	t.Helper()
	cfg, err := config.Load(context.Background(), config.LoadOptions{Path: name, Lookup: env(t, vars)})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(cfg.Warnings) > 0 {
		t.Fatalf("%s: warnings: %v", name, cfg.Warnings)
	}
	return cfg
}

// build starts the runtime the config describes and stops it when the
// test ends.
func build(t *testing.T, cfg *config.Config) *config.Runtime {
	t.Helper()
	rt, err := cfg.Build(context.Background(), config.BuildOptions{})
	if err != nil {
		t.Fatalf("%s: build: %v", cfg.Source, err)
	}
	t.Cleanup(func() {
		if err := rt.Close(context.Background()); err != nil {
			t.Errorf("%s: close: %v", cfg.Source, err)
		}
	})
	return rt
}

func agentIDs(rt *config.Runtime) []string {
	var ids []string
	for _, a := range rt.Engine.Agents() {
		ids = append(ids, a.ID)
	}
	slices.Sort(ids)
	return ids
}

// TestEveryConfigIsTested: a config added here without a test of its own
// fails, so every file stays one the daemon loads.
func TestEveryConfigIsTested(t *testing.T) {
	tested := []string{
		"claude-desktop.yaml", "cluster-a.yaml", "cluster-b.yaml", "ollama-local.yaml",
		"openai-filesystem-approval.yaml", "webhooks.yaml",
	}
	files, err := filepath.Glob("*.y*ml")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	if !slices.Equal(files, tested) {
		t.Fatalf("configs %v, tested %v", files, tested)
	}
}

// TestOpenAIFilesystemApproval: the key comes from OPENAI_API_KEY (and
// without it the file is refused, naming both places), the filesystem
// server gets its root, and the gate's rules allow reads and leave writes
// to a human. The MCP server itself is not started here (npx would fetch
// it); everything else is built.
func TestOpenAIFilesystemApproval(t *testing.T) {
	const name = "openai-filesystem-approval.yaml"
	_, err := config.Load(context.Background(), config.LoadOptions{Path: name, Lookup: env(t, nil)})
	if err == nil || !strings.Contains(err.Error(), "providers.openai.api_key is empty and OPENAI_API_KEY is not set") {
		t.Fatalf("without OPENAI_API_KEY: %v", err)
	}
	cfg := load(t, name, map[string]string{"OPENAI_API_KEY": "sk-test-not-a-real-key"})
	if len(cfg.MCPServers) != 1 || cfg.MCPServers[0].Name != "fs" {
		t.Fatalf("mcp_servers: %+v", cfg.MCPServers)
	}
	if args := cfg.MCPServers[0].Args; args[len(args)-1] != "/tmp/axocoatl-files" {
		t.Errorf("filesystem root: %q", args)
	}
	if a := cfg.Agents[0]; a.Provider != "openai" || !a.AllowsTool("mcp__fs__write_file") || a.AllowsTool("mcp__other__x") {
		t.Errorf("agent: %+v", a)
	}
	decide := func(tool string) string {
		for _, r := range cfg.Approval.Rules {
			if ok, _ := filepath.Match(r.Tool, tool); ok {
				return string(r.Decision)
			}
		}
		return string(cfg.Approval.Default)
	}
	for tool, want := range map[string]string{
		"mcp__fs__read_text_file": "allow", "mcp__fs__list_directory": "allow",
		"mcp__fs__write_file": "prompt", "mcp__fs__edit_file": "prompt", "mcp__fs__move_file": "deny",
	} {
		if got := decide(tool); got != want {
			t.Errorf("%s: %s, want %s", tool, got, want)
		}
	}
	cfg.MCPServers = nil
	rt := build(t, cfg)
	if rt.Approval == nil || !slices.Equal(agentIDs(rt), []string{"assistant"}) {
		t.Fatalf("approval %v, agents %v", rt.Approval, agentIDs(rt))
	}
}

// TestOllamaLocal needs no key (a local Ollama takes none) and expands the
// model's default.
func TestOllamaLocal(t *testing.T) {
	cfg := load(t, "ollama-local.yaml", nil)
	if a := cfg.Agents[0]; a.Model != "llama3.2" || a.Provider != "ollama" || a.AllowsTool("mcp__fs__read_file") {
		t.Errorf("agent: %+v", a)
	}
	if got := cfg.Providers["ollama"].BaseURL; got != "http://localhost:11434/v1" {
		t.Errorf("base_url %q", got)
	}
	rt := build(t, cfg)
	if !slices.Equal(agentIDs(rt), []string{"local"}) {
		t.Errorf("agents %v", agentIDs(rt))
	}
}

// TestWebhooks: the file refuses to load without WEBHOOK_SECRET, and with
// it a task's TaskCompleted reaches a receiver, signed so that
// egress.Verify accepts it with that secret.
func TestWebhooks(t *testing.T) {
	const name, key = "webhooks.yaml", "a-webhook-secret-for-the-test"
	_, err := config.Load(context.Background(), config.LoadOptions{Path: name, Lookup: env(t, nil)})
	if err == nil || !strings.Contains(err.Error(), "webhooks[0].secret") {
		t.Fatalf("without WEBHOOK_SECRET: %v", err)
	}
	got := make(chan string, 16)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err == nil {
			err = egress.Verify(key, r.Header, body, time.Hour)
		}
		if err != nil {
			got <- "refused: " + err.Error()
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var d struct {
			EventType string `json:"event_type"`
		}
		_ = json.Unmarshal(body, &d)
		got <- d.EventType
	}))
	defer recv.Close()
	cfg := load(t, name, map[string]string{"WEBHOOK_SECRET": key, "WEBHOOK_URL": recv.URL + "/hook"})
	rt := build(t, cfg)
	if d := rt.Egress.Describe(); len(d) != 1 || d[0].Name != "local" || !d[0].Signed {
		t.Fatalf("webhooks: %+v", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if res, err := rt.Engine.Execute(ctx, "assistant", "hello"); err != nil || res.Output != "hello" {
		t.Fatalf("execute: %+v %v", res, err)
	}
	select {
	case ev := <-got:
		if ev != "TaskCompleted" {
			t.Fatalf("delivery: %s", ev)
		}
	case <-ctx.Done():
		t.Fatal("no delivery")
	}
}

// TestClaudeDesktop: the agents the MCP server lists, with the key from
// ANTHROPIC_API_KEY; the offline one answers.
func TestClaudeDesktop(t *testing.T) {
	cfg := load(t, "claude-desktop.yaml", map[string]string{"ANTHROPIC_API_KEY": "sk-ant-test"})
	if cfg.MCPServer.MaxMessageBytes != 4<<20 {
		t.Errorf("max_message_bytes %d", cfg.MCPServer.MaxMessageBytes)
	}
	rt := build(t, cfg)
	if rt.MCPServer == nil || !slices.Equal(agentIDs(rt), []string{"echo", "reviewer"}) {
		t.Fatalf("mcp server %v, agents %v", rt.MCPServer, agentIDs(rt))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if res, err := rt.Engine.Execute(ctx, "echo", "ping"); err != nil || res.Output != "ping" {
		t.Fatalf("execute: %+v %v", res, err)
	}
}

// TestTwoDaemonCluster: a and b on one NATS server; b lists a's agent and
// a task sent to b runs on a.
func TestTwoDaemonCluster(t *testing.T) {
	ns := testutil.NATSServer(t, testutil.FreeAddr(t), "")
	vars := map[string]string{"NATS_URL": ns.ClientURL()}
	a := build(t, load(t, "cluster-a.yaml", vars))
	b := build(t, load(t, "cluster-b.yaml", vars))
	if a.Cluster == nil || b.Cluster == nil || a.Cluster.Node() != "a" || b.Cluster.Node() != "b" {
		t.Fatalf("cluster modules: %v %v", a.Cluster, b.Cluster)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	listed := make(chan struct{}, 1)
	stop := b.Engine.WatchAgents(func() {
		select {
		case listed <- struct{}{}:
		default:
		}
	})
	defer stop()
	for {
		if info, err := b.Engine.Agent("researcher"); err == nil {
			if info.Node != "a" {
				t.Fatalf("researcher on node %q", info.Node)
			}
			break
		}
		select {
		case <-listed:
		case <-ctx.Done():
			t.Fatalf("b never listed a's agent; b has %v", agentIDs(b))
		}
	}
	if res, err := b.Engine.Execute(ctx, "researcher", "hi"); err != nil || res.Output != "hi" {
		t.Fatalf("execute on b: %+v %v", res, err)
	}
}
