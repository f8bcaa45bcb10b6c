package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	mcpgoclient "github.com/mark3labs/mcp-go/client"
	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axocoatl/axocoatl-go/internal/testutil"
	"github.com/axocoatl/axocoatl-go/mcpserver"
)

// childCommand runs this test binary as an MCP stdio server (see TestMain).
func childCommand(ctx context.Context) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"=1")
	return cmd
}

// The go-sdk's CommandTransport running the server as a child process, in
// each era.
func TestChildGoSDKCommandTransport(t *testing.T) {
	for _, c := range []struct {
		era  string
		opts *mcp.ClientSessionOptions
	}{{mcpserver.ProtocolVersion2026, nil}, {"2025-11-25", legacy}} {
		t.Run(c.era, func(t *testing.T) {
			cmd := childCommand(context.Background())
			var stderr testutil.SyncBuffer
			cmd.Stderr = &stderr
			log := newProgressLog()
			cs, err := testClient(&mcp.ClientOptions{ProgressNotificationHandler: log.handler}).Connect(ctxT(t), &mcp.CommandTransport{Command: cmd}, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			checkSession(t, cs, c.era)
			checkProgress(t, cs, log)
			if err := cs.Close(); err != nil {
				t.Errorf("close: %v (stderr: %s)", err, stderr.String())
			}
		})
	}
}

// StdoutIsProtocolOnly runs a child, feeds it good and bad frames, closes
// its stdin and expects: only JSON-RPC lines on stdout, one reply per
// request, and a clean exit.
func TestChildStdoutIsProtocolOnly(t *testing.T) {
	checkStdoutProtocolOnly(t, childCommand(ctxT(t)))
}

func checkStdoutProtocolOnly(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr testutil.SyncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	frames := []string{
		initFrame,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		`not json at all`,
		`{"jsonrpc":"2.0","id":2,"method":"nope"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"agent_echo","arguments":{"input":"out"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"agent_echo","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"agent_nobody","arguments":{"input":"x"}}}`,
		`{"jsonrpc":"2.0","id":6,"method":"ping"}`,
	}
	for _, f := range frames {
		io.WriteString(stdin, f+"\n")
	}
	// Wait for the last reply before closing stdin: EOF ends the session,
	// and calls still running would be cancelled.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(stdout.String(), `"id":6`) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit after EOF: %v, want 0 (stderr: %s)", err, stderr.String())
	}
	var replies int
	sc := bufio.NewScanner(strings.NewReader(stdout.String()))
	sc.Buffer(nil, 8<<20)
	for sc.Scan() {
		var m struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil || m.JSONRPC != "2.0" {
			t.Errorf("stdout carried a non-JSON-RPC line: %q", sc.Text())
		}
		if m.ID != nil {
			replies++
		}
	}
	if replies != 8 { // every frame with an id, plus the parse error
		t.Errorf("%d replies on stdout, want 8:\n%s", replies, stdout.String())
	}
}

// checkMCPGo runs the acceptance checks with a mark3labs/mcp-go client.
func checkMCPGo(t *testing.T, c *mcpgoclient.Client, era string) {
	t.Helper()
	ctx := ctxT(t)
	var progMu sync.Mutex
	var progress []string
	c.OnNotification(func(n mcpgo.JSONRPCNotification) {
		if n.Method == "notifications/progress" {
			progMu.Lock()
			progress = append(progress, n.Params.AdditionalFields["message"].(string))
			progMu.Unlock()
		}
	})
	res, _ := testutil.CheckMCPGoAgents(t, ctx, c, era)
	if res.ServerInfo.Name != mcpserver.DefaultName {
		t.Errorf("initialize: server %q", res.ServerInfo.Name)
	}
	req := mcpgo.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = "agent_worker", map[string]any{"input": "time?"}
	req.Params.Meta = &mcpgo.Meta{ProgressToken: "p"}
	if got, err := c.CallTool(ctx, req); err != nil || mcpgo.GetTextFromContent(got.Content[0]) != "the clock says noon" {
		t.Errorf("agent_worker: %+v %v", got, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		progMu.Lock()
		n := len(progress)
		progMu.Unlock()
		if n >= 3 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	progMu.Lock()
	defer progMu.Unlock()
	if len(progress) < 3 || !strings.Contains(progress[1], "calling tool clock") {
		t.Errorf("mcp-go saw progress %q", progress)
	}
	if era == mcpserver.ProtocolVersion2026 {
		return // no ping in the stateless era
	}
	//lint:ignore SA1019 ping is still part of 2025-11-25, the era this session negotiated
	if err := c.Ping(ctx); err != nil {
		t.Errorf("ping: %v", err)
	}
}

// mcpGoEras: mcp-go v1.2 prefers 2026-07-28 (server/discover), and speaks
// 2025-11-25 when pinned to it.
var mcpGoEras = []string{mcpserver.ProtocolVersion2026, "2025-11-25"}

func TestChildMCPGoStdio(t *testing.T) {
	for _, era := range mcpGoEras {
		t.Run(era, func(t *testing.T) {
			c, err := mcpgoclient.NewStdioMCPClient(os.Args[0], []string{childEnv + "=1"})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// The constructor started the transport; Start also hooks up the
			// notification handlers.
			if err := c.Start(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			checkMCPGo(t, c, era)
		})
	}
}

func TestHTTPMCPGo(t *testing.T) {
	for _, era := range mcpGoEras {
		t.Run(era, func(t *testing.T) {
			f := newFixture(t, mcpserver.Config{})
			ts := serveHTTP(t, f)
			c, err := mcpgoclient.NewStreamableHttpClient(ts.URL+"/mcp", mcpgotransport.WithHTTPTimeout(20*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.Start(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			checkMCPGo(t, c, era)
		})
	}
}

func TestInspectorStdio(t *testing.T) {
	testutil.CheckAgentTools(t, "-e", childEnv+"=1", os.Args[0])
}

func TestInspectorHTTP(t *testing.T) {
	f := newFixture(t, mcpserver.Config{})
	ts := serveHTTP(t, f)
	testutil.CheckAgentTools(t, ts.URL+"/mcp")
}
