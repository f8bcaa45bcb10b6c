package approval_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/openai"
	"github.com/axocoatl/axocoatl-go/approval"
	"github.com/axocoatl/axocoatl-go/lattice"
	"github.com/axocoatl/axocoatl-go/mcpclient"
	"github.com/axocoatl/axocoatl-go/secret"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is an Engine with the approval module and its routes on a test
// server.
type env struct {
	e      *axocoatl.Engine
	m      *approval.Module
	events lattice.Subscription // approval events
	http   *httptest.Server
}

func newEnv(t testing.TB, cfg approval.Config, opts axocoatl.Options) *env {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	e := axocoatl.New(opts)
	m, err := approval.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := e.Bus().Subscribe(lattice.Filter{Types: []string{"Approval*"}}, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Use(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m)
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := e.Close(ctx); err != nil {
			t.Errorf("engine close: %v", err)
		}
	})
	return &env{e: e, m: m, events: ev, http: srv}
}

// next returns the next approval event of type typ, skipping others.
func (v *env) next(t testing.TB, typ string) map[string]any {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-v.events.Events():
			if ev.Type != typ {
				continue
			}
			var p map[string]any
			if err := json.Unmarshal(ev.Payload, &p); err != nil {
				t.Fatal(err)
			}
			return p
		case <-deadline:
			t.Fatalf("no %s event within 10s", typ)
		}
	}
}

type response struct {
	status int
	body   map[string]any
	raw    string
}

func (v *env) do(t testing.TB, method, path, body string) response {
	t.Helper()
	return doHTTP(t, v.http.URL, method, path, body)
}

func doHTTP(t testing.TB, base, method, path, body string) response {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	r := response{status: res.StatusCode, raw: string(raw)}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

func errCode(r response) string {
	e, _ := r.body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// recorder is a native tool that counts its calls by their arguments.
type recorder struct {
	mu    sync.Mutex
	calls map[string]int
	n     atomic.Int64
}

func (r *recorder) tool(name, server, policy string) axocoatl.Tool {
	return axocoatl.Tool{
		Name: name, Server: server, Approval: policy, Description: "Writes a file.",
		Call: func(_ context.Context, c axocoatl.ToolCall) (axocoatl.ToolResult, error) {
			r.n.Add(1)
			r.mu.Lock()
			if r.calls == nil {
				r.calls = map[string]int{}
			}
			r.calls[string(c.Arguments)]++
			r.mu.Unlock()
			return axocoatl.ToolResult{Content: "wrote " + string(c.Arguments)}, nil
		},
	}
}

func (r *recorder) count(args string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[args]
}

// filesServer is a go-sdk MCP server whose write tool records each call;
// it is attached to the Engine through mcpclient as server "files".
type filesServer struct {
	srv   *mcp.Server
	calls atomic.Int64
}

type writeIn struct {
	Path string `json:"path"`
	Text string `json:"text"`
}

func newFilesServer() *filesServer {
	fs := &filesServer{srv: mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1"}, nil)}
	mcp.AddTool(fs.srv, &mcp.Tool{Name: "write", Description: "Writes a file."},
		func(_ context.Context, _ *mcp.CallToolRequest, in writeIn) (*mcp.CallToolResult, any, error) {
			fs.calls.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "wrote " + in.Path}}}, nil, nil
		})
	mcp.AddTool(fs.srv, &mcp.Tool{Name: "echo", Description: "Echoes.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			Message string `json:"message"`
		}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Echo: " + in.Message}}}, nil, nil
		})
	return fs
}

func (fs *filesServer) dial(ctx context.Context) (mcp.Transport, error) {
	ct, st := mcp.NewInMemoryTransports()
	if _, err := fs.srv.Connect(ctx, st, nil); err != nil {
		return nil, err
	}
	return ct, nil
}

// attach connects the server to e through mcpclient and waits until its
// tools are registered.
func (fs *filesServer) attach(t testing.TB, e *axocoatl.Engine, policy string) {
	t.Helper()
	mc, err := mcpclient.New(mcpclient.Config{Servers: []mcpclient.ServerConfig{{Name: "files", Dial: fs.dial, Approval: policy}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Use(context.Background(), mc); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := mc.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.Tool("mcp__files__write"); !ok {
		t.Fatal("mcp__files__write not registered")
	}
}

// openAIPeer is an httptest server speaking the OpenAI chat-completions
// wire. The user's message is {"tool": NAME, "args": {...}}: the model
// calls that tool with those arguments, then answers "done: " and the
// tool's result, which it records (what the model was told).
type openAIPeer struct {
	srv  *httptest.Server
	mu   sync.Mutex
	told []string
}

func newOpenAIPeer(t testing.TB) *openAIPeer {
	p := &openAIPeer{}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *openAIPeer) serve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	last := req.Messages[len(req.Messages)-1]
	text := contentText(last.Content)
	w.Header().Set("Content-Type", "application/json")
	if last.Role == "tool" {
		p.mu.Lock()
		p.told = append(p.told, text)
		p.mu.Unlock()
		fmt.Fprintf(w, `{"id":"c2","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}]}`, "done: "+text)
		return
	}
	var ask struct {
		Tool string          `json:"tool"`
		Args json.RawMessage `json:"args"`
	}
	if json.Unmarshal([]byte(text), &ask) != nil || ask.Tool == "" {
		fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"no tool"},"finish_reason":"stop"}]}`)
		return
	}
	fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":%q,"arguments":%q}}]},"finish_reason":"tool_calls"}]}`, ask.Tool, string(ask.Args))
}

func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, x := range parts {
		b.WriteString(x.Text)
	}
	return b.String()
}

func (p *openAIPeer) lastTold() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.told) == 0 {
		return ""
	}
	return p.told[len(p.told)-1]
}

// model returns an agent.Model on the peer.
func (p *openAIPeer) model(t testing.TB) agent.Model {
	t.Helper()
	m, err := openai.New(provider.Config{BaseURL: p.srv.URL + "/v1", APIKey: secret.Secret("sk-test"), MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// ask is the user message that makes the peer's model call tool with args.
func ask(tool, args string) string {
	return fmt.Sprintf(`{"tool":%q,"args":%s}`, tool, args)
}

// eventually polls cond until it holds or 10s pass.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func newHTTPServer(t testing.TB, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// threadTime is the CPU time of the calling thread (lock the goroutine to
// it first): a loaded machine inflates wall time, much less this.
func threadTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
