package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	mcpgoclient "github.com/mark3labs/mcp-go/client"
	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

// Acceptance of `axocoatl mcp serve` and of /mcp, on the built binary.

const mcpWantSchema = testutil.AgentInputSchema

// mcpConfig writes a config with an echo agent and an agent whose
// OpenAI-compatible provider answers 500 (a real HTTP server doing so).
func mcpConfig(t *testing.T) string {
	t.Helper()
	upstream := openAIServer(t, 0, http.StatusInternalServerError)
	return writeConfig(t, `
server:
  shutdown_grace: 5s
mcp_server:
  name: axocoatl-under-test
  progress_interval: 1s
providers:
  openai: { base_url: `+upstream.URL+`/v1, api_key: sk-test, max_retries: -1 }
agents:
  - id: echo
    name: Echo
    description: Repeats its input.
    provider: echo
  - id: broken
    provider: openai
    model: gpt-test
`)
}

// mcpCommand runs the binary as `axocoatl mcp serve` with a clean
// environment in an empty directory.
func mcpCommand(t *testing.T, bin, config string) *exec.Cmd {
	cmd := exec.Command(bin, "mcp", "serve", "--config", config)
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	return cmd
}

func mcpCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mcpText(res *mcp.CallToolResult) string {
	if res == nil || len(res.Content) != 1 {
		return ""
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

// checkMCPSession is what any go-sdk client session must see; it
// negotiated era.
func checkMCPSession(t *testing.T, cs *mcp.ClientSession, era string) {
	t.Helper()
	ctx := mcpCtx(t)
	if v := cs.InitializeResult().ProtocolVersion; v != era {
		t.Errorf("negotiated %q, want %s", v, era)
	}
	if info := cs.InitializeResult().ServerInfo; info == nil || info.Name != "axocoatl-under-test" || info.Version == "" {
		t.Errorf("serverInfo %+v, want the mcp_server.name of the config and a version", info)
	}
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var want any
	json.Unmarshal([]byte(mcpWantSchema), &want)
	names := map[string]*mcp.Tool{}
	for _, tool := range list.Tools {
		names[tool.Name] = tool
		if !reflect.DeepEqual(tool.InputSchema, want) {
			t.Errorf("%s schema %v", tool.Name, tool.InputSchema)
		}
	}
	if len(names) != 2 || names["agent_echo"] == nil || names["agent_broken"] == nil {
		t.Fatalf("tools: %v, want agent_echo and agent_broken", names)
	}
	if d := names["agent_echo"].Description; d != "Repeats its input." {
		t.Errorf("agent_echo description %q", d)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_echo", Arguments: map[string]any{"input": "through the binary"}})
	if err != nil || res.IsError || mcpText(res) != "through the binary" {
		t.Errorf("agent_echo: %q %v %v", mcpText(res), res, err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_broken", Arguments: map[string]any{"input": "x"}})
	if err != nil || !res.IsError || !strings.Contains(mcpText(res), "500") || !strings.Contains(mcpText(res), "upstream exploded") {
		t.Errorf("agent_broken: %q (isError %v) %v, want isError with the provider's reason", mcpText(res), res != nil && res.IsError, err)
	}
	if strings.Contains(mcpText(res), "sk-test") {
		t.Errorf("the API key leaked into a tool result: %q", mcpText(res))
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_echo", Arguments: map[string]any{}})
	if err != nil || !res.IsError || !strings.Contains(mcpText(res), `"input"`) {
		t.Errorf("missing input: %q %v", mcpText(res), err)
	}
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_nobody", Arguments: map[string]any{"input": "x"}})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("unknown tool: %v, want -32602", err)
	}
	if era != era2026 { // the stateless era has no ping
		if err := cs.Ping(ctx, nil); err != nil {
			t.Errorf("ping: %v", err)
		}
	}
}

func mcpClient() *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "daemon-test", Version: "1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
}

func TestMCPServeBinary(t *testing.T) {
	bin := buildBinary(t)
	config := mcpConfig(t)

	t.Run("go-sdk CommandTransport", func(t *testing.T) {
		cmd := mcpCommand(t, bin, config)
		var stderr testutil.SyncBuffer
		cmd.Stderr = &stderr
		cs, err := mcpClient().Connect(mcpCtx(t), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatalf("connect: %v\n%s", err, stderr.String())
		}
		checkMCPSession(t, cs, era2026)
		if err := cs.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		if !strings.Contains(stderr.String(), "axocoatl mcp serve ready") {
			t.Errorf("logs did not go to stderr: %q", stderr.String())
		}
	})

	t.Run("stdout carries only JSON-RPC; EOF exits 0", func(t *testing.T) {
		cmd := mcpCommand(t, bin, config)
		stdin, _ := cmd.StdinPipe()
		var stdout, stderr testutil.SyncBuffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Written all at once, stdin closed at once: the server answers
		// every request it read before exiting.
		io.WriteString(stdin, strings.Join([]string{
			`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`,
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
			`{"jsonrpc":"2.0","id":2,"method":`,
			`{"jsonrpc":"2.0","id":3,"method":"no/such/method"}`,
			`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"agent_nobody","arguments":{"input":"x"}}}`,
			`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"agent_echo","arguments":{}}}`,
			`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"agent_broken","arguments":{"input":"x"}}}`,
			`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"agent_echo","arguments":{"input":"last"}}}`,
			`{"jsonrpc":"2.0","id":8,"method":"ping"}`,
		}, "\n")+"\n")
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("exit: %v, want 0\n%s", err, stderr.String())
			}
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Fatalf("no exit after EOF\n%s", stderr.String())
		}
		replies := map[string]string{}
		sc := bufio.NewScanner(strings.NewReader(stdout.String()))
		sc.Buffer(nil, 8<<20)
		for sc.Scan() {
			var m struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   *struct {
					Code int `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil || m.JSONRPC != "2.0" {
				t.Errorf("stdout carried a non-JSON-RPC line: %q", sc.Text())
				continue
			}
			replies[string(m.ID)] = sc.Text()
		}
		for id, want := range map[string]string{
			"0": `"protocolVersion":"2025-11-25"`, "1": `"inputSchema":` + mcpWantSchema, "null": `"code":-32700`,
			"3": `"code":-32601`, "4": `"code":-32602`, "5": `"isError":true`, "6": `upstream exploded`,
			"7": `"text":"last"`, "8": `"result":{}`,
		} {
			if !strings.Contains(replies[id], want) {
				t.Errorf("reply to id %s = %q, want %s", id, replies[id], want)
			}
		}
	})

	t.Run("mcp-go stdio client", func(t *testing.T) {
		c, err := mcpgoclient.NewStdioMCPClientWithOptions(bin, nil, []string{"mcp", "serve", "--config", config})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ctx := mcpCtx(t)
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		checkMCPGoClient(t, ctx, c)
	})

	t.Run("Inspector CLI over stdio", func(t *testing.T) {
		// The Inspector takes --config for itself: pass the path in the
		// child's environment (-e; the child inherits nothing else).
		testutil.CheckAgentTools(t, "-e", "AXOCOATL_CONFIG="+config, bin, "mcp", "serve")
	})

	t.Run("client gone: no SIGPIPE death", func(t *testing.T) {
		cmd := mcpCommand(t, bin, config)
		stdin, _ := cmd.StdinPipe()
		defer stdin.Close()
		stdout, _ := cmd.StdoutPipe()
		var stderr testutil.SyncBuffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		io.WriteString(stdin, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`+"\n")
		bufio.NewReader(stdout).ReadString('\n')
		stdout.Close() // the client stops reading; its stdin stays open
		io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n")
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), "broken pipe") {
				t.Errorf("exit %v, want 1 with the reason on stderr (not a signal)\n%s", err, stderr.String())
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Errorf("still running after its client went away\n%s", stderr.String())
		}
	})

	t.Run("SIGTERM exits 0", func(t *testing.T) {
		cmd := mcpCommand(t, bin, config)
		stdin, _ := cmd.StdinPipe() // held open: only the signal ends it
		defer stdin.Close()
		var stderr testutil.SyncBuffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(stderr.String(), "ready") && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("exit after SIGTERM: %v\n%s", err, stderr.String())
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Errorf("no exit after SIGTERM\n%s", stderr.String())
		}
	})
}

// /mcp on `axocoatl serve`, behind the API token.
func TestMCPHTTPBinary(t *testing.T) {
	bin := buildBinary(t)
	config := mcpConfig(t)
	const token = "mcp-test-token-0123"
	base, cmd, stderr := startBinary(t, bin, []string{"AXOCOATL_API_TOKEN=" + token}, "--config", config, "--addr", "127.0.0.1:0")
	url := base + "/mcp"

	t.Run("no token: 401", func(t *testing.T) {
		_, err := mcpClient().Connect(mcpCtx(t), &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, nil)
		if err == nil || !strings.Contains(err.Error(), "Unauthorized") && !strings.Contains(err.Error(), "401") {
			t.Errorf("connect without token: %v, want 401", err)
		}
	})
	t.Run("foreign Origin: 403", func(t *testing.T) {
		req, _ := http.NewRequest("POST", url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Origin", "https://evil.example")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("foreign origin: %d, want 403", resp.StatusCode)
		}
	})
	t.Run("go-sdk client", func(t *testing.T) {
		hc := &http.Client{Transport: bearer{token, http.DefaultTransport}}
		cs, err := mcpClient().Connect(mcpCtx(t), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		checkMCPSession(t, cs, era2026)
		cs.Close()
	})
	t.Run("mcp-go client", func(t *testing.T) {
		c, err := mcpgoclient.NewStreamableHttpClient(url, mcpgotransport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ctx := mcpCtx(t)
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		checkMCPGoClient(t, ctx, c)
	})
	t.Run("Inspector CLI over /mcp", func(t *testing.T) {
		testutil.CheckAgentTools(t, url, "--header", "Authorization: Bearer "+token)
	})

	// Connected clients must not hold up shutdown: a 2025-11-25 session
	// with its GET stream, and a 2026-07-28 client with its
	// subscriptions/listen stream (a POST that stays open).
	hc := &http.Client{Transport: bearer{token, http.DefaultTransport}}
	cs, err := mcpClient().Connect(mcpCtx(t), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: era2025})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	listener := mcp.NewClient(&mcp.Implementation{Name: "listener", Version: "1"}, &mcp.ClientOptions{
		Capabilities:           &mcp.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {},
	})
	cs2, err := listener.Connect(mcpCtx(t), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs2.Close()
	// Nor a connection that never sent a request (a client's unused spare
	// connection: net/http alone waits 5 s for it).
	silent, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	time.Sleep(50 * time.Millisecond) // accepted
	start := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit after SIGTERM: %v\n%s", err, stderr.String())
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("shutdown took %s with an MCP client connected", d)
	}
}

func checkMCPGoClient(t *testing.T, ctx context.Context, c *mcpgoclient.Client) {
	t.Helper()
	if _, tools := testutil.CheckMCPGoAgents(t, ctx, c, "2026-07-28"); len(tools) != 2 {
		t.Errorf("tools/list: %d tools, want agent_echo and agent_broken", len(tools))
	}
}
