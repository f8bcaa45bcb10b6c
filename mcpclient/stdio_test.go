package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
	"github.com/axocoatl/axocoatl-go/lattice"
	"github.com/axocoatl/axocoatl-go/secret"
)

type secretT = secret.Secret

const secretValue = "s3cr3t-value-xyz"

func debugLogger() (*slog.Logger, *testutil.SyncBuffer) {
	buf := &testutil.SyncBuffer{}
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

// Broken servers get a clear error each; the good one and the Engine work.
func TestStdioBrokenServers(t *testing.T) {
	log, logs := debugLogger()
	withSecret := func(c ServerConfig, timeout time.Duration) ServerConfig {
		c.Env["SECRET_TOKEN"] = secretValue
		c.Timeout = timeout
		return c
	}
	cfg := Config{
		Servers: []ServerConfig{
			withSecret(helperServer("good", "server"), 10*time.Second),
			// 8 s: these fail as soon as they speak, which a loaded
			// machine's re-executed test binary took more than 2 s to.
			withSecret(helperServer("garbage", "garbage"), 8*time.Second),
			withSecret(helperServer("exits", "exit"), 8*time.Second),
			withSecret(helperServer("silent", "silent"), 2*time.Second),
		},
		MinBackoff: time.Hour, // one attempt each is enough here
	}
	start := time.Now()
	e, m := startModule(t, cfg, log)
	if took := time.Since(start); took > 200*time.Millisecond {
		t.Fatalf("Start blocked for %s", took)
	}
	// The good server does not wait for the silent one's 2s timeout.
	waitFor(t, 1900*time.Millisecond, func() bool { return m.Status()[0].Connected })
	res, err := e.CallTool(context.Background(), axocoatl.ToolCall{Tool: "mcp__good__echo", Arguments: json.RawMessage(`{"message":"ok"}`)})
	if err != nil || res.Content != "Echo: ok" {
		t.Fatalf("good server: %+v %v", res, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	readyErr := m.Ready(ctx)
	if readyErr == nil {
		t.Fatal("Ready reported no errors")
	}
	st := m.Status()
	if !st[0].Connected {
		t.Fatalf("good server down: %+v", st[0])
	}
	wantErr := map[string]string{
		"garbage": "not MCP JSON-RPC",
		"exits":   "exit status 3",
		"silent":  "no MCP handshake within 2s",
	}
	for _, s := range st[1:] {
		if s.Connected || s.Error == "" {
			t.Errorf("%s: %+v", s.Name, s)
			continue
		}
		t.Logf("%s: %s", s.Name, s.Error)
		if w := wantErr[s.Name]; !strings.Contains(s.Error, w) {
			t.Errorf("%s: error %q lacks %q", s.Name, s.Error, w)
		}
		if !strings.Contains(readyErr.Error(), "mcp server "+s.Name+":") {
			t.Errorf("Ready error does not name %s: %v", s.Name, readyErr)
		}
	}
	if !strings.Contains(st[2].Error, "stderr: fatal: cannot start") {
		t.Errorf("exit error lacks the child's stderr: %q", st[2].Error)
	}
	// Tools of the good server only.
	for _, tool := range e.Tools() {
		if tool.Server != "good" {
			t.Errorf("unexpected tool %s", tool.Name)
		}
	}
	// The Engine still runs agents and the good server still answers.
	res, err = e.CallTool(context.Background(), axocoatl.ToolCall{Tool: "mcp__good__echo", Arguments: json.RawMessage(`{"message":"still"}`)})
	if err != nil || res.Content != "Echo: still" {
		t.Fatalf("good server after: %+v %v", res, err)
	}
	if strings.Contains(logs.String(), secretValue) || strings.Contains(readyErr.Error(), secretValue) {
		t.Fatalf("secret leaked:\n%s\n%v", logs.String(), readyErr)
	}
	if !strings.Contains(logs.String(), "[redacted]") {
		t.Errorf("expected the exiting child's stderr, redacted, in the debug log:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), `msg="mcp server configured" server=silent transport=stdio`) {
		t.Errorf("startup log does not name server and transport:\n%s", logs.String())
	}
}

func TestStdioEnvLayering(t *testing.T) {
	t.Setenv("MCPCLIENT_PARENT_VAR", "1")
	no := false
	isolated := helperServer("isolated", "server")
	isolated.InheritEnv = &no
	isolated.Env["EXTRA"] = "x"
	inherit := helperServer("inherit", "server")
	e, m := startModule(t, Config{Servers: []ServerConfig{isolated, inherit}}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := e.CallTool(ctx, axocoatl.ToolCall{Tool: "mcp__isolated__env"})
	if err != nil || res.Content != "EXTRA HOME PATH" {
		t.Fatalf("isolated env: %q %v", res.Content, err)
	}
	res, err = e.CallTool(ctx, axocoatl.ToolCall{Tool: "mcp__inherit__env"})
	if err != nil || !strings.Contains(res.Content, "MCPCLIENT_PARENT_VAR") {
		t.Fatalf("inherited env: %q %v", res.Content, err)
	}
}

// Stop ends a child that ignores stdin EOF and SIGTERM, and every process
// of its group.
func TestStdioStopKillsStubbornChild(t *testing.T) {
	e := axocoatl.New(axocoatl.Options{})
	defer e.Close(context.Background())
	m, err := New(Config{Servers: []ServerConfig{helperServer("stubborn", "ignore-stdin")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Use(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	var pid int
	waitFor(t, 5*time.Second, func() bool { pid = m.servers[0].dial.pid(); return pid != 0 })
	if !processGroupAlive(pid) {
		t.Fatal("child not running")
	}
	start := time.Now()
	if err := m.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Stop took %s", took)
	}
	// Stop has sent SIGKILL to the whole group; on Linux the server runs
	// under the shim, which Stop waits for, while the server's own exit
	// may take a few milliseconds more.
	if !groupDies(pid) {
		t.Fatalf("process group %d still alive 2s after Stop", pid)
	}
	if err := m.Ready(context.Background()); err != nil && !errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), "stopped") && !strings.Contains(err.Error(), "stubborn") {
		t.Fatal(err)
	}
}

// A killed stdio child (no npm needed) is replaced within 5s; calls in the
// outage fail naming the server; the old process group is gone.
func TestStdioKillReconnects(t *testing.T) {
	e, m := startModule(t, Config{Servers: []ServerConfig{helperServer("kid", "server")}}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	old := m.servers[0].dial.pid()
	killProcessGroup(old)
	killed := time.Now()
	var outage []error
	for {
		res, err := e.CallTool(ctx, axocoatl.ToolCall{Tool: "mcp__kid__pid"})
		if err == nil && res.Content != "" && res.Content != strconv.Itoa(old) {
			break
		}
		if err != nil {
			outage = append(outage, err)
		}
		if time.Since(killed) > 5*time.Second {
			t.Fatalf("not back within 5s: %v", outage)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("back after %s, %d calls failed meanwhile", time.Since(killed), len(outage))
	for _, err := range outage {
		if !errors.Is(err, ErrServerDown) || !strings.Contains(err.Error(), "kid") {
			t.Fatalf("outage error: %v", err)
		}
	}
	if !groupDies(old) {
		t.Fatal("old process group alive")
	}
}

// Stop does not wait for a hung call's timeout.
func TestStopDuringHungCall(t *testing.T) {
	ts := newTestServer()
	e, m := startModule(t, Config{Servers: []ServerConfig{{Name: "mem", Dial: ts.dial, Timeout: time.Minute}}}, nil)
	if err := m.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := e.CallTool(context.Background(), axocoatl.ToolCall{Tool: "mcp__mem__hang"})
		done <- err
	}()
	<-ts.hungStarted
	start := time.Now()
	if err := m.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Stop took %s", took)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("hung call succeeded")
		}
		t.Log(err)
	case <-time.After(3 * time.Second):
		t.Fatal("hung call still running after Stop")
	}
}

// A server that stays alive but stops answering (pings included) is found
// by the keep-alive, its session closed and a fresh child started, without
// any tool call having to time out first.
//
// Guards: bound mcp_servers[].keep_alive (docs/bounds.md).
func TestKeepAliveReplacesHungServer(t *testing.T) {
	sc := helperServer("hung", "hang-after-init")
	sc.KeepAlive = 200 * time.Millisecond // two missed pings: about 0.4–0.6 s
	e, m := startModule(t, Config{Servers: []ServerConfig{sc}, MinBackoff: 50 * time.Millisecond}, nil)
	sub, err := e.Bus().Subscribe(lattice.Filter{Types: []string{"McpServer*"}}, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	first := m.servers[0].dial.pid()
	if !m.Status()[0].Connected {
		t.Fatalf("not connected: %+v", m.Status())
	}
	// Connected (maybe already seen by Ready), then Disconnected by the
	// keep-alive, then Connected again to a new child.
	var seq []string
	deadline := time.After(10 * time.Second)
	for len(seq) < 2 || seq[len(seq)-1] != EventServerConnected || !slices.Contains(seq, EventServerDisconnected) {
		select {
		case ev := <-sub.Events():
			seq = append(seq, ev.Type)
		case <-deadline:
			t.Fatalf("hung server not replaced within 10s; events %v, status %+v", seq, m.Status())
		}
	}
	if second := m.servers[0].dial.pid(); second == first || second == 0 {
		t.Fatalf("same child %d after reconnect", first)
	}
	waitFor(t, 5*time.Second, func() bool { return !processGroupAlive(first) })
}

// A mistyped npx package: npm says which package it could not find a dozen
// lines above its last one. The server's error quotes that line.
func TestStartFailureQuotesTheExplainingLine(t *testing.T) {
	lines := []string{
		"npm error code E404",
		"npm error 404 Not Found - GET https://registry.npmjs.org/@modelcontextprotocol%2fserver-nope - Not found",
		"npm error 404",
		"npm error 404  '@modelcontextprotocol/server-nope@*' is not in this registry.",
		"npm error 404",
		"npm error 404 Note that you can also install from a",
		"npm error 404 tarball, folder, http url, or git url.",
		"npm error A complete log of this run can be found in: /root/.npm/_logs/debug-0.log",
	}
	script := "printf '%s\\n' \"$@\" >&2; exit 1"
	cfg := ServerConfig{Name: "nope", Command: "sh", Args: append([]string{"-c", script, "sh"}, lines...), Timeout: 5 * time.Second}
	tools, err := Check(context.Background(), cfg, nil, nil)
	if err == nil || tools != nil {
		t.Fatalf("Check = %v, %v", tools, err)
	}
	if !strings.Contains(err.Error(), "'@modelcontextprotocol/server-nope@*' is not in this registry") || !strings.Contains(err.Error(), "E404") {
		t.Fatalf("error does not quote npm's explanation: %v", err)
	}
	if strings.Contains(err.Error(), "complete log of this run") {
		t.Errorf("error quotes a line that explains nothing: %v", err)
	}
}
