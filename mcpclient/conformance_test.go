package mcpclient

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/approval"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
	"github.com/axocoatl/axocoatl-go/secret"
)

// conformanceClientBaseline lists the client scenarios expected to fail,
// each with its reason.
var conformanceClientBaseline = filepath.Join("testdata", "conformance-client-baseline.yml")

// The official MCP conformance suite's client scenarios against this
// module: the suite starts this test binary as the client of each
// scenario's server (helper mode conformance-client, below), which
// connects the server as an mcp_servers entry and runs an agent whose
// model calls every tool it is offered. Every scenario passes or fails as
// the baseline expects.
func TestMCPConformanceClient(t *testing.T) {
	if testing.Short() {
		t.Skip("installs and runs the conformance suite; skipped with -short")
	}
	testutil.CheckBaselineReasons(t, conformanceClientBaseline)
	node, cli := testutil.Conformance(t)
	base, err := filepath.Abs(conformanceClientBaseline)
	if err != nil {
		t.Fatal(err)
	}
	command := os.Args[0] + " -test.run=^$ " + helperFlag + "conformance-client"
	out, code := testutil.RunConformance(t, node, cli, 15*time.Minute, "client", "--suite", "all", "--command", command, "--expected-failures", base)
	t.Logf("conformance client:\n%s", testutil.ConformanceSummary(out))
	if code != 0 {
		t.Fatalf("conformance client: exit %d, want 0 (a failure not in %s, or an entry there that now passes):\n%s", code, conformanceClientBaseline, out)
	}
	testutil.RequireUnexpectedFailureFails(t, node, cli, "client", "--scenario", "auth/cross-app-access-complete-flow", "--command", command)
}

// conformanceClient is the client the suite runs: its last argument is the
// scenario server's URL. It connects the server, lists its tools and runs
// one agent that calls each of them once, then exits. The approval module
// (policy allow: no call is gated) takes the servers' questions, and the
// run's door is a user who submits every form as it is shown, with the
// schema's defaults (elicitation-sep1034-client-defaults).
func conformanceClient() {
	url := os.Args[len(os.Args)-1]
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	e := axocoatl.New(axocoatl.Options{})
	defer e.Close(context.Background())
	if err := e.AddAgent(agent.Spec{ID: "conformance"}, &callEveryTool{}); err != nil {
		fail(err)
	}
	gate, err := approval.New(approval.Config{Default: approval.Allow})
	if err != nil {
		fail(err)
	}
	if err := e.Use(ctx, gate); err != nil {
		fail(err)
	}
	ctx = axocoatl.WithUserPrompter(ctx, axocoatl.UserPrompterFunc(func(context.Context, axocoatl.UserPrompt) (axocoatl.UserAnswer, error) {
		return axocoatl.UserAnswer{Accepted: true, By: "conformance_user"}, nil
	}))
	sc := ServerConfig{Name: "suite", URL: url, Timeout: 10 * time.Second}
	mc := Config{MinBackoff: 100 * time.Millisecond}
	if strings.HasPrefix(os.Getenv("MCP_CONFORMANCE_SCENARIO"), "auth/") {
		sc.OAuth, mc.FetchCode = conformanceOAuth(), autoApprove
	}
	mc.Servers = []ServerConfig{sc}
	m, err := New(mc)
	if err != nil {
		fail(err)
	}
	if err := e.Use(ctx, m); err != nil {
		fail(err)
	}
	if err := m.Ready(ctx); err != nil {
		fail(err)
	}
	if _, err := e.Execute(ctx, "conformance", "call every tool"); err != nil {
		fail(err)
	}
}

// conformanceOAuth is the oauth block of an auth/* scenario: the client
// the scenario's context pre-registers (MCP_CONFORMANCE_CONTEXT), else a
// Client ID Metadata Document URL and dynamic registration, as the spec
// orders them. The user approves at once (autoApprove reads the code from
// the authorization server's redirect).
func conformanceOAuth() *OAuthConfig {
	var c struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
		PrivateKey   string `json:"private_key_pem"`
	}
	_ = json.Unmarshal([]byte(os.Getenv("MCP_CONFORMANCE_CONTEXT")), &c)
	o := &OAuthConfig{ClientID: c.ClientID, ClientSecret: secret.Secret(c.ClientSecret), PrivateKey: secret.Secret(c.PrivateKey),
		RedirectURL: "http://localhost:3000/callback"}
	if strings.HasPrefix(os.Getenv("MCP_CONFORMANCE_SCENARIO"), "auth/client-credentials") {
		o.Grant = GrantClientCredentials
		return o
	}
	if o.ClientID == "" {
		o.ClientMetadataURL = "https://conformance-test.local/client-metadata.json"
	}
	return o
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "conformance client:", err)
	os.Exit(1)
}

// callEveryTool is a model that calls each offered tool once, with
// arguments made from its schema's required properties, then answers.
type callEveryTool struct{ called bool }

func (m *callEveryTool) Generate(_ context.Context, req *agent.Request) (*agent.Response, error) {
	if m.called || len(req.Tools) == 0 {
		return &agent.Response{Content: "done"}, nil
	}
	m.called = true
	var calls []agent.ToolCall
	for i, d := range req.Tools {
		calls = append(calls, agent.ToolCall{ID: fmt.Sprint("c", i), Name: d.Name, Arguments: argumentsFor(d.InputSchema)})
	}
	return &agent.Response{ToolCalls: calls}, nil
}

// argumentsFor fills a schema's required properties with a value of their
// type.
func argumentsFor(schema json.RawMessage) json.RawMessage {
	var s struct {
		Properties map[string]struct {
			Type string `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	_ = json.Unmarshal(schema, &s)
	args := map[string]any{}
	for _, name := range s.Required {
		switch s.Properties[name].Type {
		case "number", "integer":
			args[name] = 1
		case "boolean":
			args[name] = true
		case "array":
			args[name] = []any{}
		case "object":
			args[name] = map[string]any{}
		default:
			args[name] = "x"
		}
	}
	b, _ := json.Marshal(args)
	return b
}
