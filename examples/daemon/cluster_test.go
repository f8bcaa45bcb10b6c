package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
	"github.com/coder/websocket"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats-server/v2/server"
)

// clusterNATS runs a nats-server with JetStream on a temp dir, on port
// (-1: a free one), until the test ends.
func clusterNATS(t *testing.T, port int) *server.Server {
	t.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns
}

func clusterConfig(natsURL, node, agents, extra string) string {
	return fmt.Sprintf(`lattice:
  backend: nats
  nats_url: %s
  prefix: cl
  node: %s
cluster:
  heartbeat_interval: 100ms
  expire_after: 1500ms
%s
agents:
%s`, natsURL, node, extra, agents)
}

// agentNode is where GET /api/agents says an agent runs ("" = here), and
// whether it is listed at all.
func agentNode(t *testing.T, td *testDaemon, id string) (string, bool) {
	t.Helper()
	var body struct {
		Agents []struct {
			ID   string `json:"id"`
			Node string `json:"node"`
		} `json:"agents"`
	}
	if err := json.Unmarshal(td.do(t, "GET", "/api/agents", "").body, &body); err != nil {
		t.Fatal(err)
	}
	for _, a := range body.Agents {
		if a.ID == id {
			return a.Node, true
		}
	}
	return "", false
}

func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(25 * time.Millisecond)
	}
	return time.Since(start)
}

// runsOf reads a daemon's event stream until it has seen the final event
// (TaskCompleted or AgentFailed) of every task in want; it returns their
// payloads by task id.
func runsOf(t *testing.T, ctx context.Context, conn *websocket.Conn, want ...string) map[string]map[string]any {
	t.Helper()
	got := map[string]map[string]any{}
	for len(got) < len(want) {
		f := readFrame(t, ctx, conn)
		if f.Kind != "event" || (f.Event.Type != "TaskCompleted" && f.Event.Type != "AgentFailed") {
			continue
		}
		var p map[string]any
		_ = json.Unmarshal(f.Event.Payload, &p)
		p["type"] = f.Event.Type
		for _, id := range want {
			if p["task_id"] == id {
				got[id] = p
			}
		}
	}
	return got
}

// Three daemons on one NATS. An HTTP execute, an A2A task (a2a-go client)
// and an MCP tools/call (go-sdk client) sent to B for an agent hosted on A
// run on A and answer with A's output; B's cards and tool list say where
// the agent runs; a cancel from B's MCP client stops the run on A; A's
// /metrics counts the runs, B's and C's do not, while every daemon's event
// stream shows them all; C's departure empties its agents from the others'
// lists within seconds; with NATS down B answers 503 for A's agent (not a
// hang, not 404) and recovers by itself when NATS is back.
func TestClusterOfThreeDaemons(t *testing.T) {
	ns := clusterNATS(t, -1)
	port := ns.Addr().(*net.TCPAddr).Port
	url := ns.ClientURL()
	slowURL, slowStarted := hangingModelServer(t)
	a := startDaemon(t, clusterConfig(url, "node-a", `  - { id: faraway, name: Far Away, description: Echoes from A., provider: echo }
  - { id: slowpoke, provider: openai, model: m, timeout: 30s }`,
		"providers:\n  openai: { base_url: "+slowURL+", api_key: none, max_retries: -1 }"), nil)
	b := startDaemon(t, clusterConfig(url, "node-b", "  - { id: on-b, provider: echo }", ""), nil)
	c := startDaemon(t, clusterConfig(url, "node-c", "  - { id: on-c, provider: echo }", ""), nil)
	for _, td := range []*testDaemon{b, c} {
		waitFor(t, "A's agents listed on "+td.url, 5*time.Second, func() bool {
			n, ok := agentNode(t, td, "slowpoke")
			return ok && n == "node-a"
		})
	}
	waitFor(t, "C's agent listed on A", 5*time.Second, func() bool { n, _ := agentNode(t, a, "on-c"); return n == "node-c" })

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	streams := map[string]*websocket.Conn{}
	for name, td := range map[string]*testDaemon{"A": a, "B": b, "C": c} {
		streams[name] = dialEvents(t, ctx, td.url, nil, "")
	}

	// HTTP execute on B.
	r := b.do(t, "POST", "/api/agents/faraway/execute", `{"input":"via http on B"}`)
	httpRes := r.json(t)
	if r.status != 200 || httpRes["output"] != "via http on B" || httpRes["agent_id"] != "faraway" {
		t.Fatalf("execute on B: %d %s", r.status, r.body)
	}

	// A2A on B: the card lists A's agent with its node; the per-agent
	// endpoint of B runs it.
	card, err := agentcard.DefaultResolver.Resolve(ctx, b.url)
	if err != nil {
		t.Fatal(err)
	}
	var tagged bool
	for _, s := range card.Skills {
		if s.ID == "faraway" && strings.Contains(strings.Join(s.Tags, " "), "node:node-a") {
			tagged = true
		}
	}
	if !tagged {
		t.Fatalf("B's card skills %+v: no faraway tagged node:node-a", card.Skills)
	}
	if r := b.do(t, "GET", "/.well-known/agent.json", ""); !strings.Contains(string(r.body), `{"id":"faraway","name":"Far Away","description":"Echoes from A.","node":"node-a"}`) {
		t.Fatalf("B's Axocoatl card: %s", r.body)
	}
	one, err := agentcard.DefaultResolver.Resolve(ctx, b.url+"/a2a/agents/faraway")
	if err != nil {
		t.Fatal(err)
	}
	ac, err := a2aclient.NewFromCard(ctx, one, a2aclient.WithJSONRPCTransport(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer ac.Destroy()
	sent, err := ac.SendMessage(ctx, &a2a03.MessageSendParams{Message: a2a03.NewMessage(a2a03.MessageRoleUser, a2a03.TextPart{Text: "via a2a on B"})})
	if err != nil {
		t.Fatal(err)
	}
	a2aTask, ok := sent.(*a2a03.Task)
	if !ok || a2aTask.Status.State != a2a03.TaskStateCompleted || a2aTask.Artifacts[0].Parts[0].(a2a03.TextPart).Text != "via a2a on B" {
		t.Fatalf("A2A on B: %#v", sent)
	}

	// MCP on B: A's agents are tools, with where they run; a call answers
	// with A's output.
	cs, err := mcpClient().Connect(ctx, &mcp.StreamableClientTransport{Endpoint: b.url + "/mcp", MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		if tool.Name == "agent_faraway" && tool.Meta["axocoatl/node"] != "node-a" {
			t.Fatalf("agent_faraway's _meta: %v", tool.Meta)
		}
	}
	if got := strings.Join(names, ","); got != "agent_faraway,agent_on-b,agent_on-c,agent_slowpoke" {
		t.Fatalf("B's MCP tools: %s", got)
	}
	called, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_faraway", Arguments: map[string]any{"input": "via mcp on B"}})
	if err != nil || called.IsError || mcpText(called) != "via mcp on B" {
		t.Fatalf("tools/call on B: %v %+v", err, called)
	}
	mcpTask, _ := called.Meta["axocoatl/task_id"].(string)

	// A cancel from B's MCP client stops the run on A.
	callCtx, stopCall := context.WithCancel(ctx)
	callDone := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(callCtx, &mcp.CallToolParams{Name: "agent_slowpoke", Arguments: map[string]any{"input": "never answered"}})
		callDone <- err
	}()
	select {
	case <-slowStarted: // A's model call is under way
	case <-time.After(10 * time.Second):
		t.Fatal("the slow run did not start on A")
	}
	stopCall()
	<-callDone
	var canceled map[string]any
	for canceled == nil {
		f := readFrame(t, ctx, streams["A"])
		var p map[string]any
		_ = json.Unmarshal(f.Event.Payload, &p)
		if f.Kind == "event" && f.Event.Type == "AgentFailed" && p["agent_id"] == "slowpoke" {
			canceled = p
		}
	}
	if canceled["canceled"] != true || canceled["source"] != "mcp" {
		t.Fatalf("A's slow run ended %v, want canceled (from B's MCP door)", canceled)
	}

	// Every stream shows A's runs, whichever daemon's door they came in by.
	for _, name := range []string{"B", "C"} {
		runs := runsOf(t, ctx, streams[name], httpRes["task_id"].(string), string(a2aTask.ID), mcpTask)
		for id, p := range runs {
			if p["type"] != "TaskCompleted" || p["agent_id"] != "faraway" {
				t.Fatalf("%s's stream: task %s %v", name, id, p)
			}
		}
	}
	// Only A counts them.
	execRE := regexp.MustCompile(`axocoatl_executions_total\{agent="(faraway|slowpoke)",source="(\w+)",status="(\w+)"\} (\d+)`)
	waitFor(t, "A's metrics", 5*time.Second, func() bool {
		got := execRE.FindAllStringSubmatch(string(a.do(t, "GET", "/metrics", "").body), -1)
		seen := map[string]string{}
		for _, m := range got {
			seen[m[1]+"/"+m[2]+"/"+m[3]] = m[4]
		}
		return len(got) == 4 && seen["faraway/api/completed"] == "1" && seen["faraway/a2a/completed"] == "1" &&
			seen["faraway/mcp/completed"] == "1" && seen["slowpoke/mcp/canceled"] == "1"
	})
	for _, td := range []*testDaemon{b, c} {
		if m := execRE.FindString(string(td.do(t, "GET", "/metrics", "").body)); m != "" {
			t.Fatalf("%s counts A's run: %s", td.url, m)
		}
	}

	// With NATS down, B answers A's agent with 503 at once, and comes
	// back by itself.
	ns.Shutdown()
	ns.WaitForShutdown()
	waitFor(t, "B notices NATS is gone", 5*time.Second, func() bool {
		r := b.do(t, "POST", "/api/agents/faraway/execute", `{"input":"x"}`)
		return r.status == 503
	})
	for path, body := range map[string]string{"/api/agents/faraway/execute": `{"input":"x"}`, "/a2a/tasks": `{"input":"x","receiver_id":"faraway"}`} {
		start := time.Now()
		r := b.do(t, "POST", path, body)
		body := string(r.body)
		if r.status != 503 || !strings.Contains(body, `"cluster_unavailable"`) || !strings.Contains(body, "NATS connection") || time.Since(start) > time.Second {
			t.Fatalf("%s with NATS down: %d %s after %s", path, r.status, body, time.Since(start))
		}
	}
	if r := b.do(t, "POST", "/api/agents/on-b/execute", `{"input":"local still works"}`); r.status != 200 {
		t.Fatalf("B's own agent with NATS down: %d %s", r.status, r.body)
	}
	clusterNATS(t, port)
	took := waitFor(t, "B reaches A again", 20*time.Second, func() bool {
		return b.do(t, "POST", "/api/agents/faraway/execute", `{"input":"back"}`).status == 200
	})
	t.Logf("B's execute of A's agent answered again %s after NATS restarted", took)

	// C stops (once it is back on NATS): its agent leaves A's and B's
	// lists at once.
	waitFor(t, "C reaches A again", 20*time.Second, func() bool {
		return c.do(t, "POST", "/api/agents/faraway/execute", `{"input":"back"}`).status == 200
	})
	for _, conn := range streams { // a stream left open holds its daemon's stop 5 s for its close frame
		conn.CloseNow()
	}
	c.stop()
	for _, td := range []*testDaemon{a, b} {
		took := waitFor(t, "C's agent leaves "+td.url, 3*time.Second, func() bool { _, ok := agentNode(t, td, "on-c"); return !ok })
		t.Logf("C's agent left %s's list after %s", td.url, took)
	}
	waitFor(t, "agent_on-c leaves B's MCP tools", 3*time.Second, func() bool {
		tools, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range tools.Tools {
			if tool.Name == "agent_on-c" {
				return false
			}
		}
		return true
	})
	// Stop the daemons while NATS is up (cleanups run in reverse).
	b.stop()
	a.stop()
}

// Daemon processes in a cluster: `axocoatl mcp serve` (stdio, go-sdk
// client) offers and runs an agent another daemon hosts; a daemon process
// killed with SIGKILL (no departure announced) answers 503 at once and
// leaves the others' agent lists once its heartbeat expires, within
// seconds.
func TestClusterProcesses(t *testing.T) {
	bin := buildBinary(t)
	ns := clusterNATS(t, -1)
	b := startDaemon(t, clusterConfig(ns.ClientURL(), "node-b", "  - { id: on-b, provider: echo }", ""), nil)

	t.Run("mcp serve", func(t *testing.T) {
		cmd := mcpCommand(t, bin, writeConfig(t, clusterConfig(ns.ClientURL(), "node-m", "  - { id: on-m, provider: echo }", "")))
		cs, err := mcpClient().Connect(mcpCtx(t), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		var meta mcp.Meta
		waitFor(t, "mcp serve lists B's agent", 10*time.Second, func() bool {
			tools, err := cs.ListTools(mcpCtx(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, tool := range tools.Tools {
				if tool.Name == "agent_on-b" {
					meta = tool.Meta
				}
			}
			return meta != nil
		})
		if meta["axocoatl/node"] != "node-b" {
			t.Fatalf("agent_on-b _meta %v", meta)
		}
		res, err := cs.CallTool(mcpCtx(t), &mcp.CallToolParams{Name: "agent_on-b", Arguments: map[string]any{"input": "over stdio, run on B"}})
		if err != nil || res.IsError || mcpText(res) != "over stdio, run on B" {
			t.Fatalf("agent_on-b over mcp serve: %v %+v", err, res)
		}
	})

	t.Run("killed", func(t *testing.T) {
		_, cmd, _ := startBinary(t, bin, nil, "--addr", "127.0.0.1:0", "--config",
			writeConfig(t, clusterConfig(ns.ClientURL(), "node-k", "  - { id: on-k, provider: echo }", "")))
		waitFor(t, "B lists the process's agent", 10*time.Second, func() bool { n, _ := agentNode(t, b, "on-k"); return n == "node-k" })
		if r := b.do(t, "POST", "/api/agents/on-k/execute", `{"input":"to the process"}`); r.status != 200 || r.json(t)["output"] != "to the process" {
			t.Fatalf("B → process: %d %s", r.status, r.body)
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		killed := time.Now()
		if r := b.do(t, "POST", "/api/agents/on-k/execute", `{"input":"x"}`); r.status != 503 && r.status != 404 {
			t.Fatalf("B → killed process: %d %s, want 503 (or 404 once expired)", r.status, r.body)
		}
		waitFor(t, "the killed daemon's agent leaves B's list", 5*time.Second, func() bool { _, ok := agentNode(t, b, "on-k"); return !ok })
		t.Logf("killed daemon's agent left B's list %s after SIGKILL (expire_after 1.5s)", time.Since(killed).Round(time.Millisecond))
	})
}

// A task sent to C for A's agent calls a gated MCP tool on A: the approval
// raised on A is listed by C's GET /api/approvals and C's event stream's
// ready frame, C's POST resolves it, and C's execute answers with A's run.
func TestClusterApprovalResolvedElsewhere(t *testing.T) {
	ns := clusterNATS(t, -1)
	modelURL, mcpURL, _ := testutil.DeployPeers(t)
	a := startDaemon(t, clusterConfig(ns.ClientURL(), "node-a", "  - { id: deployer, provider: openai }",
		fmt.Sprintf("providers:\n  openai: { base_url: %s/v1, api_key: sk-test, max_retries: -1 }\nmcp_servers:\n  - { name: ops, url: %s/mcp }\napproval:\n  default: prompt", modelURL, mcpURL)), nil)
	c := startDaemon(t, clusterConfig(ns.ClientURL(), "node-c", "  - { id: on-c, provider: echo }", ""), nil)
	waitFor(t, "A ready (MCP server connected)", 20*time.Second, func() bool { return a.do(t, "GET", "/health/ready", "").status == 200 })
	waitFor(t, "C lists deployer", 5*time.Second, func() bool { n, _ := agentNode(t, c, "deployer"); return n == "node-a" })

	done := make(chan response, 1)
	go func() { done <- c.do(t, "POST", "/api/agents/deployer/execute", `{"input":"ship it"}`) }()
	var id string
	waitFor(t, "C lists the approval raised on A", 10*time.Second, func() bool {
		var body struct {
			Approvals []struct {
				ID   string `json:"approval_id"`
				Tool string `json:"tool"`
				Args string `json:"arguments"`
			} `json:"approvals"`
		}
		_ = json.Unmarshal(c.do(t, "GET", "/api/approvals", "").body, &body)
		if len(body.Approvals) == 1 && body.Approvals[0].Tool == "mcp__ops__deploy" && body.Approvals[0].Args == `{"env":"prod"}` {
			id = body.Approvals[0].ID
		}
		return id != ""
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn := dialEvents(t, ctx, c.url, nil, "") // reads and checks the ready frame
	conn.CloseNow()
	if r := c.do(t, "POST", "/api/approvals/"+id, `{"decision":"allow"}`); r.status != 200 || r.json(t)["holder"] != "node-a" {
		t.Fatalf("POST on C: %d %s\nA: %s\nC: %s", r.status, r.body, a.stderr.String(), c.stderr.String())
	}
	r := <-done
	if r.status != 200 || r.json(t)["output"] != "done: deployed to prod" {
		t.Fatalf("C's execute: %d %s", r.status, r.body)
	}
}
