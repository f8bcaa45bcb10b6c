package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

// Acceptance of both MCP eras on the built binary: a go-sdk client that
// prefers 2026-07-28 (its default) and one pinned to 2025-11-25, each over
// `axocoatl mcp serve` and over /mcp, call an agent, see its progress and
// cancel a run; a 2026-07-28 client's calls spread over two daemons behind
// one round-robin proxy.

const era2026, era2025 = "2026-07-28", "2025-11-25"

// eraUpstream is an OpenAI-wire model server: model "slow" answers after
// 1.5 s, model "stuck" only when its request is cancelled, which it
// reports on cancelled (after started).
type eraUpstream struct {
	*httptest.Server
	started, cancelled chan struct{}
}

func newEraUpstream(t *testing.T) *eraUpstream {
	u := &eraUpstream{started: make(chan struct{}, 8), cancelled: make(chan struct{}, 8)}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model string `json:"model"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		io.Copy(io.Discard, r.Body) // lets net/http see a client that hangs up
		delay := 1500 * time.Millisecond
		if req.Model == "stuck" {
			u.started <- struct{}{}
			delay = time.Minute
		}
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			if req.Model == "stuck" {
				u.cancelled <- struct{}{}
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"slow answer"}}]}`)
	}))
	t.Cleanup(u.Close)
	return u
}

func eraConfig(t *testing.T, u *eraUpstream) string {
	return writeConfig(t, `
server:
  shutdown_grace: 5s
mcp_server:
  name: axocoatl-under-test
  progress_interval: 500ms
providers:
  openai: { base_url: `+u.URL+`/v1, api_key: sk-test, max_retries: -1 }
agents:
  - id: echo
    provider: echo
  - id: slow
    provider: openai
    model: slow
  - id: stuck
    provider: openai
    model: stuck
`)
}

// eraWire notes what a client's HTTP requests and their answers carried.
type eraWire struct {
	mu         sync.Mutex
	gets       int
	versions   map[string]int
	sessionIDs int
}

func (w *eraWire) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.versions == nil {
		w.versions = map[string]int{}
	}
	if r.Method == http.MethodGet {
		w.gets++
	}
	w.versions[r.Header.Get("Mcp-Protocol-Version")]++
	if r.Header.Get("Mcp-Session-Id") != "" || resp != nil && resp.Header.Get("Mcp-Session-Id") != "" {
		w.sessionIDs++
	}
	return resp, err
}

// checkEra runs the acceptance on one session: the negotiated era, a call,
// progress while a run lasts, and a cancelled run (its model request
// cancelled upstream).
func checkEra(t *testing.T, cs *mcp.ClientSession, era string, u *eraUpstream, progress <-chan string) {
	t.Helper()
	ctx := mcpCtx(t)
	if v := cs.InitializeResult().ProtocolVersion; v != era {
		t.Fatalf("negotiated %q, want %s", v, era)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_echo", Arguments: map[string]any{"input": "hi " + era}})
	if err != nil || res.IsError || mcpText(res) != "hi "+era {
		t.Fatalf("agent_echo: %q %v", mcpText(res), err)
	}

	params := &mcp.CallToolParams{Name: "agent_slow", Arguments: map[string]any{"input": "take your time"}}
	params.SetProgressToken("p-" + era)
	res, err = cs.CallTool(ctx, params)
	if err != nil || mcpText(res) != "slow answer" {
		t.Fatalf("agent_slow: %q %v", mcpText(res), err)
	}
	var msgs []string
	for len(msgs) < 2 { // "started", then "running for …" every 500 ms of a 1.5 s run
		select {
		case m := <-progress:
			msgs = append(msgs, m)
		case <-time.After(5 * time.Second):
			t.Fatalf("progress: %q, want a start and a beat", msgs)
		}
	}
	if !strings.Contains(msgs[0], "agent slow started") || !strings.Contains(msgs[1], "running for") {
		t.Errorf("progress %q", msgs)
	}

	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "agent_stuck", Arguments: map[string]any{"input": "never mind"}})
		errc <- err
	}()
	select {
	case <-u.started:
	case <-time.After(10 * time.Second):
		t.Fatal("agent_stuck's model was never asked")
	}
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled call: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the cancelled call did not return")
	}
	select {
	case <-u.cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("cancelling the call did not cancel the run's model request")
	}
	// The client goes on.
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_echo", Arguments: map[string]any{"input": "after"}}); err != nil || mcpText(res) != "after" {
		t.Errorf("after cancel: %q %v", mcpText(res), err)
	}
}

func eraClient(progress chan<- string) *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "era-test", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{},
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			select {
			case progress <- r.Params.Message:
			default:
			}
		},
	})
}

func eraOpts(era string) *mcp.ClientSessionOptions {
	if era == era2026 {
		return nil // the go-sdk client's default: server/discover first
	}
	return &mcp.ClientSessionOptions{ProtocolVersion: era}
}

func TestMCPErasBinary(t *testing.T) {
	bin := buildBinary(t)
	u := newEraUpstream(t)
	config := eraConfig(t, u)

	for _, era := range []string{era2026, era2025} {
		t.Run("mcp serve "+era, func(t *testing.T) {
			cmd := mcpCommand(t, bin, config)
			var stderr testutil.SyncBuffer
			cmd.Stderr = &stderr
			progress := make(chan string, 64)
			cs, err := eraClient(progress).Connect(mcpCtx(t), &mcp.CommandTransport{Command: cmd}, eraOpts(era))
			if err != nil {
				t.Fatalf("connect: %v\n%s", err, stderr.String())
			}
			defer cs.Close()
			checkEra(t, cs, era, u, progress)
		})
	}

	base, cmd, stderr := startBinary(t, bin, nil, "--config", config, "--addr", "127.0.0.1:0")
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for _, era := range []string{era2026, era2025} {
		t.Run("/mcp "+era, func(t *testing.T) {
			wire := &eraWire{}
			progress := make(chan string, 64)
			cs, err := eraClient(progress).Connect(mcpCtx(t), &mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: wire}, MaxRetries: -1}, eraOpts(era))
			if err != nil {
				t.Fatalf("connect: %v\n%s", err, stderr.String())
			}
			defer cs.Close()
			checkEra(t, cs, era, u, progress)
			wire.mu.Lock()
			defer wire.mu.Unlock()
			if era == era2026 && (wire.sessionIDs != 0 || wire.gets != 0 || len(wire.versions) != 1 || wire.versions[era2026] == 0) {
				t.Errorf("2026-07-28 on the wire: %d exchanges with Mcp-Session-Id, %d GETs, versions %v: want none, none, all %s", wire.sessionIDs, wire.gets, wire.versions, era2026)
			}
			if era == era2025 && wire.sessionIDs == 0 {
				t.Error("2025-11-25 on the wire: no Mcp-Session-Id, want a session")
			}
		})
	}
}

// Two daemons with the same agents behind one round-robin reverse proxy: a
// 2026-07-28 client's consecutive calls are answered by both, as each
// request stands alone.
func TestMCPStatelessBehindRoundRobinProxy(t *testing.T) {
	bin := buildBinary(t)
	config := mcpConfig(t)
	var backends []*url.URL
	for range 2 {
		// Two daemons of one config need a data dir each.
		base, cmd, _ := startBinary(t, bin, []string{"AXOCOATL_DATA_DIR=" + t.TempDir()}, "--config", config, "--addr", "127.0.0.1:0")
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		u, err := url.Parse(base)
		if err != nil {
			t.Fatal(err)
		}
		backends = append(backends, u)
	}
	var next atomic.Int64
	var calls [2]atomic.Int64 // tools/call requests each backend got
	proxy := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		i := int(next.Add(1)-1) % len(backends)
		if r.In.Header.Get("Mcp-Method") == "tools/call" {
			calls[i].Add(1)
		}
		r.SetURL(backends[i])
	}})
	t.Cleanup(proxy.Close)

	cs, err := mcpClient().Connect(mcpCtx(t), &mcp.StreamableClientTransport{Endpoint: proxy.URL + "/mcp", MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != era2026 {
		t.Fatalf("negotiated %q through the proxy, want %s", v, era2026)
	}
	for i := range 6 {
		in := fmt.Sprintf("call %d", i)
		res, err := cs.CallTool(mcpCtx(t), &mcp.CallToolParams{Name: "agent_echo", Arguments: map[string]any{"input": in}})
		if err != nil || res.IsError || mcpText(res) != in {
			t.Fatalf("call %d through the proxy: %q %v", i, mcpText(res), err)
		}
	}
	if calls[0].Load() == 0 || calls[1].Load() == 0 {
		t.Errorf("tools/call per backend: %d and %d, want both served", calls[0].Load(), calls[1].Load())
	}
}
