package config_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/axocoatl/axocoatl-go/config"
)

// env is an environment for Lookup: only the given variables are set, so
// the process's own environment (AXOCOATL_* in CI) cannot change a test.
func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

// lineOf is the 1-based line of the first line of text containing s.
func lineOf(t *testing.T, text, s string) int {
	t.Helper()
	for i, line := range strings.Split(text, "\n") {
		if strings.Contains(line, s) {
			return i + 1
		}
	}
	t.Fatalf("%q not in the text", s)
	return 0
}

// A host loads the daemon's default file through the library and gets what
// the daemon boots: the agent assistant on echo, the MCP server and A2A
// started and answering on a host's mux (cards with the URL of the address
// the host bound), no MCP client (no mcp_servers); Close leaves nothing
// running.
func TestLoadDaemonDefaultAndBuild(t *testing.T) {
	ctx := context.Background()
	const path = "../examples/daemon/default.yaml"
	cfg, err := config.Load(ctx, config.LoadOptions{Path: path, Lookup: env(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Source != path || len(cfg.Warnings) != 0 {
		t.Fatalf("source %q, warnings %v", cfg.Source, cfg.Warnings)
	}
	if len(cfg.Agents) != 1 || cfg.Agents[0].ID != "assistant" || cfg.Agents[0].Provider != "echo" || cfg.Agents[0].Name != "Assistant" {
		t.Fatalf("agents: %+v", cfg.Agents)
	}
	if cfg.Server.Addr != "127.0.0.1:8080" || cfg.Server.PublicURL != "http://127.0.0.1:8080" || len(cfg.MCPServers) != 0 || cfg.Lattice.Backend != "" {
		t.Fatalf("server %+v, mcp_servers %v, lattice %+v", cfg.Server, cfg.MCPServers, cfg.Lattice)
	}

	// The host listens where it wants; the cards follow the bound address.
	mux := http.NewServeMux()
	srv := httptest.NewUnstartedServer(mux)
	cfg.SetListenAddr(srv.Listener.Addr().String())
	cfg.Server.DataDir = t.TempDir() // conversations.db
	rt, err := cfg.Build(ctx, config.BuildOptions{})
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			srv.Close()
			rt.Close(ctx)
		}
	}()
	if rt.MCPClient != nil || rt.MCPServer == nil || rt.A2A == nil {
		t.Fatalf("modules: mcp client %v, mcp server %v, a2a %v", rt.MCPClient, rt.MCPServer, rt.A2A)
	}
	agents := rt.Engine.Agents()
	if len(agents) != 1 || agents[0].ID != "assistant" || agents[0].Provider != "echo" || !agents[0].Offline {
		t.Fatalf("Engine agents: %+v", agents)
	}
	if err := rt.Mount(mux); err != nil {
		t.Fatal(err)
	}
	srv.Start()
	tr := &http.Transport{}
	hc := &http.Client{Transport: tr}

	// A2A: the card is served by the started handler and names the agent.
	resp, err := hc.Get(srv.URL + "/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var card a2a03.AgentCard
	if err := json.Unmarshal(body, &card); resp.StatusCode != 200 || err != nil {
		t.Fatalf("A2A card: %d %s %v", resp.StatusCode, body, err)
	}
	if card.URL != srv.URL+"/a2a" || len(card.Skills) != 1 || card.Skills[0].ID != "assistant" || card.Skills[0].Name != "Assistant" {
		t.Fatalf("A2A card: url %q skills %+v", card.URL, card.Skills)
	}

	// MCP: initialize over POST /mcp with the go-sdk client, then the agent
	// as a tool.
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "config-test", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatalf("MCP initialize: %v", err)
	}
	if info := cs.InitializeResult().ServerInfo; info == nil || info.Name != "axocoatl" {
		t.Fatalf("MCP server info: %+v", info)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "agent_assistant" {
		t.Fatalf("MCP tools: %v %+v", err, tools)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_assistant", Arguments: map[string]any{"input": "hello"}})
	if err != nil || res.IsError || len(res.Content) != 1 {
		t.Fatalf("MCP call: %v %+v", err, res)
	}
	if text, ok := res.Content[0].(*mcp.TextContent); !ok || text.Text != "hello" {
		t.Fatalf("MCP call result: %+v", res.Content[0])
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}

	tr.CloseIdleConnections()
	srv.Close()
	closed = true
	if err := rt.Close(ctx); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t)
}

// A bad field is a *config.FieldError with the file, the line and the key,
// whatever else is wrong beside it.
func TestFieldErrors(t *testing.T) {
	for _, tc := range []struct {
		file, key, at, msg string // at: text on the line the error must name
	}{
		{"bad_max_iterations.yaml", "agents[1].max_iterations", "max_iterations: -1", "must not be negative"},
		{"unknown_key.yaml", "agents[0].sytem_prompt", "sytem_prompt:", "unknown key"},
		{"short_token.yaml", "server.api_token", "api_token: k9", "is 2 characters long"},
		{"moved_public_url.yaml", "a2a.public_url", "public_url:", "set server.public_url instead"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			path := "testdata/" + tc.file
			text, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(context.Background(), config.LoadOptions{Path: path, Lookup: env(nil)})
			var fe *config.FieldError
			if cfg != nil || !errors.As(err, &fe) {
				t.Fatalf("want a *config.FieldError, got config %v, error %T %v", cfg != nil, err, err)
			}
			if line := lineOf(t, string(text), tc.at); fe.File != path || fe.Line != line || fe.Key != tc.key {
				t.Fatalf("error at %s:%d %s, want %s:%d %s (%v)", fe.File, fe.Line, fe.Key, path, line, tc.key, err)
			}
			if !strings.Contains(fe.Msg, tc.msg) {
				t.Fatalf("message %q does not say %q", fe.Msg, tc.msg)
			}
			if strings.Contains(err.Error(), "k9") {
				t.Fatalf("the error shows the token: %v", err)
			}
		})
	}
}

// A wrong value from an AXOCOATL_* variable is a *config.FieldError too
// (the package promises that every error is one), naming the key and the
// variable instead of a line, and never the value.
func TestEnvOverrideErrorIsTyped(t *testing.T) {
	_, err := config.Load(context.Background(), config.LoadOptions{
		Path:   "../examples/daemon/default.yaml",
		Lookup: env(map[string]string{"AXOCOATL_API_TOKEN": "k9"}),
	})
	if err == nil || !strings.Contains(err.Error(), "AXOCOATL_API_TOKEN") || strings.Contains(err.Error(), "k9") {
		t.Fatalf("error %v: want one naming AXOCOATL_API_TOKEN, without the value", err)
	}
	var fe *config.FieldError
	if !errors.As(err, &fe) || fe.Key != "server.api_token" {
		t.Fatalf("error %T %q is not a *config.FieldError with key server.api_token", err, err)
	}
}

// ${VAR} and ${VAR:-default} expand in values through the lookup given to
// ParseWith, $${ stays a literal ${, and the AXOCOATL_* overrides come from
// the same lookup; an unset variable names its key and line.
func TestParseWithExpansion(t *testing.T) {
	const text = `server:
  addr: 127.0.0.1:9090
  public_url: ${PUBLIC}/
  api_token: ${TOKEN}
  allowed_origins: ["https://*.example.com", "http://localhost:*"]
agents:
  - id: assistant
    description: ${DESC:-Answers questions.}
    system_prompt: "Write $${HOME} as it is, for ${WHO}."
`
	vars := map[string]string{
		"PUBLIC": "https://agents.example.com/ai",
		"TOKEN":  "tok-0123456789abcdef",
		"WHO":    "humans",
	}
	cfg, err := config.ParseWith(context.Background(), "inline.yaml", []byte(text), env(vars))
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.Agents[0]
	if a.Description != "Answers questions." || a.SystemPrompt != "Write ${HOME} as it is, for humans." {
		t.Fatalf("expanded agent: description %q, system prompt %q", a.Description, a.SystemPrompt)
	}

	// HTTPOptions carries the server section to the Engine's HTTP guard.
	opts := cfg.HTTPOptions()
	if opts.PublicURL != "https://agents.example.com/ai" || opts.APIToken.Reveal() != vars["TOKEN"] ||
		!slices.Equal(opts.AllowedOrigins, []string{"https://*.example.com", "http://localhost:*"}) {
		t.Fatalf("HTTPOptions: %+v", opts)
	}
	if err := opts.Validate(); err != nil {
		t.Fatalf("HTTPOptions from a valid file: %v", err)
	}

	// The AXOCOATL_* overrides are read through the same lookup.
	vars["AXOCOATL_API_TOKEN"] = "from-the-env-0123456789"
	vars["AXOCOATL_ADDR"] = "127.0.0.1:0"
	cfg, err = config.ParseWith(context.Background(), "inline.yaml", []byte(text), env(vars))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Server.Addr != "127.0.0.1:0" || cfg.HTTPOptions().APIToken.Reveal() != "from-the-env-0123456789" {
		t.Fatalf("overrides: addr %q, token %s", cfg.Server.Addr, cfg.HTTPOptions().APIToken)
	}

	// Without a public_url, a port-0 address gives none: the real port is
	// known only per request.
	cfg, err = config.ParseWith(context.Background(), "inline.yaml", []byte("server:\n  addr: 127.0.0.1:0\nagents:\n  - id: a\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.HTTPOptions().PublicURL; got != "" {
		t.Fatalf("public URL for addr 127.0.0.1:0: %q", got)
	}

	// An unset variable without a default names the key and its line, and
	// the variable.
	delete(vars, "TOKEN")
	_, err = config.ParseWith(context.Background(), "inline.yaml", []byte(text), env(vars))
	var fe *config.FieldError
	if !errors.As(err, &fe) || fe.File != "inline.yaml" || fe.Key != "server.api_token" || fe.Line != lineOf(t, text, "api_token:") {
		t.Fatalf("unset variable: %T %v", err, err)
	}
	if !strings.Contains(fe.Msg, "TOKEN") || !strings.Contains(fe.Msg, "not set") {
		t.Fatalf("unset variable: message %q does not name it", fe.Msg)
	}
}

// Settings only a NATS lattice reads are warned about, with their line,
// when the lattice is in memory; with NATS they are not.
func TestClusterSettingsWithoutNATSWarned(t *testing.T) {
	const text = "agents: [{id: a}]\ncluster: {heartbeat_interval: 2s}\nlattice:\n  jetstream: {stream: S}\n"
	cfg, err := config.ParseWith(context.Background(), "c.yaml", []byte(text), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"line 2: cluster is ignored: lattice.backend is not nats (this daemon runs alone)",
		"line 4: lattice.jetstream is ignored: lattice.backend is not nats (this daemon runs alone)",
	}
	if !slices.Equal(cfg.Warnings, want) {
		t.Fatalf("warnings %q, want %q", cfg.Warnings, want)
	}
	cfg, err = config.ParseWith(context.Background(), "c.yaml", []byte(text+"  backend: nats\n"), env(nil))
	if err != nil || len(cfg.Warnings) != 0 {
		t.Fatalf("with NATS: warnings %q, err %v", cfg.Warnings, err)
	}
}
