package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/config"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The data dir beside `serve`: a relative data_dir (here the default
// ./data) is the config file's, whatever the working directory; a second
// `serve` on it fails at once naming the first one's pid; `mcp serve`,
// started elsewhere as an MCP client does, runs beside it (webhooks
// configured: before, it died on egress.db's lock after 5 s) and sees the
// decisions remembered there.
func TestDataDirBesideServe(t *testing.T) {
	bin := buildBinary(t)
	recv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(recv.Close)
	home := t.TempDir()
	cfgPath := filepath.Join(home, "axocoatl.yaml")
	if err := os.WriteFile(cfgPath, []byte(`
agents:
  - id: assistant
webhooks:
  - name: done
    url: `+recv.URL+`/hook
    events: [TaskCompleted]
    secret: ${HOOK_SECRET}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	// A decision remembered by an earlier run.
	dataDir := filepath.Join(home, "data")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataDir, "approvals.json"), []byte(`{"version":1,"decisions":[
		{"agent_id":"assistant","tool":"mcp__fs__read","fingerprint":"f1","decision":"allow","decided_at":"2026-01-02T03:04:05Z","resolved_by":"api","approval_id":"ap1"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOOK_SECRET=hook-secret-0123456789"}

	// startBinary runs each in a fresh working directory.
	_, first, _ := startBinary(t, bin, env, "serve", "--config", cfgPath, "--addr", "127.0.0.1:0")
	t.Cleanup(func() { first.Process.Kill(); first.Wait() })
	if _, err := os.Stat(filepath.Join(dataDir, "egress.db")); err != nil {
		t.Fatalf("serve did not open egress.db in the config's directory: %v", err)
	}

	second := exec.Command(bin, "serve", "--config", cfgPath, "--addr", "127.0.0.1:0")
	second.Dir = t.TempDir()
	second.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	start := time.Now()
	out, err := second.CombinedOutput()
	took := time.Since(start)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitFail {
		t.Fatalf("second serve: %v, want exit %d:\n%s", err, exitFail, out)
	}
	want := fmt.Sprintf("data dir %s is in use by another process: pid %d (", dataDir, first.Process.Pid)
	if !strings.Contains(string(out), want) || !strings.Contains(string(out), "server.data_dir") {
		t.Fatalf("second serve said:\n%s\nwant %q and what to do", out, want)
	}
	t.Logf("second serve refused after %s", took)

	// mcp serve from elsewhere, beside the first.
	cmd := exec.Command(bin, "mcp", "serve", "--config", cfgPath)
	cmd.Dir = t.TempDir()
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	var mcpStderr testutil.SyncBuffer
	cmd.Stderr = &mcpStderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(mcpCtx(t), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("mcp serve beside serve: %v", err)
	}
	res, err := cs.CallTool(mcpCtx(t), &mcp.CallToolParams{Name: "agent_assistant", Arguments: map[string]any{"input": "beside"}})
	if err != nil || res.IsError || mcpText(res) != "beside" {
		t.Fatalf("tools/call over mcp serve beside serve: %v %+v", err, res)
	}
	cs.Close()
	// serve holds conversations.db: mcp serve kept its conversations in
	// memory and said so, with the fix.
	if l := mcpStderr.String(); !strings.Contains(l, "conversations of this process are kept in memory") || !strings.Contains(l, "/mcp endpoint") {
		t.Fatalf("mcp serve beside serve did not warn about its conversations:\n%s", l)
	}

	// What mcp serve builds from there sees the remembered decision.
	t.Chdir(t.TempDir())
	cfg, err := config.Load(context.Background(), config.LoadOptions{Path: cfgPath, Lookup: mapEnv(map[string]string{"HOOK_SECRET": "hook-secret-0123456789"})})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Server.DataDir != dataDir {
		t.Fatalf("data_dir %q, want the config's directory's %q", cfg.Server.DataDir, dataDir)
	}
	rt, err := cfg.Build(context.Background(), config.BuildOptions{SharedDataDir: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())
	if d := rt.Approval.Decisions(); len(d) != 1 || d[0].Tool != "mcp__fs__read" || d[0].Decision != "allow" {
		t.Fatalf("remembered decisions seen beside serve: %+v", d)
	}
}
