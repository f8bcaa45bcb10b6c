package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/axocoatl/axocoatl-go/internal/natstest"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

// natsServer runs a real nats-server in the test process on a free port.
func natsServer(t *testing.T) string {
	t.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns.ClientURL()
}

// Two daemons on one NATS lattice: what happens on one streams from the
// other.
func TestNATSLattice(t *testing.T) {
	url := natsServer(t)
	cfg := fmt.Sprintf("lattice:\n  backend: nats\n  nats_url: %s\n  prefix: t1\nagents:\n  - id: assistant\n", url)
	a := startDaemon(t, cfg, nil)
	b := startDaemon(t, cfg, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn := dialEvents(t, ctx, b.url, nil, "")

	r := a.do(t, "POST", "/api/agents/assistant/execute", `{"input":"across"}`)
	taskID := r.json(t)["task_id"]
	for _, want := range []string{"AgentActivated", "ModelResult", "TaskCompleted"} {
		f := readFrame(t, ctx, conn)
		var p map[string]any
		json.Unmarshal(f.Event.Payload, &p)
		if f.Kind != "event" || f.Event.Type != want || p["task_id"] != taskID {
			t.Fatalf("frame %+v, want %s of task %v", f, want, taskID)
		}
	}

	// Another prefix is another lattice.
	other := startDaemon(t, strings.Replace(cfg, "prefix: t1", "prefix: t2", 1), nil)
	other.do(t, "POST", "/api/events", `{"type":"Elsewhere"}`)
	a.do(t, "POST", "/api/events", `{"type":"Here"}`)
	if f := readFrame(t, ctx, conn); f.Event.Type != "Here" {
		t.Fatalf("frame %+v, want Here (Elsewhere is on prefix t2)", f)
	}
}

// Two daemons with a cluster key: the other daemon's run telemetry
// (AgentActivated, ModelResult: unsigned on the wire) streams marked
// unverified with the node it claims, its end (signed) unmarked; on the
// daemon that ran it, nothing is marked.
func TestSignedClusterMarksUnverifiedTelemetry(t *testing.T) {
	url := natsServer(t)
	cfg := func(node string) string {
		return fmt.Sprintf("lattice:\n  backend: nats\n  nats_url: %s\n  prefix: t3\n  node: %s\nagents:\n  - id: assistant\n", url, node)
	}
	env := map[string]string{"AXOCOATL_CLUSTER_KEY": "daemon-test-cluster-key-0123456789"}
	a := startDaemon(t, cfg("node-a"), env)
	b := startDaemon(t, cfg("node-b"), env)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	onB, onA := dialEvents(t, ctx, b.url, nil, ""), dialEvents(t, ctx, a.url, nil, "")

	r := a.do(t, "POST", "/api/agents/assistant/execute", `{"input":"across"}`)
	taskID := r.json(t)["task_id"]
	for _, want := range []struct {
		typ        string
		unverified bool
	}{{"AgentActivated", true}, {"ModelResult", true}, {"TaskCompleted", false}} {
		f := readFrame(t, ctx, onB)
		var p map[string]any
		json.Unmarshal(f.Event.Payload, &p)
		if f.Kind != "event" || f.Event.Type != want.typ || p["task_id"] != taskID {
			t.Fatalf("frame %+v, want %s of task %v", f, want.typ, taskID)
		}
		if f.Unverified != want.unverified || (want.unverified && f.Node != "node-a") || (!want.unverified && f.Node != "") {
			t.Errorf("%s on b: unverified %v node %q, want %v", want.typ, f.Unverified, f.Node, want.unverified)
		}
		if f := readFrame(t, ctx, onA); f.Event.Type != want.typ || f.Unverified || f.Node != "" {
			t.Errorf("%s on a, its own: type %s unverified %v node %q", want.typ, f.Event.Type, f.Unverified, f.Node)
		}
	}
	// A client that connects afterwards sees the same marks in the ready
	// frame's history.
	later, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(b.url, "http")+"/api/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer later.CloseNow()
	later.SetReadLimit(1 << 20)
	ready := readFrame(t, ctx, later)
	marks := map[string]string{}
	for _, ev := range ready.History {
		if ev.Unverified {
			marks[ev.Type] = ev.Node
		} else if ev.Node != "" {
			t.Errorf("history: %s unmarked with node %q", ev.Type, ev.Node)
		}
	}
	if ready.Kind != "ready" || marks["AgentActivated"] != "node-a" || marks["ModelResult"] != "node-a" {
		t.Errorf("ready frame's history marks %v, want AgentActivated and ModelResult unverified from node-a", marks)
	}
	if _, marked := marks["TaskCompleted"]; marked {
		t.Error("history: the signed TaskCompleted marked unverified")
	}
}

func TestNATSUnreachable(t *testing.T) {
	code, _, stderr := runCLI(t, nil, "serve", "--addr", "127.0.0.1:0", "--config",
		writeConfig(t, "lattice:\n  backend: nats\n  nats_url: nats://user:hunter2@127.0.0.1:1\nagents:\n  - id: a\n"))
	if code != exitFail || !strings.Contains(stderr, "lattice.nats_url: NATS at nats://[redacted]@127.0.0.1:1") || strings.Contains(stderr, "hunter2") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

// A daemon whose NATS credentials the server refuses does not start, and
// its startup error says so at the key to fix; `doctor` says the same; the
// password shows in neither.
func TestNATSWrongCredentials(t *testing.T) {
	ns := natstest.Start(t, &server.Options{Username: "axo", Password: "the-right-password"})
	cfg := writeConfig(t, "lattice:\n  backend: nats\n  nats_url: "+ns.ClientURL()+"\n  auth:\n    user: axo\n    password: ${NATS_PW}\nagents:\n  - id: a\n")
	env := map[string]string{"NATS_PW": "a-wrong-password"}
	code, _, stderr := runCLI(t, env, "serve", "--addr", "127.0.0.1:0", "--config", cfg)
	if code != exitFail || !strings.Contains(stderr, "lattice.auth.user: NATS at "+ns.ClientURL()) ||
		!strings.Contains(stderr, "NATS refused the credentials: it refused user axo and its password") || strings.Contains(stderr, "wrong-password") {
		t.Fatalf("serve: exit %d, stderr %q", code, stderr)
	}
	code, stdout, _ := runCLI(t, env, "doctor", "--config", cfg)
	if code == 0 || !strings.Contains(stdout, "FAIL lattice:") || !strings.Contains(stdout, "refused user axo") || strings.Contains(stdout, "wrong-password") {
		t.Fatalf("doctor: exit %d, stdout %q", code, stdout)
	}
}

// Two daemons on a nats-server with TLS (client certificates verified)
// and nkey users, each given its seed and certificate by the AXOCOATL_NATS_*
// variables: a task sent to C for A's agent calls a gated tool on A, and
// the approval raised on A is resolved through C. A third daemon with a
// seed the server does not list cannot join, and says so.
func TestClusterOnSecuredNATS(t *testing.T) {
	pki := natstest.NewPKI(t)
	dir := t.TempDir()
	seedA, pubA := natstest.NKeyUser(t, dir, "a")
	seedC, pubC := natstest.NKeyUser(t, dir, "c")
	stranger, _ := natstest.NKeyUser(t, dir, "stranger")
	ns := natstest.Start(t, &server.Options{
		TLSConfig: pki.ServerTLS(t), TLSVerify: true, TLSTimeout: 5, JetStream: true, StoreDir: t.TempDir(),
		Nkeys: []*server.NkeyUser{{Nkey: pubA}, {Nkey: pubC}},
	})
	url := natstest.TLSURL(ns)
	vars := func(seed string) map[string]string {
		return map[string]string{"AXOCOATL_NATS_NKEY": seed, "AXOCOATL_NATS_CA": pki.CAFile,
			"AXOCOATL_NATS_CERT": pki.ClientCert, "AXOCOATL_NATS_KEY": pki.ClientKey}
	}
	modelURL, mcpURL, _ := testutil.DeployPeers(t)
	a := startDaemon(t, clusterConfig(url, "node-a", "  - { id: deployer, provider: openai }",
		fmt.Sprintf("providers:\n  openai: { base_url: %s/v1, api_key: sk-test, max_retries: -1 }\nmcp_servers:\n  - { name: ops, url: %s/mcp }\napproval:\n  default: prompt", modelURL, mcpURL)), vars(seedA))
	c := startDaemon(t, clusterConfig(url, "node-c", "  - { id: on-c, provider: echo }", ""), vars(seedC))
	waitFor(t, "A ready (MCP server connected)", 20*time.Second, func() bool { return a.do(t, "GET", "/health/ready", "").status == 200 })
	waitFor(t, "C lists deployer", 10*time.Second, func() bool { n, _ := agentNode(t, c, "deployer"); return n == "node-a" })

	done := make(chan response, 1)
	go func() { done <- c.do(t, "POST", "/api/agents/deployer/execute", `{"input":"ship it"}`) }()
	var id string
	waitFor(t, "C lists the approval raised on A", 10*time.Second, func() bool {
		var body struct {
			Approvals []struct {
				ID string `json:"approval_id"`
			} `json:"approvals"`
		}
		_ = json.Unmarshal(c.do(t, "GET", "/api/approvals", "").body, &body)
		if len(body.Approvals) == 1 {
			id = body.Approvals[0].ID
		}
		return id != ""
	})
	if r := c.do(t, "POST", "/api/approvals/"+id, `{"decision":"allow"}`); r.status != 200 {
		t.Fatalf("POST on C: %d %s", r.status, r.body)
	}
	if r := <-done; r.status != 200 || r.json(t)["output"] != "done: deployed to prod" {
		t.Fatalf("C's execute: %d %s", r.status, r.body)
	}

	code, _, stderr := runCLI(t, vars(stranger), "serve", "--addr", "127.0.0.1:0", "--config",
		writeConfig(t, clusterConfig(url, "node-x", "  - { id: x, provider: echo }", "")))
	if code != exitFail || !strings.Contains(stderr, "AXOCOATL_NATS_NKEY: NATS at "+url) || !strings.Contains(stderr, "refused the nkey seed in "+stranger) {
		t.Fatalf("a stranger's daemon: exit %d, stderr %q", code, stderr)
	}
}
