package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
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
	"github.com/axocoatl/axocoatl-go/mcpserver"
	"github.com/axocoatl/axocoatl-go/secret"
)

// childEnv makes the test binary an MCP stdio server, so that real clients
// (the Inspector CLI, mcp-go's and go-sdk's command transports) can run it
// as a child process.
const childEnv = "MCPSERVER_TEST_STDIO_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(runChild())
	}
	if era := os.Getenv(bareChildEnv); era != "" {
		os.Exit(runBareChild(era))
	}
	if era := os.Getenv(clientChildEnv); era != "" {
		os.Exit(runClientChild(era))
	}
	goleak.VerifyTestMain(m)
}

// runChild serves the test engine over this process's stdin and stdout;
// logs go to stderr, as in `axocoatl mcp serve`.
func runChild() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	eng, closeUpstream := newEngine(log)
	defer closeUpstream()
	defer eng.Close(context.Background())
	srv, err := mcpserver.New(mcpserver.Config{})
	if err == nil {
		err = eng.Use(ctx, srv)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer srv.Close()
	if err := srv.ServeStdio(ctx, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		return 1
	}
	return 0
}

// blockingModel answers only when its context ends, and says so.
type blockingModel struct {
	started chan struct{}
	ended   chan error
}

func (m *blockingModel) Generate(ctx context.Context, _ *agent.Request) (*agent.Response, error) {
	select {
	case m.started <- struct{}{}:
	default:
	}
	<-ctx.Done()
	select {
	case m.ended <- ctx.Err():
	default:
	}
	return nil, ctx.Err()
}

// sleepyModel answers "slept" after a while.
type sleepyModel struct{ d time.Duration }

func (m sleepyModel) Generate(ctx context.Context, _ *agent.Request) (*agent.Response, error) {
	select {
	case <-time.After(m.d):
		return &agent.Response{Content: "slept"}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// toolUser calls the tool "clock" once, then answers with what it said.
type toolUser struct{ calls atomic.Int64 }

func (m *toolUser) Generate(ctx context.Context, req *agent.Request) (*agent.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == agent.RoleTool {
		return &agent.Response{Content: "the clock says " + last.Content}, nil
	}
	m.calls.Add(1)
	return &agent.Response{ToolCalls: []agent.ToolCall{{ID: "c1", Name: "clock", Arguments: json.RawMessage(`{}`)}}}, nil
}

// newEngine returns an Engine with these agents: echo (offline, with a
// description), broken (the OpenAI provider, against an HTTP server that
// answers 500), worker (calls the tool "clock"). closeUpstream stops that
// HTTP server.
func newEngine(log *slog.Logger) (eng *axocoatl.Engine, closeUpstream func()) {
	return newEngineWith(log, axocoatl.HTTPOptions{})
}

// newEngineWith is newEngine guarding HTTP with opts.
func newEngineWith(log *slog.Logger, opts axocoatl.HTTPOptions) (eng *axocoatl.Engine, closeUpstream func()) {
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, `{"error":{"message":"upstream exploded","type":"server_error"}}`)
	}))
	failing, err := openai.New(provider.Config{BaseURL: upstream.URL + "/v1", APIKey: secret.Secret("sk-test"), MaxRetries: -1})
	must(err)
	eng = axocoatl.New(axocoatl.Options{Logger: log, HTTP: opts})
	must(eng.AddAgent(agent.Spec{ID: "echo", Name: "Echo", Description: "Repeats its input."}, provider.EchoModel{}))
	must(eng.AddAgent(agent.Spec{ID: "broken", Name: "Broken", Provider: provider.OpenAI, Model: "gpt-x", Tools: []string{}}, failing))
	// The hints come from the model, not the spec's provider string: a
	// host's own model that says "echo" is still open world.
	must(eng.AddAgent(agent.Spec{ID: "worker", Name: "Worker", Provider: provider.Echo}, &toolUser{}))
	must(eng.RegisterTool(axocoatl.Tool{Name: "clock", Description: "tells the time", Call: func(ctx context.Context, _ axocoatl.ToolCall) (axocoatl.ToolResult, error) {
		return axocoatl.ToolResult{Content: "noon"}, nil
	}}))
	return eng, upstream.Close
}

type fixture struct {
	eng  *axocoatl.Engine
	srv  *mcpserver.Server
	slow *blockingModel
}

// newFixture builds the test Engine plus a "slow" agent, and a Server on it;
// both close with the test.
func newFixture(t *testing.T, cfg mcpserver.Config, guard ...axocoatl.HTTPOptions) *fixture {
	t.Helper()
	var opts axocoatl.HTTPOptions
	if len(guard) > 0 {
		opts = guard[0]
	}
	eng, closeUpstream := newEngineWith(slog.New(slog.NewTextHandler(io.Discard, nil)), opts)
	t.Cleanup(closeUpstream)
	slow := &blockingModel{started: make(chan struct{}, 1), ended: make(chan error, 1)}
	if err := eng.AddAgent(agent.Spec{ID: "slow", Provider: provider.OpenAI}, slow); err != nil {
		t.Fatal(err)
	}
	if err := eng.AddAgent(agent.Spec{ID: "sleepy", Provider: provider.OpenAI}, sleepyModel{300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, eng, cfg)
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := eng.Close(ctx); err != nil {
			t.Errorf("engine close: %v", err)
		}
	})
	return &fixture{eng: eng, srv: srv, slow: slow}
}

func testClient(opts *mcp.ClientOptions) *mcp.Client {
	if opts == nil {
		opts = &mcp.ClientOptions{}
	}
	// Without this the go-sdk client advertises roots it does not serve.
	opts.Capabilities = &mcp.ClientCapabilities{}
	return mcp.NewClient(&mcp.Implementation{Name: "mcpserver-test", Version: "1"}, opts)
}

// connectInMemory connects a go-sdk client to the server in-process.
// A session option (legacy) picks the client's era; none: the go-sdk's
// default, 2026-07-28.
func connectInMemory(t *testing.T, f *fixture, opts *mcp.ClientOptions, so ...*mcp.ClientSessionOptions) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := f.srv.MCP().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := testClient(opts).Connect(ctx, ct, sessionOpts(so))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait() })
	return cs
}

func sessionOpts(so []*mcp.ClientSessionOptions) *mcp.ClientSessionOptions {
	if len(so) > 0 {
		return so[0]
	}
	return nil
}

func textOf(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("want one content block, got %d", len(res.Content))
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content is %T, want text", res.Content[0])
	}
	return tc.Text
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var errTimeout = errors.New("timed out")

func recv[T any](ch <-chan T, d time.Duration) (T, error) {
	select {
	case v := <-ch:
		return v, nil
	case <-time.After(d):
		var zero T
		return zero, errTimeout
	}
}

// startServer starts a Server as a module of eng.
func startServer(tb testing.TB, eng *axocoatl.Engine, cfg mcpserver.Config) *mcpserver.Server {
	tb.Helper()
	srv, err := mcpserver.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := eng.Use(context.Background(), srv); err != nil {
		tb.Fatal(err)
	}
	return srv
}
