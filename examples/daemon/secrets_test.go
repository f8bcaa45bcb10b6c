package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

// The contract (§2): secrets — provider api keys, server.api_token, MCP env
// and header values, webhook secrets and headers — never appear in logs,
// errors, doctor output or API responses. This test gives every secret a
// distinctive value, once through ${VAR} from the environment and once
// literally in the file, and drives the built binary through every path
// where one could surface, with peers that echo the credentials they are
// sent (as real servers do in their 401 messages). Nothing the daemon
// prints or answers may contain the marker.

// leakMarker is part of every secret value below, and of nothing else the
// test configures.
const leakMarker = "LEAKCANARY"

// secretVars are the secrets of the config, by the variable that carries
// them in the environment variant. Each value is "sk-LEAKCANARY-<name>".
var secretVars = []string{
	"AXOCOATL_API_TOKEN", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OLLAMA_API_KEY",
	"FS_KEY", "SEARCH_TOKEN", "GONE_KEY", "WEBHOOK_SECRET", "INTERNAL_TOKEN",
	"NATS_PASSWORD", "NATS_TOKEN", "TOOLS_KEY", "LIAR_TOKEN", "SEARCH_URL_TOKEN", "GONE_URL_KEY",
}

func canary(name string) string {
	return "sk-" + leakMarker + "-" + strings.ToLower(strings.ReplaceAll(name, "_", "-"))
}

// secretSet renders secrets into a config: as ${VAR} with the value in the
// environment, or as the value itself in the file.
type secretSet struct{ literal bool }

func (s secretSet) ref(name string) string {
	if s.literal {
		return canary(name)
	}
	return "${" + name + "}"
}

// env is the child's environment: the secrets when they come from there.
func (s secretSet) env() []string {
	if s.literal {
		return nil
	}
	var env []string
	for _, n := range secretVars {
		env = append(env, n+"="+canary(n))
	}
	return env
}

// leakPeers are the servers the config points at.
type leakPeers struct {
	provider  string // base of the echoing provider server
	mcp500    string // an MCP URL answering 500 with the headers it got
	mcpRefuse string // an MCP URL nothing listens on
	mcpLiar   string // an MCP URL answering a JSON-RPC error quoting the headers
	mcpTools  string // a working MCP server (go-sdk) whose tool fails quoting the headers
	// toolCalls counts calls of that tool.
	toolCalls *atomic.Int32
}

// echoCredentials is what a careless server puts in its error message: the
// credentials it was sent.
func echoCredentials(r *http.Request) string {
	return fmt.Sprintf("Authorization=%q X-Api-Key=%q", r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"))
}

func writeJSONError(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// startLeakPeers starts the echoing peers: one HTTP server speaking the
// OpenAI wire format under /openai/v1 (401 invalid_api_key) and /ollama/v1
// (500 server_error), and the Anthropic one under /anthropic (401
// authentication_error), every message quoting the credentials received
// (the ollama path first calls the MCP tool when it is offered); MCP
// endpoints answering 500, or a JSON-RPC error, quoting the headers they
// got; and a working MCP server whose one tool fails quoting its key.
func startLeakPeers(t *testing.T) leakPeers {
	t.Helper()
	prov := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		creds := echoCredentials(r)
		switch {
		case strings.HasPrefix(r.URL.Path, "/anthropic/"):
			writeJSONError(w, http.StatusUnauthorized, map[string]any{"type": "error", "error": map[string]any{
				"type": "authentication_error", "message": "invalid x-api-key: " + creds}})
		case strings.HasPrefix(r.URL.Path, "/ollama/") && strings.HasSuffix(r.URL.Path, "/chat/completions") &&
			strings.Contains(string(body), leakToolName) && !strings.Contains(string(body), `"role":"tool"`):
			// Offered the MCP tool and not yet called it: call it.
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1,"model":"llama-test","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":%q,"arguments":"{\"q\":\"x\"}"}}]}}]}`, leakToolName)
		case strings.HasPrefix(r.URL.Path, "/ollama/"):
			writeJSONError(w, http.StatusInternalServerError, map[string]any{"error": map[string]any{
				"message": "model runner crashed serving " + creds, "type": "server_error", "param": nil, "code": nil}})
		default:
			writeJSONError(w, http.StatusUnauthorized, map[string]any{"error": map[string]any{
				"message": "Incorrect API key provided: " + creds + ". You can find your API key at https://platform.openai.com/account/api-keys.",
				"type":    "invalid_request_error", "param": nil, "code": "invalid_api_key"}})
		}
	}))
	t.Cleanup(prov.Close)
	mcp500 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		http.Error(w, "internal error handling request with "+echoCredentials(r), http.StatusInternalServerError)
	}))
	t.Cleanup(mcp500.Close)
	liar := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{
			"code": -32001, "message": "unauthorized: " + echoCredentials(r)}})
	}))
	t.Cleanup(liar.Close)

	calls := &atomic.Int32{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "tools", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "leak", Description: "Fails, quoting the headers it got."},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct {
			Q string `json:"q"`
		}) (*mcp.CallToolResult, any, error) {
			calls.Add(1)
			return nil, nil, fmt.Errorf("backend refused X-Tools-Key=%q", req.Extra.Header.Get("X-Tools-Key"))
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	tools := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Tools-Key") != canary("TOOLS_KEY") {
			http.Error(w, "no key", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		tools.Close()
		// A daemon killed mid-session never ends its session: the
		// handler would keep it (and its reader goroutine) for good.
		for ss := range srv.Sessions() {
			ss.Close()
		}
	})
	return leakPeers{provider: prov.URL, mcp500: mcp500.URL + "/mcp", mcpRefuse: "http://" + testutil.FreeAddr(t) + "/mcp",
		mcpLiar: liar.URL + "/mcp", mcpTools: tools.URL + "/mcp", toolCalls: calls}
}

// leakToolName is the qualified name of the MCP tool that fails.
const leakToolName = "mcp__tools__leak"

// fsServerScript is a stdio MCP server that fails: it complains on stderr
// and stdout with its key, then exits.
const fsServerScript = `echo "fs: key $API_KEY rejected by backend" >&2; echo "fatal: bad key $API_KEY"; exit 3`

// inheritScript is a stdio MCP server that inherits the daemon's
// environment and prints the daemon's own credentials it finds there.
const inheritScript = `echo "boot: token $AXOCOATL_API_TOKEN key $OPENAI_API_KEY" >&2; exit 3`

// leakConfig has a secret in every place the config takes one.
func leakConfig(s secretSet, p leakPeers) string {
	return `server:
  api_token: ` + s.ref("AXOCOATL_API_TOKEN") + `
  shutdown_grace: 5s
log:
  level: debug
providers:
  openai: { base_url: "` + p.provider + `/openai/v1", api_key: ` + s.ref("OPENAI_API_KEY") + `, max_retries: -1 }
  ollama:
    base_url: ` + p.provider + `/ollama/v1
    api_key: ` + s.ref("OLLAMA_API_KEY") + `
    max_retries: -1
  anthropic:
    base_url: ` + p.provider + `/anthropic
    api_key: ` + s.ref("ANTHROPIC_API_KEY") + `
    max_retries: -1
agents:
  - id: gpt
    provider: openai
    model: gpt-test
  - id: claude
    provider: anthropic
    model: claude-test
  - id: llama
    provider: ollama
    model: llama-test
approval:
  default: allow
mcp_servers:
  - name: fs
    command: sh
    args: ["-c", ` + fmt.Sprintf("%q", fsServerScript) + `]
    env: { API_KEY: ` + s.ref("FS_KEY") + ` }
    inherit_env: false
  - name: search
    url: ` + strings.Replace(p.mcp500, "http://", "http://"+s.ref("SEARCH_URL_TOKEN")+"@", 1) + `
    headers: { Authorization: Bearer ` + s.ref("SEARCH_TOKEN") + ` }
    timeout: 5s
  - name: gone
    url: ` + p.mcpRefuse + `?key=` + s.ref("GONE_URL_KEY") + `
    headers:
      X-Api-Key: ` + s.ref("GONE_KEY") + `
  - name: liar
    url: ` + p.mcpLiar + `
    headers: { Authorization: Bearer ` + s.ref("LIAR_TOKEN") + ` }
  - name: tools
    url: ` + p.mcpTools + `
    headers: { X-Tools-Key: ` + s.ref("TOOLS_KEY") + ` }
    approval: allow
  - name: inherits
    command: sh
    args: ["-c", ` + fmt.Sprintf("%q", inheritScript) + `]
webhooks:
  - name: deploy-alerts
    url: https://hooks.example.com/axocoatl
    events: [TaskCompleted, AgentFailed]
    secret: ` + s.ref("WEBHOOK_SECRET") + `
    headers: { Authorization: ` + s.ref("INTERNAL_TOKEN") + ` }
`
}

// withNATS puts the lattice on NATS servers that do not answer, with
// credentials in their URLs: a password, and a token (nats://TOKEN@host).
func withNATS(config string, s secretSet) string {
	return config + `lattice:
  backend: nats
  nats_url: nats://axo:` + s.ref("NATS_PASSWORD") + `@127.0.0.1:1, nats://` + s.ref("NATS_TOKEN") + `@127.0.0.1:1
`
}

// wrongTypeConfig gives every secret-bearing key a value of the wrong type
// holding the secret: a list, or a mapping.
func wrongTypeConfig(s secretSet) string {
	return `server:
  api_token:
    - ` + s.ref("AXOCOATL_API_TOKEN") + `
providers:
  openai:
    api_key: [` + s.ref("OPENAI_API_KEY") + `]
  anthropic:
    api_key: { key: ` + s.ref("ANTHROPIC_API_KEY") + ` }
  ollama:
    api_key:
      - ` + s.ref("OLLAMA_API_KEY") + `
agents:
  - id: a
mcp_servers:
  - name: fs
    command: sh
    env:
      API_KEY:
        - ` + s.ref("FS_KEY") + `
  - name: fs2
    command: sh
    env: ` + s.ref("FS_KEY") + `
  - name: search
    url: http://127.0.0.1:1/mcp
    headers:
      Authorization:
        nested: Bearer ` + s.ref("SEARCH_TOKEN") + `
  - name: gone
    url: http://127.0.0.1:1/mcp
    headers: ` + s.ref("GONE_KEY") + `
webhooks:
  - name: deploy-alerts
    url: https://hooks.example.com/axocoatl
    secret: [` + s.ref("WEBHOOK_SECRET") + `]
    headers: ` + s.ref("INTERNAL_TOKEN") + `
`
}

// surfaces collects everything the daemon showed the outside during one
// case, each under a name for the failure message.
type surfaces struct {
	names []string
	texts []*testutil.SyncBuffer
}

func (s *surfaces) add(name string) *testutil.SyncBuffer {
	b := &testutil.SyncBuffer{}
	s.names, s.texts = append(s.names, name), append(s.texts, b)
	return b
}

func (s *surfaces) addText(name, text string) { s.add(name).Write([]byte(text)) }

// check fails the test for each surface showing the marker, with the text
// around it. With LEAKTEST_DUMP set it logs every surface, to see what the
// daemon shows in each case.
func (s *surfaces) check(t *testing.T) {
	t.Helper()
	for i, b := range s.texts {
		text := b.String()
		if os.Getenv("LEAKTEST_DUMP") != "" {
			t.Logf("=== %s:\n%s", s.names[i], text)
		}
		if at := strings.Index(text, leakMarker); at >= 0 {
			from, to := max(0, at-300), min(len(text), at+200)
			t.Errorf("secret leaked in %s:\n…%s…", s.names[i], text[from:to])
		}
	}
}

// runLeakCLI runs the binary to its end in an empty directory with only
// PATH, HOME and env, and records its output.
func runLeakCLI(t *testing.T, s *surfaces, bin string, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	name := strings.Join(args[:1], " ")
	out, errb := s.add(name+" stdout"), s.add(name+" stderr")
	cmd.Stdout, cmd.Stderr = out, errb
	err := cmd.Run()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() < 0 {
		t.Fatalf("%v: %v", args, err)
	}
	code = cmd.ProcessState.ExitCode()
	return code, out.String(), errb.String()
}

// recorder passes requests on and keeps a copy of every response: status
// line, headers and body as the client reads it.
type recorder struct {
	buf  *testutil.SyncBuffer
	next http.RoundTripper
}

func (r recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		fmt.Fprintf(r.buf, "%s %s: %v\n", req.Method, req.URL.Path, err)
		return nil, err
	}
	fmt.Fprintf(r.buf, "%s %s: %s %v\n", req.Method, req.URL.Path, resp.Status, resp.Header)
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.TeeReader(resp.Body, r.buf), resp.Body}
	return resp, nil
}

func TestSecretsNeverLeak(t *testing.T) {
	bin := buildBinary(t)
	peers := startLeakPeers(t)

	for _, variant := range []struct {
		name string
		set  secretSet
	}{
		{"from environment", secretSet{literal: false}},
		{"literal in file", secretSet{literal: true}},
	} {
		set, env := variant.set, variant.set.env()
		full := leakConfig(set, peers)
		t.Run(variant.name, func(t *testing.T) {
			for _, tc := range []struct {
				name string
				run  func(t *testing.T, s *surfaces)
			}{
				{"validate passes", func(t *testing.T, s *surfaces) {
					code, stdout, stderr := runLeakCLI(t, s, bin, env, "validate", "--config", writeConfig(t, full))
					if code != exitOK {
						t.Fatalf("validate exit %d:\n%s%s", code, stdout, stderr)
					}
				}},
				{"validate with an error elsewhere", func(t *testing.T, s *surfaces) {
					for _, e := range []struct{ from, to, want string }{
						{"    model: gpt-test\n", "    model: gpt-test\n    colour: blue\n", "agents[0].colour: unknown key"},
						{"    model: gpt-test\n", "    model: gpt-test\n    max_iterations: lots\n", "agents[0].max_iterations: "},
						{"  shutdown_grace: 5s\n", "  shutdown_grace: soon\n", "server.shutdown_grace: "},
						{"    timeout: 5s\n", "    timeout: 5s\n    approval: maybe\n", "mcp_servers[1]"},
						{"    inherit_env: false\n", "    inherit_env: false\n    url: http://127.0.0.1:1/mcp\n", "mcp_servers[0]"},
					} {
						bad := strings.Replace(full, e.from, e.to, 1)
						code, _, stderr := runLeakCLI(t, s, bin, env, "validate", "--config", writeConfig(t, bad))
						if code != exitFail || !strings.Contains(stderr, e.want) {
							t.Errorf("validate with %q: exit %d:\n%s", strings.TrimSpace(e.to), code, stderr)
						}
					}
				}},
				{"validate with a YAML syntax error", func(t *testing.T, s *surfaces) {
					bad := strings.Replace(full, "    model: claude-test\n", "    model: \"claude-test\n", 1)
					code, _, stderr := runLeakCLI(t, s, bin, env, "validate", "--config", writeConfig(t, bad))
					if code != exitFail {
						t.Fatalf("validate exit %d:\n%s", code, stderr)
					}
				}},
				{"validate with secrets of the wrong type", func(t *testing.T, s *surfaces) {
					code, _, stderr := runLeakCLI(t, s, bin, env, "validate", "--config", writeConfig(t, wrongTypeConfig(set)))
					if code != exitFail {
						t.Fatalf("validate exit %d:\n%s", code, stderr)
					}
					for _, key := range []string{"server.api_token", "providers.openai.api_key", "providers.anthropic.api_key", "providers.ollama.api_key",
						"mcp_servers[0].env.API_KEY", "mcp_servers[1].env", "mcp_servers[2].headers.Authorization", "mcp_servers[3].headers"} {
						if !strings.Contains(stderr, ": "+key+": ") {
							t.Errorf("no error for %s:\n%s", key, stderr)
						}
					}
				}},
				{"doctor with failing peers", func(t *testing.T, s *surfaces) {
					code, stdout, stderr := runLeakCLI(t, s, bin, env, "doctor", "--config", writeConfig(t, full))
					if code != exitFail {
						t.Fatalf("doctor exit %d:\n%s%s", code, stdout, stderr)
					}
					for _, check := range []string{"provider openai", "provider anthropic", "provider ollama", "mcp server fs", "mcp server search", "mcp server gone", "mcp server liar"} {
						if !strings.Contains(stdout, "FAIL "+check+": ") {
							t.Errorf("doctor does not fail %q:\n%s", check, stdout)
						}
					}
					if !strings.Contains(stdout, "ok   mcp server tools: ") {
						t.Errorf("doctor does not reach the tools server:\n%s", stdout)
					}
				}},
				{"doctor with an unreachable NATS", func(t *testing.T, s *surfaces) {
					code, stdout, stderr := runLeakCLI(t, s, bin, env, "doctor", "--config", writeConfig(t, withNATS(full, set)))
					if code != exitFail || !strings.Contains(stdout, "FAIL lattice: ") {
						t.Fatalf("doctor exit %d:\n%s%s", code, stdout, stderr)
					}
				}},
				{"serve with an unreachable NATS", func(t *testing.T, s *surfaces) {
					code, _, stderr := runLeakCLI(t, s, bin, env, "serve", "--addr", "127.0.0.1:0", "--config", writeConfig(t, withNATS(full, set)))
					if code != exitFail || !strings.Contains(stderr, "lattice.nats_url: ") {
						t.Fatalf("serve exit %d:\n%s", code, stderr)
					}
				}},
				{"mcp serve over stdio", func(t *testing.T, s *surfaces) {
					mcpServeLeak(t, s, bin, env, writeConfig(t, full))
				}},
				{"serve", func(t *testing.T, s *surfaces) {
					serveLeak(t, s, bin, env, writeConfig(t, full), peers)
				}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					s := &surfaces{}
					tc.run(t, s)
					s.check(t)
				})
			}
		})
	}
}

// mcpServeLeak calls the failing agents through `axocoatl mcp serve`.
func mcpServeLeak(t *testing.T, s *surfaces, bin string, env []string, config string) {
	cmd := mcpCommand(t, bin, config)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = s.add("mcp serve stderr")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	frames := s.add("mcp serve stdout")
	fmt.Fprint(stdin, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"leak-test","version":"1"}}}`+"\n"+
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	agents := []string{"gpt", "claude", "llama"}
	for i, a := range agents {
		fmt.Fprintf(stdin, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"agent_%s","arguments":{"input":"hi"}}}`+"\n", i+1, a)
	}
	fmt.Fprint(stdin, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"agent_nope","arguments":{"input":"hi"}}}`+"\n")
	answered := make(chan int, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		n := 0
		for sc.Scan() {
			frames.Write(append(sc.Bytes(), '\n'))
			var f struct {
				ID     *int `json:"id"`
				Result *struct {
					IsError bool `json:"isError"`
				} `json:"result"`
			}
			if json.Unmarshal(sc.Bytes(), &f) == nil && f.ID != nil && *f.ID > 0 {
				n++
			}
		}
		answered <- n
	}()
	// At EOF the server answers the calls already read, then exits.
	stdin.Close()
	select {
	case n := <-answered:
		if n != len(agents)+1 {
			t.Errorf("%d calls answered, want %d:\n%s", n, len(agents)+1, frames.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("mcp serve did not answer:\n%s", frames.String())
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("mcp serve: %v", err)
	}
	if strings.Count(frames.String(), `"isError":true`) != len(agents) {
		t.Errorf("want every call failed:\n%s", frames.String())
	}
}

// serveLeak serves the config at debug level and asks every route, with and
// without the token, runs the failing agents through the API, A2A (both
// surfaces) and /mcp, and reads the event stream meanwhile.
func serveLeak(t *testing.T, s *surfaces, bin string, env []string, config string, peers leakPeers) {
	base, cmd, stderr := startBinary(t, bin, env, "serve", "--config", config, "--addr", "127.0.0.1:0")
	token := canary("AXOCOATL_API_TOKEN")
	bodies := s.add("HTTP responses")
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	authed := &http.Client{Timeout: 20 * time.Second, Transport: bearer{token, recorder{bodies, tr}}}
	anon := &http.Client{Timeout: 20 * time.Second, Transport: recorder{bodies, tr}}
	send := func(c *http.Client, method, path, body string, headers ...string) int {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn := dialEvents(t, ctx, base, http.Header{"Authorization": {"Bearer " + token}}, "")
	frames := s.add("WebSocket frames")

	for _, a := range []string{"gpt", "claude", "llama"} {
		if code := send(authed, "POST", "/api/agents/"+a+"/execute", `{"input":"hi"}`); code != http.StatusBadGateway {
			t.Errorf("execute %s: %d, want 502", a, code)
		}
	}
	// The llama agent calls the failing MCP tool once the tools server
	// has connected (in the background) and its tool is offered.
	deadline := time.Now().Add(10 * time.Second)
	extra := 0
	for peers.toolCalls.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the agent never called the MCP tool:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
		send(authed, "POST", "/api/agents/llama/execute", `{"input":"use the tool"}`)
		extra++
	}
	// Every run fails, and each failure reaches the stream.
	failed := 0
	for failed < 3+extra {
		_, data, err := conn.Read(ctx)
		if err != nil {
			t.Fatalf("read frame after %d failures: %v", failed, err)
		}
		frames.Write(append(data, '\n'))
		if strings.Contains(string(data), `"type":"AgentFailed"`) {
			failed++
		}
	}

	for _, path := range []string{"/health", "/health/ready", "/api/agents", "/api/agents/gpt", "/api/agents/nope",
		"/api/approvals", "/api/approvals/decisions", "/metrics", "/", "/.well-known/agent.json",
		"/.well-known/agent-card.json", "/a2a/agents/claude/.well-known/agent-card.json"} {
		send(authed, "GET", path, "")
	}
	send(authed, "POST", "/api/events", `{"type":"Custom","payload":{"k":"v"}}`)
	send(authed, "POST", "/api/agents/gpt/execute", `{"input":`)
	// Refusals: no token, a wrong one, one in X-API-Key.
	send(anon, "GET", "/api/agents", "")
	send(anon, "GET", "/api/agents", "", "Authorization", "Bearer "+token+"x")
	send(anon, "POST", "/api/agents/gpt/execute", `{"input":"hi"}`, "X-API-Key", "wrong")
	send(anon, "POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, "Accept", "application/json, text/event-stream")
	send(anon, "POST", "/a2a", `{"jsonrpc":"2.0","id":1,"method":"message/send"}`)

	// A2A: the Axocoatl intake and the JSON-RPC surfaces.
	send(authed, "POST", "/a2a/tasks", `{"receiver_id":"gpt","input":"hi"}`)
	send(authed, "POST", "/a2a/tasks", `{"receiver_id":"llama","input":{"text":"hi"}}`)
	send(authed, "POST", "/a2a/tasks", `{"receiver_id":"nope","input":"hi"}`)
	msg := func(id int, receiver string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"message/send","params":{"message":{"kind":"message","messageId":"m%d","role":"user","parts":[{"kind":"text","text":"hi"}],"metadata":{"receiver_id":%q}}}}`, id, id, receiver)
	}
	send(authed, "POST", "/a2a", msg(1, "claude"))
	send(authed, "POST", "/a2a/agents/gpt", msg(2, ""))
	send(authed, "POST", "/a2a", `{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"id":"nope"}}`)
	// message/stream: the failure arrives as SSE events.
	send(authed, "POST", "/a2a", strings.Replace(msg(4, "gpt"), "message/send", "message/stream", 1), "Accept", "text/event-stream")

	// A browser's way: the token in the query, on the stream and on a
	// route that does not exist.
	qconn := dialEvents(t, ctx, base, nil, "?token="+token)
	qconn.Close(websocket.StatusNormalClosure, "")
	send(anon, "GET", "/api/nope?token="+token, "")
	send(anon, "GET", "/api/agents?token="+token+"x", "")

	// MCP over HTTP with the go-sdk client.
	mctx, mcancel := context.WithTimeout(ctx, 15*time.Second)
	defer mcancel()
	cs, err := mcpClient().Connect(mctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: authed, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("mcp connect: %v", err)
	}
	for _, a := range []string{"gpt", "claude"} {
		res, err := cs.CallTool(mctx, &mcp.CallToolParams{Name: "agent_" + a, Arguments: map[string]any{"input": "hi"}})
		if err != nil || !res.IsError {
			t.Errorf("mcp call agent_%s: %+v %v, want isError", a, res, err)
		}
	}
	if _, err := cs.CallTool(mctx, &mcp.CallToolParams{Name: "agent_nope", Arguments: map[string]any{"input": "hi"}}); err != nil {
		s.addText("MCP client error", err.Error())
	}
	cs.Close()

	// The stream carried the later failures too; read what is there.
	rctx, rcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	for {
		_, data, err := conn.Read(rctx)
		if err != nil {
			break
		}
		frames.Write(append(data, '\n'))
	}
	rcancel()
	conn.Close(websocket.StatusNormalClosure, "")

	send(authed, "GET", "/metrics", "")
	// A connection the transport dialed but did not use (it lost a race to
	// an idle one) never sent a request: Shutdown would wait the whole
	// grace period for it.
	tr.CloseIdleConnections()
	cmd.Process.Signal(syscall.SIGTERM)
	err = cmd.Wait()
	logs := stderr.String()
	if err != nil {
		t.Errorf("exit after SIGTERM: %v\n%s", err, logs)
	}
	s.addText("serve stderr", logs)
	// The paths above ran: the logs at debug level say so.
	for _, want := range []string{"level=DEBUG", "mcp server"} {
		if !strings.Contains(logs, want) {
			t.Errorf("serve logs lack %q:\n%s", want, logs)
		}
	}
}
