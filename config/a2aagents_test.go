package config_test

import (
	"bytes"
	"context"
	"iter"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/axocoatl/axocoatl-go/config"
	"github.com/axocoatl/axocoatl-go/secret"
)

// a2aRemote serves one A2A 1.0 agent with a2a-go/v2's reference server; it
// answers "remote: <input>".
func a2aRemote(t *testing.T) string {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	mux.Handle("/a2a", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(remoteEcho{})))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(&a2a1.AgentCard{
		Name: "Planner", Description: "Plans.", Version: "1",
		SupportedInterfaces: []*a2a1.AgentInterface{a2a1.NewAgentInterface(srv.URL+"/a2a", a2a1.TransportProtocolJSONRPC)},
		Capabilities:        a2a1.AgentCapabilities{Streaming: true},
	}))
	return srv.URL
}

type remoteEcho struct{}

func (remoteEcho) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a1.Event, error] {
	return func(yield func(a2a1.Event, error) bool) {
		yield(a2a1.NewMessage(a2a1.MessageRoleAgent, a2a1.NewTextPart("remote: "+ec.Message.Parts[0].Text())), nil)
	}
}

func (remoteEcho) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a1.Event, error] {
	return func(yield func(a2a1.Event, error) bool) {
		yield(a2a1.NewStatusUpdateEvent(ec, a2a1.TaskStateCanceled, nil), nil)
	}
}

// a2a_agents: errors name file, line and key (a near-miss key gets "did you
// mean"), header values are secrets of the config, and none appears in an
// error.
func TestA2AAgentsSection(t *testing.T) {
	const good = `agents:
  - id: a
a2a_agents:
  - name: planner
    url: https://planner.example.com
    headers: { Authorization: "Bearer ${PLANNER_TOKEN}" }
    timeout: 30s
    approval: allow
`
	vars := map[string]string{"PLANNER_TOKEN": "planner-secret-0123456789"}
	cfg, err := config.ParseWith(context.Background(), "a.yaml", []byte(good), env(vars))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.A2AAgents) != 1 || cfg.A2AAgents[0].Timeout != 30*time.Second || cfg.A2AAgents[0].Approval != "allow" {
		t.Fatalf("a2a_agents: %+v", cfg.A2AAgents)
	}
	if !slices.ContainsFunc(cfg.Secrets(), func(s secret.Secret) bool {
		return s.Reveal() == "Bearer planner-secret-0123456789"
	}) {
		t.Fatal("the header value is not among Config.Secrets")
	}

	for _, tc := range []struct {
		name, text, key, at, msg string
	}{
		{"near miss", "agents:\n  - id: a\na2a_agents:\n  - name: p\n    url: http://x\n    timout: 3s\n", "a2a_agents[0].timout", "timout:", "did you mean `timeout`"},
		{"duplicate", "agents:\n  - id: a\na2a_agents:\n  - name: p\n    url: http://x\n  - name: p\n    url: http://y\n", "a2a_agents", "a2a_agents:", `duplicate name "p"`},
		{"bad url", "agents:\n  - id: a\na2a_agents:\n  - name: p\n    url: ftp://x?key=planner-secret-0123456789\n", "a2a_agents[0].url", "url: ftp", "must be an absolute http or https URL"},
		{"bad name", "agents:\n  - id: a\na2a_agents:\n  - name: P!\n    url: http://x\n", "a2a_agents[0].name", "- name: P!", "must match [a-z0-9_-]+"},
		{"bad approval", "agents:\n  - id: a\na2a_agents:\n  - name: p\n    url: http://x\n    approval: maybe\n", "a2a_agents[0].approval", "approval: maybe", "must be prompt, allow or deny"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := wantFieldError(t, vars, tc.text, tc.key, tc.at, tc.msg)
			if strings.Contains(err.Error(), "planner-secret") {
				t.Fatalf("the error shows a secret: %v", err)
			}
		})
	}
}

// Build starts the module for a2a_agents: the tool a2a__<name> calls the
// remote; Runtime.Tools reports its state. Doctor reads each card and says
// which generation it speaks, with URLs redacted and no header value; an
// unreachable agent fails the report with its reason.
func TestA2AAgentsBuildAndDoctor(t *testing.T) {
	base := a2aRemote(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	text := `server:
  addr: 127.0.0.1:0
agents:
  - id: a
a2a_agents:
  - name: planner
    url: ` + base + `
    headers: { X-Api-Key: "${KEY}" }
`
	vars := map[string]string{"KEY": "doctor-secret-0123456789"}
	cfg, err := config.ParseWith(context.Background(), "a.yaml", []byte(text), env(vars))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg.Server.DataDir = t.TempDir() // conversations.db
	rt, err := cfg.Build(ctx, config.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	if rt.A2ARemote == nil {
		t.Fatal("no A2ARemote module for a2a_agents")
	}
	if err := rt.A2ARemote.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	tools := rt.Tools()
	i := slices.IndexFunc(tools, func(ti config.ToolInfo) bool { return ti.Name == "a2a__planner" })
	if i < 0 || tools[i].ServerState != "connected" || !slices.Contains(tools[i].Agents, "a") {
		t.Fatalf("tools: %+v", tools)
	}

	report := cfg.Doctor(ctx)
	var out bytes.Buffer
	report.Print(&out)
	if report.Failed() || !strings.Contains(out.String(), `ok   a2a agent planner: `+base+`: card of "Planner" read, speaks A2A 1.0`) {
		t.Fatalf("doctor:\n%s", out.String())
	}

	cfg.A2AAgents[0].URL = "http://" + dead + "/agent?token=" + vars["KEY"]
	report = cfg.Doctor(ctx)
	out.Reset()
	report.Print(&out)
	if !report.Failed() || !strings.Contains(out.String(), "FAIL a2a agent planner: ") || !strings.Contains(out.String(), "connection refused") {
		t.Fatalf("doctor with the agent down:\n%s", out.String())
	}
	if strings.Contains(out.String(), vars["KEY"]) {
		t.Fatalf("doctor shows the secret:\n%s", out.String())
	}
}
