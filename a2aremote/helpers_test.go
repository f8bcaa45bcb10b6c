package a2aremote_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"iter"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2asrv03 "github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"go.uber.org/goleak"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/a2aremote"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/openai"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// servers maps a peer's URL to its server, for tests that take it down.
var servers sync.Map

// behaviour steers what a test's remote agent does with a message.
type behaviour int

const (
	answer   behaviour = iota // an artifact "remote answer to: <input>", then completed
	fail                      // failed, with the status message "the remote refuses: <input>"
	block                     // working, then waits until cancelled or the test ends
	echoAuth                  // answers "you sent: <Authorization header>" (1.0 only)
)

// remotePeer is what a test observes of its remote agent, whichever SDK
// serves it.
type remotePeer struct {
	URL     string
	do      behaviour
	started chan string   // task ids whose execution began (block)
	cancels chan string   // task ids CancelTask was received for
	ctxEnd  chan string   // task ids whose execution context ended (block)
	release chan struct{} // closed when the test ends: blocked executions return
	auth    atomic.Value  // the last Authorization header received
	version atomic.Value  // the last A2A-Version header received on a POST
	tparent atomic.Value  // the last traceparent header received on a POST
	calls   atomic.Int64  // HTTP requests received
	conns   atomic.Int64  // TCP connections accepted
}

func newPeer(t testing.TB, do behaviour) *remotePeer {
	p := &remotePeer{do: do, started: make(chan string, 16), cancels: make(chan string, 16), ctxEnd: make(chan string, 16), release: make(chan struct{})}
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(p.release) }) })
	return p
}

// serve starts an httptest server for h, recording the headers.
func (p *remotePeer) serve(t testing.TB, mux *http.ServeMux) *httptest.Server {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.calls.Add(1)
		p.auth.Store(r.Header.Get("Authorization"))
		if r.Method == http.MethodPost {
			p.version.Store(r.Header.Get("A2A-Version"))
			p.tparent.Store(r.Header.Get("traceparent"))
		}
		mux.ServeHTTP(w, r)
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			p.conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	p.URL = srv.URL
	servers.Store(srv.URL, srv)
	t.Cleanup(func() { servers.Delete(srv.URL) })
	return srv
}

func (p *remotePeer) lastAuth() string    { s, _ := p.auth.Load().(string); return s }
func (p *remotePeer) lastVersion() string { s, _ := p.version.Load().(string); return s }

// serveCard1 serves, on mux, a minimal A2A 1.0 card named name whose one
// interface is JSON-RPC at base+"/a2a".
func serveCard1(mux *http.ServeMux, base, name string, streaming bool) {
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(&a2a1.AgentCard{
		Name: name, Version: "1",
		SupportedInterfaces: []*a2a1.AgentInterface{a2a1.NewAgentInterface(base+"/a2a", a2a1.TransportProtocolJSONRPC)},
		Capabilities:        a2a1.AgentCapabilities{Streaming: streaming},
	}))
}

// serveExecutor serves exec with a2a-go/v2's reference server under a
// minimal card (serveCard1).
func serveExecutor(t testing.TB, exec a2asrv.AgentExecutor, name string, streaming bool) *remotePeer {
	p := newPeer(t, answer)
	mux := http.NewServeMux()
	srv := p.serve(t, mux)
	mux.Handle("/a2a", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(exec)))
	serveCard1(mux, srv.URL, name, streaming)
	return p
}

// serveV1 serves p over A2A 1.0 with a2a-go/v2's reference server
// (a2asrv.NewHandler + NewJSONRPCHandler) and a 1.0 card.
func serveV1(t testing.TB, do behaviour) *remotePeer {
	p := newPeer(t, do)
	mux := http.NewServeMux()
	srv := p.serve(t, mux)
	mux.Handle("/a2a", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(v1Executor{p})))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(&a2a1.AgentCard{
		Name: "Planner", Description: "Plans trips (A2A 1.0).", Version: "1",
		SupportedInterfaces: []*a2a1.AgentInterface{a2a1.NewAgentInterface(srv.URL+"/a2a", a2a1.TransportProtocolJSONRPC)},
		Capabilities:        a2a1.AgentCapabilities{Streaming: true},
		DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a1.AgentSkill{{ID: "plan", Name: "plan", Description: "makes a plan", Tags: []string{"plan"}}},
	}))
	return p
}

type v1Executor struct{ p *remotePeer }

func (x v1Executor) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a1.Event, error] {
	return func(yield func(a2a1.Event, error) bool) {
		var text string
		for _, part := range ec.Message.Parts {
			text += part.Text()
		}
		if ec.StoredTask == nil && !yield(a2a1.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		switch x.p.do {
		case fail:
			yield(a2a1.NewStatusUpdateEvent(ec, a2a1.TaskStateFailed, a2a1.NewMessage(a2a1.MessageRoleAgent, a2a1.NewTextPart("the remote refuses: "+text))), nil)
		case echoAuth:
			auth, _ := ec.ServiceParams.Get("Authorization")
			if yield(a2a1.NewArtifactEvent(ec, a2a1.NewTextPart("you sent: "+strings.Join(auth, ","))), nil) {
				yield(a2a1.NewStatusUpdateEvent(ec, a2a1.TaskStateCompleted, nil), nil)
			}
		case block:
			if !yield(a2a1.NewStatusUpdateEvent(ec, a2a1.TaskStateWorking, nil), nil) {
				return
			}
			x.p.started <- string(ec.TaskID)
			select {
			case <-ctx.Done():
				x.p.ctxEnd <- string(ec.TaskID)
			case <-x.p.release:
			}
		default:
			if yield(a2a1.NewArtifactEvent(ec, a2a1.NewTextPart("remote answer to: "+text)), nil) {
				yield(a2a1.NewStatusUpdateEvent(ec, a2a1.TaskStateCompleted, nil), nil)
			}
		}
	}
}

func (x v1Executor) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a1.Event, error] {
	x.p.cancels <- string(ec.TaskID)
	return func(yield func(a2a1.Event, error) bool) {
		yield(a2a1.NewStatusUpdateEvent(ec, a2a1.TaskStateCanceled, nil), nil)
	}
}

// serveV03 serves p over A2A 0.3 with a2a-go v0.3's reference server and
// a 0.3 card (url, preferredTransport, protocolVersion 0.3.0).
func serveV03(t testing.TB, do behaviour) *remotePeer {
	p := newPeer(t, do)
	mux := http.NewServeMux()
	srv := p.serve(t, mux)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	mux.Handle("/a2a", a2asrv03.NewJSONRPCHandler(a2asrv03.NewHandler(v03Executor{p}, a2asrv03.WithLogger(quiet))))
	mux.Handle(a2asrv03.WellKnownAgentCardPath, a2asrv03.NewStaticAgentCardHandler(&a2a03.AgentCard{
		Name: "Planner", Description: "Plans trips (A2A 0.3).", Version: "1", ProtocolVersion: "0.3.0",
		URL: srv.URL + "/a2a", PreferredTransport: a2a03.TransportProtocolJSONRPC,
		Capabilities:      a2a03.AgentCapabilities{Streaming: true},
		DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a03.AgentSkill{{ID: "plan", Name: "plan", Description: "makes a plan", Tags: []string{"plan"}}},
	}))
	return p
}

// serveV03REST serves p over A2A 0.3 HTTP+JSON (the /v1 REST routes with
// proto-JSON bodies) with a2a-go/v2's a2av0.NewRESTHandler in front of its
// reference request handler (a2a-go v0.3 itself has no REST server), and
// a 0.3 card whose preferredTransport is HTTP+JSON.
func serveV03REST(t testing.TB, do behaviour) *remotePeer {
	p := newPeer(t, do)
	mux := http.NewServeMux()
	srv := p.serve(t, mux)
	mux.Handle("/rest/", http.StripPrefix("/rest", a2av0.NewRESTHandler(a2asrv.NewHandler(v1Executor{p}))))
	mux.Handle(a2asrv03.WellKnownAgentCardPath, a2asrv03.NewStaticAgentCardHandler(&a2a03.AgentCard{
		Name: "Planner", Description: "Plans trips (A2A 0.3, HTTP+JSON).", Version: "1", ProtocolVersion: "0.3.0",
		URL: srv.URL + "/rest", PreferredTransport: a2a03.TransportProtocolHTTPJSON,
		Capabilities:      a2a03.AgentCapabilities{Streaming: true},
		DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a03.AgentSkill{{ID: "plan", Name: "plan", Description: "makes a plan", Tags: []string{"plan"}}},
	}))
	return p
}

// Pinned npm packages of serveA2AJS03 (.ci/run warms npm's cache with them).
const (
	a2aJSPackage   = "@a2a-js/sdk@1.3.0"
	expressPackage = "express@5.1.0" // @a2a-js/sdk's peer dependency for its express handlers
)

// serveA2AJS03 serves p over A2A 0.3 HTTP+JSON with @a2a-js/sdk 1.3.0
// (restHandler with legacyCompat, testdata/a2ajs03_server.mjs under node):
// a 0.3 REST implementation independent of a2a-go's. A Go reverse proxy in
// front of it records headers, requests and connections as p.serve does
// for the Go peers, and serves a 0.3 card naming it.
func serveA2AJS03(t testing.TB, do behaviour) *remotePeer {
	sdk := testutil.NodeModules(t, a2aJSPackage)
	express := testutil.NodeModules(t, expressPackage)
	// One node_modules of both installs: with --preserve-symlinks the SDK
	// resolves express from here, not from beside its real path.
	dir := t.TempDir()
	modules := filepath.Join(dir, "node_modules")
	if err := os.Mkdir(modules, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, from := range []string{sdk, express} {
		entries, err := os.ReadDir(from)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if err := os.Symlink(filepath.Join(from, e.Name()), filepath.Join(modules, e.Name())); err != nil && !errors.Is(err, fs.ErrExist) {
				t.Fatal(err)
			}
		}
	}
	script, err := os.ReadFile("testdata/a2ajs03_server.mjs")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "server.mjs"), script, 0o644); err != nil {
		t.Fatal(err)
	}
	mode := map[behaviour]string{answer: "answer", fail: "fail", block: "block"}[do]
	if mode == "" {
		t.Fatalf("serveA2AJS03 has no behaviour %d", do)
	}
	cmd := exec.Command("node", "--preserve-symlinks", "--preserve-symlinks-main", filepath.Join(dir, "server.mjs"), mode)
	cmd.Dir = dir
	var stderr testutil.SyncBuffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := newPeer(t, do)
	lines := bufio.NewScanner(stdout)
	var base string
	if lines.Scan() {
		var hello struct{ URL string }
		if json.Unmarshal(lines.Bytes(), &hello) == nil {
			base = hello.URL
		}
	}
	read := make(chan struct{})
	go func() { // ends when node's stdout closes
		defer close(read)
		for lines.Scan() {
			kind, id, _ := strings.Cut(lines.Text(), " ")
			ch := map[string]chan string{"started": p.started, "cancel": p.cancels}[kind]
			if ch != nil {
				select {
				case ch <- id:
				default:
				}
			}
		}
	}()
	t.Cleanup(func() {
		stdin.Close() // the script's signal to stop
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		<-read
	})
	if base == "" {
		t.Fatalf("node did not print its URL: %s", stderr.String())
	}
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1 // SSE events as they come
	mux := http.NewServeMux()
	srv := p.serve(t, mux)
	// Full duplex: the proxy sends node's response headers while its
	// transport may still be reading the request body, which a Go HTTP/1
	// server otherwise closes at the first write of the response; the
	// transport then closed its connection to node mid-stream and the
	// client read an unexpected EOF (one call in four under load).
	duplex := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		proxy.ServeHTTP(w, r)
	})
	mux.Handle("/v1/", duplex)
	mux.Handle("/rpc", duplex) // 0.3 JSON-RPC, which the card below does not name
	mux.Handle(a2asrv03.WellKnownAgentCardPath, a2asrv03.NewStaticAgentCardHandler(&a2a03.AgentCard{
		Name: "Planner", Description: "Plans trips (A2A 0.3 HTTP+JSON, @a2a-js/sdk).", Version: "1", ProtocolVersion: "0.3.0",
		URL: srv.URL, PreferredTransport: a2a03.TransportProtocolHTTPJSON,
		Capabilities:      a2a03.AgentCapabilities{Streaming: true},
		DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a03.AgentSkill{{ID: "plan", Name: "plan", Description: "makes a plan", Tags: []string{"plan"}}},
	}))
	return p
}

type v03Executor struct{ p *remotePeer }

func (x v03Executor) Execute(ctx context.Context, rc *a2asrv03.RequestContext, q eventqueue.Queue) error {
	var text string
	for _, part := range rc.Message.Parts {
		if tp, ok := part.(a2a03.TextPart); ok {
			text += tp.Text
		}
	}
	if rc.StoredTask == nil {
		if err := q.Write(ctx, a2a03.NewSubmittedTask(rc, rc.Message)); err != nil {
			return err
		}
	}
	final := func(state a2a03.TaskState, msg *a2a03.Message) error {
		ev := a2a03.NewStatusUpdateEvent(rc, state, msg)
		ev.Final = true
		return q.Write(ctx, ev)
	}
	switch x.p.do {
	case fail:
		return final(a2a03.TaskStateFailed, a2a03.NewMessage(a2a03.MessageRoleAgent, a2a03.TextPart{Text: "the remote refuses: " + text}))
	case block:
		if err := q.Write(ctx, a2a03.NewStatusUpdateEvent(rc, a2a03.TaskStateWorking, nil)); err != nil {
			return err
		}
		x.p.started <- string(rc.TaskID)
		select {
		case <-ctx.Done():
			x.p.ctxEnd <- string(rc.TaskID)
			return ctx.Err()
		case <-x.p.release:
			return nil
		}
	}
	if err := q.Write(ctx, a2a03.NewArtifactEvent(rc, a2a03.TextPart{Text: "remote answer to: " + text})); err != nil {
		return err
	}
	return final(a2a03.TaskStateCompleted, nil)
}

func (x v03Executor) Cancel(ctx context.Context, rc *a2asrv03.RequestContext, q eventqueue.Queue) error {
	x.p.cancels <- string(rc.TaskID)
	ev := a2a03.NewStatusUpdateEvent(rc, a2a03.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// generations runs a test against a remote of each generation.
var generations = []struct {
	name  string
	gen   string
	serve func(testing.TB, behaviour) *remotePeer
}{
	{"a2a-1.0", "1.0", serveV1},
	{"a2a-0.3", "0.3", serveV03},
	{"a2a-0.3-rest", "0.3", serveV03REST},
	{"a2ajs-0.3-rest", "0.3", serveA2AJS03},
}

// toolModel is an OpenAI-wire model that calls tool with {"input": input}
// and then answers "tool said: <the tool message>".
type toolModel struct {
	tool, input string
	requests    atomic.Int64
}

func (m *toolModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.requests.Add(1)
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	var message map[string]any
	var toolSaid []string
	for _, msg := range req.Messages {
		if msg.Role == "tool" {
			s, _ := msg.Content.(string)
			toolSaid = append(toolSaid, s)
		}
	}
	if len(toolSaid) == 0 {
		args, _ := json.Marshal(map[string]string{"input": m.input})
		message = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{
			map[string]any{"id": "call-1", "type": "function", "function": map[string]any{"name": m.tool, "arguments": string(args)}},
		}}
	} else {
		message = map[string]any{"role": "assistant", "content": "tool said: " + strings.Join(toolSaid, " | ")}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "fake",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": message}},
	})
}

// setup is an Engine with one agent "caller" on a toolModel calling
// a2a__remote, allowed the tools in allow (nil: all), and the module
// configured with agents. Logs go to the returned buffer.
type setup struct {
	eng   *axocoatl.Engine
	mod   *a2aremote.Module
	model *toolModel
	logs  *testutil.SyncBuffer
}

func newSetup(t *testing.T, input string, allow []string, agents ...a2aremote.AgentConfig) *setup {
	t.Helper()
	s := &setup{model: &toolModel{tool: "a2a__remote", input: input}, logs: &testutil.SyncBuffer{}}
	llm := httptest.NewServer(s.model)
	t.Cleanup(llm.Close)
	s.eng = axocoatl.New(axocoatl.Options{Logger: slog.New(slog.NewTextHandler(s.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.eng.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	model, err := openai.New(provider.Config{BaseURL: llm.URL + "/v1", APIKey: "sk-test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.eng.AddAgent(agent.Spec{ID: "caller", Provider: provider.OpenAI, Model: "fake", Tools: allow}, model); err != nil {
		t.Fatal(err)
	}
	s.mod, err = a2aremote.New(a2aremote.Config{Agents: agents, MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.eng.Use(context.Background(), s.mod); err != nil {
		t.Fatal(err)
	}
	return s
}

// ready waits for the first card reads and fails the test on an error.
func (s *setup) ready(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := s.mod.Ready(ctx); err != nil {
		t.Fatal(err)
	}
}

func recv(t *testing.T, ch <-chan string, what string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		return ""
	}
}
