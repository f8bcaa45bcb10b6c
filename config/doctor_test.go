package config_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/config"
)

// doctor checks what the daemon needs of NATS: with webhooks, JetStream
// (the daemon refuses to start without it; doctor must not say ok).
func TestDoctorChecksJetStreamForWebhooks(t *testing.T) {
	// A receiver that is there: doctor also connects to each webhook.
	recv := httptest.NewServer(http.NotFoundHandler())
	defer recv.Close()
	for _, js := range []bool{false, true} {
		ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true, JetStream: js, StoreDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		go ns.Start()
		if !ns.ReadyForConnections(5 * time.Second) {
			t.Fatal("nats-server not ready")
		}
		yaml := "agents:\n  - id: a\nlattice:\n  backend: nats\n  nats_url: " + ns.ClientURL() +
			"\nwebhooks:\n  - name: w\n    url: " + recv.URL + "/hook\n    secret: s3cret-value\n"
		cfg, err := config.Parse("inline.yaml", []byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		report := cfg.Doctor(context.Background())
		var out bytes.Buffer
		report.Print(&out)
		ns.Shutdown()
		ns.WaitForShutdown()
		if js && (report.Failed() || !strings.Contains(out.String(), "JetStream")) {
			t.Errorf("JetStream on:\n%s", out.String())
		}
		if !js && (!report.Failed() || !strings.Contains(out.String(), "FAIL lattice") || !strings.Contains(out.String(), "-js")) {
			t.Errorf("JetStream off, webhooks configured:\n%s", out.String())
		}
	}
}

// The tool listing says which agents may call each of this daemon's tools:
// an agent of another daemon (listed by the cluster) runs there, with that
// daemon's tools, never these.
func TestToolsListNoRemoteAgents(t *testing.T) {
	cfg, err := config.Parse("inline.yaml", []byte("agents:\n  - id: here\n"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cfg.Server.DataDir = t.TempDir() // conversations.db
	rt, err := cfg.Build(ctx, config.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	if err := rt.Engine.RegisterTool(axocoatl.Tool{Name: "local_tool", Call: func(context.Context, axocoatl.ToolCall) (axocoatl.ToolResult, error) {
		return axocoatl.ToolResult{}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	remove, err := rt.Engine.AddRemoteAgent(axocoatl.AgentInfo{Spec: agent.Spec{ID: "far"}, Node: "other"},
		func(context.Context, axocoatl.Request) (axocoatl.Result, error) { return axocoatl.Result{}, nil })
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	for _, ti := range rt.Tools() {
		if ti.Name == "local_tool" && (len(ti.Agents) != 1 || ti.Agents[0] != "here") {
			t.Fatalf("local_tool may be called by %v, want [here]", ti.Agents)
		}
	}
}
