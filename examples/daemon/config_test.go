package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/config"
)

// Every error class names the file, the line and the key.
func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		env        map[string]string
		want       string // after "<path>:"
	}{
		{"bad yaml", "server:\n  addr: [127.0.0.1\nagents: []\n", nil, `3: invalid YAML`},
		{"unknown key", "server:\n  adr: 127.0.0.1:1\nagents:\n  - id: a\n", nil, "2: server.adr: unknown key: did you mean `addr`? (known: addr, "},
		{"near-miss section", "mcpServers:\n  fs: {}\nagents:\n  - id: a\n", nil, "1: mcpServers: unknown section: did you mean `mcp_servers`?"},
		{"misindented list", "agents:\n  - id: a\n    name: x\n   - id: b\n", nil, "4: invalid YAML: a list item must start with '-' at the same indentation"},
		{"unknown agent key", "agents:\n  - id: a\n    modle: x\n", nil, `3: agents[0].modle: unknown key`},
		{"unset variable", "server:\n  api_token: ${TOKEN_NOT_SET}\nagents:\n  - id: a\n", nil, `2: server.api_token: variable TOKEN_NOT_SET is not set`},
		{"duplicate agent id", "agents:\n  - id: a\n  - id: b\n  - id: a\n", nil, `4: agents[2].id: duplicate agent id "a" (first at line 2)`},
		{"invalid id", "agents:\n  - id: Researcher\n", nil, `2: agents[0].id: "Researcher" must match [a-z0-9_-]+`},
		{"missing id", "agents:\n  - name: x\n", nil, `2: agents[0]: id is required`},
		{"unknown provider", "agents:\n  - id: a\n    provider: gemini\n", nil, `3: agents[0].provider: unknown provider "gemini" (known: echo, openai, ollama, anthropic)`},
		{"unknown provider section", "providers:\n  gemini: {}\nagents:\n  - id: a\n", nil, `2: providers.gemini: unknown provider`},
		{"bad duration", "agents:\n  - id: a\n    timeout: soon\n", nil, "3: agents[0].timeout: expected a duration (like 30s or 5m), got a string `soon`"},
		{"bad addr", "server:\n  addr: nonsense\nagents:\n  - id: a\n", nil, `2: server.addr: "nonsense" is not host:port`},
		{"no agents", "server: {}\n", nil, ` agents: at least one agent is required`},
		{"blank token", "server:\n  api_token: \"  \"\nagents:\n  - id: a\n", nil, `2: server.api_token: must not contain whitespace`},
		{"short token", "agents:\n  - id: a\nserver:\n  addr: 0.0.0.0:8080\n  api_token: k9\n", nil, `5: server.api_token: is 2 characters long: use at least 16`},
		{"missing provider key", "agents:\n  - id: a\n    provider: openai\n", nil, "3: agents[0].provider: providers.openai.api_key is empty and OPENAI_API_KEY is not set"},
		{"moved key", "agents:\n  - id: a\nmcp_server:\n  allowed_origins: [x.example]\n", nil, `4: mcp_server.allowed_origins: set server.allowed_origins instead`},
		{"bad origin pattern", "server:\n  allowed_origins: [\"ok.example\", \"[bad\"]\nagents:\n  - id: a\n", nil, `2: server.allowed_origins[1]: "[bad" must be an origin`},
		{"bad lattice", "lattice:\n  backend: kafka\nagents:\n  - id: a\n", nil, `2: lattice.backend: "kafka" is unknown`},
		{"bad lattice node", "lattice:\n  node: \"a.b\"\nagents:\n  - id: a\n", nil, `2: lattice.node: "a.b" must be 1-64 letters, digits, _ and -`},
		{"bad size unit", "lattice:\n  reconnect_buffer_bytes: 10ZB\nagents:\n  - id: a\n", nil, "2: lattice.reconnect_buffer_bytes: expected a size in bytes (a number, or with a unit: 512KB, 8MiB; units B, KB, MB, GB, KiB, MiB, GiB), got a string `10ZB`"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, tc.text)
			code, stdout, stderr := runCLI(t, tc.env, "validate", "--config", path)
			if code != exitFail {
				t.Fatalf("exit %d, want 1; stdout %q stderr %q", code, stdout, stderr)
			}
			if want := path + ":" + tc.want; !strings.Contains(stderr, want) {
				t.Fatalf("stderr:\n%s\nwant it to contain:\n%s", stderr, want)
			}
		})
	}
}

func TestConfigExpansionAndOverrides(t *testing.T) {
	path := writeConfig(t, `
server:
  addr: 127.0.0.1:9999
  api_token: ${TOKEN:-}
  request_timeout: ${RT:-90s}
future_section: {x: 1}
agents:
  - id: a
    system_prompt: "costs $${PRICE}"
`)
	cfg, err := config.Load(context.Background(), config.LoadOptions{Default: defaultConfigYAML, Path: path, Lookup: mapEnv(map[string]string{
		"AXOCOATL_ADDR": "127.0.0.1:7777", "AXOCOATL_LOG_FORMAT": "json", "AXOCOATL_API_TOKEN": "from-env-0123456789",
	})})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Server.Addr != "127.0.0.1:7777" || cfg.Log.Format != "json" || cfg.Server.APIToken.Reveal() != "from-env-0123456789" {
		t.Errorf("overrides not applied: %+v", cfg.Server)
	}
	if cfg.Server.RequestTimeout != 90*time.Second || cfg.Server.PublicURL != "http://127.0.0.1:7777" || cfg.Server.ShutdownGrace != config.DefaultShutdownGrace {
		t.Errorf("defaults: %+v", cfg.Server)
	}
	if cfg.Agents[0].SystemPrompt != "costs ${PRICE}" {
		t.Errorf("$${ literal: %q", cfg.Agents[0].SystemPrompt)
	}
	if len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0], `unknown section "future_section"`) {
		t.Errorf("warnings %q", cfg.Warnings)
	}
	// An empty variable does not override (nor switch off the token).
	cfg, err = config.Load(context.Background(), config.LoadOptions{Default: defaultConfigYAML, Path: path, Lookup: mapEnv(map[string]string{
		"TOKEN": "from-file-0123456789", "AXOCOATL_API_TOKEN": "", "AXOCOATL_ADDR": "",
	})})
	if err != nil || cfg.Server.APIToken.Reveal() != "from-file-0123456789" || cfg.Server.Addr != "127.0.0.1:9999" {
		t.Fatalf("empty overrides: %+v, %v", cfg.Server, err)
	}
	// --addr wins over the environment.
	cfg, err = config.Load(context.Background(), config.LoadOptions{Default: defaultConfigYAML, Path: path, Addr: "127.0.0.1:1", Lookup: mapEnv(map[string]string{"AXOCOATL_ADDR": "127.0.0.1:7777"})})
	if err != nil || cfg.Server.Addr != "127.0.0.1:1" {
		t.Fatalf("addr %v, err %v", cfg.Server.Addr, err)
	}
}

func TestBuiltinDefault(t *testing.T) {
	t.Chdir(t.TempDir()) // no ./axocoatl.yaml here
	cfg, err := config.Load(context.Background(), config.LoadOptions{Default: defaultConfigYAML, Lookup: mapEnv(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Source != config.BuiltinSource || cfg.Server.Addr != "127.0.0.1:8080" || len(cfg.Agents) != 1 || cfg.Agents[0].ID != "assistant" || cfg.Agents[0].Provider != "echo" {
		t.Fatalf("default config: %+v", cfg)
	}
	// $AXOCOATL_CONFIG, then ./axocoatl.yaml.
	p := writeConfig(t, "agents:\n  - id: from-env\n")
	cfg, err = config.Load(context.Background(), config.LoadOptions{Default: defaultConfigYAML, Lookup: mapEnv(map[string]string{"AXOCOATL_CONFIG": p})})
	if err != nil || cfg.Agents[0].ID != "from-env" {
		t.Fatalf("AXOCOATL_CONFIG: %v %v", cfg, err)
	}
}

// Secrets reach neither errors, nor validate/doctor output, nor logs, nor
// API responses.
func TestSecretsNeverInOutput(t *testing.T) {
	const token, key = "tok-3b1f0c9d2e5a7788", "sk-live-a8c7e6d5"
	// Something that answers like a model server, so doctor can reach it.
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"object":"list","data":[]}`)
	}))
	defer provider.Close()
	env := map[string]string{"TOKEN": token, "KEY": key}
	text := fmt.Sprintf(`
server:
  api_token: ${TOKEN}
providers:
  openai: { base_url: %s/v1, api_key: "${KEY}" }
agents:
  - id: assistant
  - id: researcher
    provider: openai
    model: m
`, provider.URL)
	path := writeConfig(t, text)
	var outputs []string
	for _, args := range [][]string{{"validate", "--config", path}, {"doctor", "--config", path}} {
		code, stdout, stderr := runCLI(t, env, args...)
		if code != exitOK {
			t.Errorf("%v: exit %d\n%s%s", args, code, stdout, stderr)
		}
		outputs = append(outputs, stdout, stderr)
	}
	// A secret in the wrong place: the error names the key, not the value.
	bad := writeConfig(t, "agents:\n  - id: a\n    timeout: ${KEY}\n    max_iterations: ${TOKEN}\n")
	code, stdout, stderr := runCLI(t, env, "validate", "--config", bad)
	if code != exitFail || !strings.Contains(stderr, "agents[0].timeout") || !strings.Contains(stderr, "agents[0].max_iterations") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	outputs = append(outputs, stdout, stderr)

	td := startDaemon(t, text, mergeEnv(env, map[string]string{"AXOCOATL_LOG_LEVEL": "debug"}))
	auth := []string{"Authorization", "Bearer " + token}
	for _, p := range []string{"/api/agents", "/api/agents/researcher", "/metrics"} {
		outputs = append(outputs, string(td.do(t, "GET", p, "", auth...).body))
	}
	outputs = append(outputs, string(td.do(t, "POST", "/api/agents/assistant/execute", `{"input":"hi"}`, auth...).body))
	outputs = append(outputs, string(td.do(t, "GET", "/api/agents", "", "Authorization", "Bearer wrong").body))
	td.stop()
	outputs = append(outputs, td.stderr.String())
	for _, out := range outputs {
		if strings.Contains(out, token) || strings.Contains(out, key) {
			t.Fatalf("a secret leaked into output:\n%s", out)
		}
	}
}

func mergeEnv(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func TestCLIExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"version"}, exitOK, "axocoatl "},
		{[]string{"help"}, exitOK, "usage: axocoatl"},
		{[]string{"validate", "-h"}, exitOK, ""},
		{[]string{"serve", "-h"}, exitOK, ""},
		{[]string{"doctor", "--nope"}, exitUsage, ""},
		{[]string{"validate", "extra"}, exitUsage, ""},
		{[]string{"frobnicate"}, exitUsage, ""},
		{[]string{"validate", "--config", "/nonexistent/axocoatl.yaml"}, exitFail, ""},
	} {
		code, stdout, _ := runCLI(t, nil, tc.args...)
		if code != tc.code || !strings.Contains(stdout, tc.out) {
			t.Errorf("%v: exit %d stdout %q; want %d containing %q", tc.args, code, stdout, tc.code, tc.out)
		}
	}
}

func TestDoctor(t *testing.T) {
	code, stdout, _ := runCLI(t, nil, "doctor", "--config", writeConfig(t, "agents:\n  - id: a\n"))
	if code != exitOK || !strings.Contains(stdout, "ok   provider echo") || !strings.Contains(stdout, "egress: none") {
		t.Fatalf("echo only: exit %d\n%s", code, stdout)
	}

	up := openAIServer(t, 0, http.StatusOK)
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close() // nothing listens there any more
	code, stdout, _ = runCLI(t, nil, "doctor", "--config", writeConfig(t, fmt.Sprintf(`
providers:
  ollama: { base_url: %s/v1 }
  openai: { base_url: %s/v1, api_key: k }
  anthropic: { api_key: unused }
agents:
  - id: local
    provider: ollama
  - id: remote
    provider: openai
`, up.URL, deadURL)))
	host := func(u string) string { return strings.TrimPrefix(u, "http://") }
	for _, want := range []string{
		"ok   provider ollama: " + host(up.URL),
		"FAIL provider openai: " + host(deadURL),
		"warn provider anthropic: configured but no agent uses it",
		"egress: these hosts receive requests:",
		host(up.URL) + "  (provider ollama for agents local)",
		host(deadURL) + "  (provider openai for agents remote)",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, stdout)
		}
	}
	if code != exitFail {
		t.Errorf("exit %d, want 1", code)
	}
}

func TestDefaultPublicURL(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:8080": "http://127.0.0.1:8080",
		"[::1]:8080":     "http://[::1]:8080",
		"localhost:80":   "http://localhost:80",
		"0.0.0.0:8080":   "",
		"[::]:8080":      "",
		":8080":          "",
		"127.0.0.1:0":    "",
	} {
		if got := (config.ServerConfig{Addr: addr}).WithDefaults().PublicURL; got != want {
			t.Errorf("defaultPublicURL(%q) = %q, want %q", addr, got, want)
		}
	}
	// Serving on port 0: the bound port is used, before modules mount.
	td := startDaemon(t, "", nil)
	if got := td.d.cfg.Server.PublicURL; got != td.url {
		t.Errorf("public_url %q, want %q", got, td.url)
	}
}

// contractExample is the contract's example config (§2), verbatim.
const contractExample = `
server:
  addr: 127.0.0.1:8080
  public_url: http://127.0.0.1:8080     # absolute base used in A2A cards; defaults from addr
  api_token: ${AXOCOATL_API_TOKEN}      # required when addr is not loopback (else refuse to start)
  allow_unauthenticated: false
providers:
  openai:    { base_url: https://…/v1, api_key: ${OPENAI_API_KEY} }   # any OpenAI-compatible server
  ollama:    { base_url: http://localhost:11434 }
  anthropic: { api_key: ${ANTHROPIC_API_KEY} }
agents:
  - id: researcher                      # [a-z0-9_-]+, unique
    name: Researcher
    description: Finds facts.
    provider: openai                    # openai | ollama | anthropic | echo
    model: gpt-4o-mini
    system_prompt: You are a research assistant.
    tools: ["mcp__fs__*"]               # glob allow-list over qualified tool names; omitted = all
    max_iterations: 10                  # model↔tool rounds per execution
    timeout: 120s
mcp_servers:
  - name: fs                            # [a-z0-9_-]+, unique
    command: npx                        # stdio transport when command is set
    args: ["-y", "@modelcontextprotocol/server-filesystem", "/srv"]
    env: { API_KEY: ${FS_KEY} }         # layered onto the child's environment
    inherit_env: true                   # false: the child sees only PATH, HOME and env above
  - name: search
    url: https://mcp.example.com/mcp    # streamable HTTP transport when url is set
    headers: { Authorization: Bearer ${SEARCH_TOKEN} }
    timeout: 60s                        # per tool call
    approval: prompt                    # prompt | allow | deny for this server's tools
approval:
  default: prompt                       # for MCP tool calls: prompt | allow | deny
  timeout: 5m                           # unanswered → denied, status "expired"
  rules:                                # first match wins; tool is a glob over qualified names
    - { tool: "mcp__fs__read_*", decision: allow }
webhooks:
  - name: deploy-alerts
    url: https://hooks.example.com/axocoatl
    events: [TaskCompleted, AgentFailed] # empty = all coordination events; globs allowed
    secret: ${WEBHOOK_SECRET}            # enables signing; if present it must not expand to empty
    headers: { Authorization: ${INTERNAL_TOKEN} }
    timeout: 10s
lattice:
  backend: memory                       # memory | nats
  nats_url: nats://127.0.0.1:4222
`

// The contract's example config (§2), verbatim, validates, with the
// sections no module reads yet reported as warnings. Its flow maps hold
// bare variables (`env: { API_KEY: ${FS_KEY} }`), which plain YAML rejects
// and yamlconf reads as if quoted.
func TestContractExampleConfig(t *testing.T) {
	text := contractExample
	env := map[string]string{"AXOCOATL_API_TOKEN": "t-0123456789abcdef", "OPENAI_API_KEY": "k1", "ANTHROPIC_API_KEY": "k2", "FS_KEY": "k3", "SEARCH_TOKEN": "k4", "WEBHOOK_SECRET": "k5", "INTERNAL_TOKEN": "k6"}
	code, stdout, stderr := runCLI(t, env, "validate", "--config", writeConfig(t, text))
	if code != exitOK || !strings.Contains(stdout, "ok (1 agents)") {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	if strings.Contains(stderr, "unknown section") { // every section of the contract is read now
		t.Errorf("warnings:\n%s", stderr)
	}
}

// A bad value from the environment or a flag is blamed on that variable
// or flag, not on the file's line, which may hold a good value.
func TestOverrideErrorsNameTheirSource(t *testing.T) {
	path := writeConfig(t, "server:\n  addr: 127.0.0.1:1\n  api_token: fine-token-0123456789\nlog:\n  level: info\n  format: text\nagents:\n  - id: a\n")
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{map[string]string{"AXOCOATL_ADDR": "nonsense"}, nil, `AXOCOATL_ADDR: "nonsense" is not host:port`},
		{nil, []string{"--addr", "nonsense"}, `--addr: "nonsense" is not host:port`},
		{map[string]string{"AXOCOATL_LOG_LEVEL": "loud"}, nil, `AXOCOATL_LOG_LEVEL: "loud" is not one of debug, info, warn, error`},
		{map[string]string{"AXOCOATL_LOG_FORMAT": "xml"}, nil, `AXOCOATL_LOG_FORMAT: "xml" is not one of text, json`},
		{map[string]string{"AXOCOATL_API_TOKEN": "two words"}, nil, `AXOCOATL_API_TOKEN: must not contain whitespace`},
	} {
		cmd := "validate"
		if tc.args != nil {
			cmd = "serve"
		}
		code, _, stderr := runCLI(t, tc.env, append([]string{cmd, "--config", path}, tc.args...)...)
		if code != exitFail || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, path+":") {
			t.Errorf("%v %v: exit %d, stderr:\n%s\nwant %q and no blame on the file", tc.env, tc.args, code, stderr, tc.want)
		}
		if strings.Contains(stderr, "two words") {
			t.Errorf("the token leaked: %s", stderr)
		}
	}
}

// A secret written in the file under a secret key, but in the wrong shape
// (a string where a mapping of secrets belongs), is not quoted back: the
// error names the key and the expected shape only. A secret-typed key gets
// "expected a string", not "a mapping (secret.Secret)".
func TestMisshapenSecretsNotQuoted(t *testing.T) {
	path := writeConfig(t, `agents:
  - id: a
mcp_servers:
  - name: s
    command: x
    env: sk-abcd
  - name: t
    url: http://127.0.0.1:1/mcp
    headers: tk-efgh
providers:
  openai:
    api_key: {k: v}
`)
	code, _, stderr := runCLI(t, nil, "validate", "--config", path)
	if code != exitFail {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		path + ":6: mcp_servers[0].env: expected a mapping, got a string\n",
		path + ":9: mcp_servers[1].headers: expected a mapping, got a string\n",
		path + ":12: providers.openai.api_key: expected a string, got a mapping\n",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr:\n%s\nwant a line %q", stderr, want)
		}
	}
	for _, secret := range []string{"sk-a", "tk-e"} {
		if strings.Contains(stderr, secret) {
			t.Errorf("secret %q quoted in:\n%s", secret, stderr)
		}
	}
}

// validate's refusal of a public address without a token is a config
// error like any other: file:line: key: message.
func TestValidatePublicAddrNamesLine(t *testing.T) {
	path := writeConfig(t, "agents:\n  - id: a\nserver:\n  addr: 0.0.0.0:8080\n")
	code, _, stderr := runCLI(t, nil, "validate", "--config", path)
	if want := path + ":4: server.addr: refusing to serve without authentication"; code != exitFail || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, stderr %q, want %q", code, stderr, want)
	}
	code, _, stderr = runCLI(t, map[string]string{"AXOCOATL_ADDR": "0.0.0.0:8080"}, "validate", "--config", path)
	if want := "AXOCOATL_ADDR: refusing to serve without authentication"; code != exitFail || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, stderr %q, want %q", code, stderr, want)
	}
}

// An agent field's own check names that field's key and line, not the
// agent's first line.
func TestAgentFieldErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"agents:\n  - id: a\n    name: A\n    max_iterations: -1\n", ":4: agents[0].max_iterations: must not be negative"},
		{"agents:\n  - id: a\n    timeout: -5s\n", ":3: agents[0].timeout: must not be negative"},
		{"agents:\n  - id: a\n    tools:\n      - \"[bad\"\n", `:3: agents[0].tools: bad glob "[bad"`},
	} {
		path := writeConfig(t, tc.text)
		code, _, stderr := runCLI(t, nil, "validate", "--config", path)
		if code != exitFail || !strings.Contains(stderr, path+tc.want) {
			t.Errorf("exit %d, stderr %q, want %q", code, stderr, path+tc.want)
		}
	}
}

// Every secret of the config is found for the modules that scrub them.
func TestConfigSecrets(t *testing.T) {
	path := writeConfig(t, contractExample)
	env := map[string]string{"AXOCOATL_API_TOKEN": "api-token-1-0123456789", "OPENAI_API_KEY": "openai-key-2", "ANTHROPIC_API_KEY": "anthropic-key-3", "FS_KEY": "fs-key-4", "SEARCH_TOKEN": "search-token-5", "WEBHOOK_SECRET": "webhook-secret-6", "INTERNAL_TOKEN": "internal-token-7"}
	cfg, err := config.Load(context.Background(), config.LoadOptions{Default: defaultConfigYAML, Path: path, Lookup: mapEnv(env)})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range cfg.Secrets() {
		got = append(got, s.Reveal())
	}
	slices.Sort(got)
	want := []string{"Bearer search-token-5", "anthropic-key-3", "api-token-1-0123456789", "fs-key-4", "internal-token-7", "openai-key-2", "webhook-secret-6"}
	if !slices.Equal(got, want) {
		t.Fatalf("secrets %q, want %q", got, want)
	}
}
