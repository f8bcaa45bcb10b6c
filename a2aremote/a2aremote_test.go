package a2aremote_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/a2aremote"
	"github.com/axocoatl/axocoatl-go/lattice"
	"github.com/axocoatl/axocoatl-go/secret"
)

const token = "tok-7f3c9a2b41d8e6f0a5b3c7d9"

func remoteCfg(url string) a2aremote.AgentConfig {
	return a2aremote.AgentConfig{Name: "remote", URL: url, Headers: map[string]secret.Secret{"Authorization": "Bearer " + token}}
}

// An agent whose model calls a2a__remote gets the remote agent's answer,
// over A2A 1.0 (a2a-go/v2's reference server) and 0.3 (a2a-go v0.3's), the
// configured header reaching the remote and the version header saying
// which generation was spoken.
func TestAgentGetsRemoteAnswer(t *testing.T) {
	for _, g := range generations {
		t.Run(g.name, func(t *testing.T) {
			peer := g.serve(t, answer)
			s := newSetup(t, "plan a trip to Oaxaca", nil, remoteCfg(peer.URL))
			s.ready(t)
			st := s.mod.Status()
			if len(st) != 1 || !st[0].Resolved || st[0].Generation != g.gen {
				t.Fatalf("status = %+v, want resolved on generation %s", st, g.gen)
			}
			tool, ok := s.eng.Tool("a2a__remote")
			if !ok || !strings.Contains(tool.Description, "Plans trips") || !strings.Contains(tool.Description, "plan: makes a plan") {
				t.Fatalf("tool a2a__remote = %+v, want the card's description and skills", tool)
			}
			if string(tool.InputSchema) != `{"type":"object","properties":{"input":{"type":"string"}},"required":["input"]}` {
				t.Fatalf("input schema = %s", tool.InputSchema)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := s.eng.Execute(ctx, "caller", "go")
			if err != nil {
				t.Fatal(err)
			}
			if want := "tool said: remote answer to: plan a trip to Oaxaca"; res.Output != want {
				t.Fatalf("output = %q, want %q", res.Output, want)
			}
			if got := peer.lastAuth(); got != "Bearer "+token {
				t.Fatalf("remote saw Authorization %q, want the configured header", got)
			}
			wantVersion := map[string]string{"1.0": "1.0", "0.3": "0.3"}[g.gen]
			if got := peer.lastVersion(); got != wantVersion {
				t.Fatalf("remote saw A2A-Version %q, want %q", got, wantVersion)
			}
		})
	}
}

// A run cancelled while the remote task works cancels that task: the
// remote receives CancelTask for it.
func TestCancelledRunCancelsRemoteTask(t *testing.T) {
	for _, g := range generations {
		t.Run(g.name, func(t *testing.T) {
			peer := g.serve(t, block)
			s := newSetup(t, "a long job", nil, remoteCfg(peer.URL))
			s.ready(t)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				_, err := s.eng.Execute(ctx, "caller", "go")
				done <- err
			}()
			id := recv(t, peer.started, "the remote task to start")
			cancel()
			defer func() {
				if t.Failed() {
					t.Log(s.logs.String())
				}
			}()
			if got := recv(t, peer.cancels, "CancelTask at the remote"); got != id {
				t.Fatalf("remote cancelled task %q, want %q", got, id)
			}
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("Execute = %v, want context.Canceled", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Execute did not return after its context was cancelled")
			}
		})
	}
}

// A call that outlives the agent's timeout fails with ErrTimeout, and the
// remote task is cancelled.
//
// Guards: bound a2a_agents[].timeout (docs/bounds.md).
func TestTimeoutCancelsRemoteTask(t *testing.T) {
	for _, g := range generations {
		t.Run(g.name, func(t *testing.T) {
			peer := g.serve(t, block)
			cfg := remoteCfg(peer.URL)
			cfg.Timeout = 300 * time.Millisecond
			s := newSetup(t, "", nil, cfg)
			s.ready(t)
			start := time.Now()
			_, err := s.eng.CallTool(context.Background(), axocoatl.ToolCall{AgentID: "caller", Tool: "a2a__remote", Arguments: json.RawMessage(`{"input":"slow"}`)})
			if !errors.Is(err, a2aremote.ErrTimeout) || !strings.Contains(err.Error(), "no answer within 300ms") {
				t.Fatalf("CallTool = %v, want ErrTimeout naming the timeout", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("the call took %s with a 300ms timeout", d)
			}
			id := recv(t, peer.started, "the remote task to start")
			if got := recv(t, peer.cancels, "CancelTask at the remote"); got != id {
				t.Fatalf("remote cancelled task %q, want %q", got, id)
			}
		})
	}
}

// A remote task that fails is a failed tool call carrying the remote's
// reason.
func TestRemoteTaskFailedIsFailedCall(t *testing.T) {
	for _, g := range generations {
		t.Run(g.name, func(t *testing.T) {
			peer := g.serve(t, fail)
			s := newSetup(t, "book it", nil, remoteCfg(peer.URL))
			s.ready(t)
			res, err := s.eng.CallTool(context.Background(), axocoatl.ToolCall{AgentID: "caller", Tool: "a2a__remote", Arguments: json.RawMessage(`{"input":"book it"}`)})
			if !errors.Is(err, a2aremote.ErrTaskFailed) || !strings.Contains(err.Error(), "ended failed: the remote refuses: book it") {
				t.Fatalf("CallTool = %+v, %v; want ErrTaskFailed with the remote's reason", res, err)
			}
			if !res.IsError {
				t.Fatalf("result %+v is not marked as an error", res)
			}
		})
	}
}

// A remote that goes away is a failed tool call with its reason: the model
// is told, the run goes on, and ToolResult says ok=false.
func TestUnreachableRemoteIsFailedCall(t *testing.T) {
	peer := serveV1(t, answer)
	s := newSetup(t, "anyone there?", nil, remoteCfg(peer.URL))
	s.ready(t)
	sub, err := s.eng.Bus().Subscribe(lattice.Filter{Types: []string{axocoatl.EventToolResult}}, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	// Take the remote down: nothing listens at its address any more.
	closeServerAt(t, peer.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.eng.Execute(ctx, "caller", "go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Output, "a2a agent remote") || !strings.Contains(res.Output, "connection refused") {
		t.Fatalf("the model was told %q, want the reason (connection refused)", res.Output)
	}
	select {
	case ev := <-sub.Events():
		var p struct {
			OK    bool   `json:"ok"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal(ev.Payload, &p); err != nil || p.OK || !strings.Contains(p.Error, "connection refused") {
			t.Fatalf("ToolResult payload %s, want ok=false with the reason", ev.Payload)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no ToolResult event")
	}
}

// A remote that is down at Start: its tool is registered at once and fails
// fast with the reason; the card is read again with backoff, and once the
// remote is up the tool takes the card's description and works.
func TestRemoteDownAtStartIsRetried(t *testing.T) {
	peer := serveV1(t, answer)
	var up atomic.Bool
	// The card's own URL is configured; its interfaces point at peer.
	cardProxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		resp, err := http.Get(peer.URL + "/.well-known/agent-card.json")
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", "application/json")
		var card json.RawMessage
		json.NewDecoder(resp.Body).Decode(&card)
		w.Write(card)
	}))
	defer cardProxy.Close()

	s := newSetup(t, "hello", nil, remoteCfg(cardProxy.URL+"/cards/planner.json"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.mod.Ready(ctx); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("Ready = %v, want the card's 503", err)
	}
	tool, ok := s.eng.Tool("a2a__remote")
	if !ok || !strings.Contains(tool.Description, "could not be read yet") {
		t.Fatalf("tool before the card = %+v, want registered with a placeholder description", tool)
	}
	_, err := s.eng.CallTool(ctx, axocoatl.ToolCall{AgentID: "caller", Tool: "a2a__remote", Arguments: json.RawMessage(`{"input":"x"}`)})
	if !errors.Is(err, a2aremote.ErrUnavailable) || !strings.Contains(err.Error(), "503") {
		t.Fatalf("call before the card = %v, want ErrUnavailable with the reason", err)
	}
	up.Store(true)
	for !s.mod.Status()[0].Resolved {
		if ctx.Err() != nil {
			t.Fatalf("card never read after the remote came up: %+v", s.mod.Status())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if tool, _ := s.eng.Tool("a2a__remote"); !strings.Contains(tool.Description, "Plans trips") {
		t.Fatalf("tool after the card: %q, want the card's description", tool.Description)
	}
	res, err := s.eng.CallTool(ctx, axocoatl.ToolCall{AgentID: "caller", Tool: "a2a__remote", Arguments: json.RawMessage(`{"input":"x"}`)})
	if err != nil || res.Content != "remote answer to: x" {
		t.Fatalf("call after the card = %+v, %v", res, err)
	}
}

// The interceptor chain applies: an interceptor that denies stops the call
// before anything reaches the remote; it sees the tool's source and the
// entry's approval policy is on the Engine tool for gates to read.
func TestInterceptorDeniesCall(t *testing.T) {
	peer := serveV1(t, answer)
	cfg := remoteCfg(peer.URL)
	cfg.Approval = a2aremote.ApprovalPrompt
	s := newSetup(t, "do it", nil, cfg)
	s.ready(t)
	if tool, _ := s.eng.Tool("a2a__remote"); tool.Approval != "prompt" || tool.Server != "remote" {
		t.Fatalf("tool Approval %q Server %q, want prompt and remote", tool.Approval, tool.Server)
	}
	var seen atomic.Value
	remove := s.eng.Intercept(func(ctx context.Context, call axocoatl.ToolCall, next axocoatl.ToolFunc) (axocoatl.ToolResult, error) {
		seen.Store(call.Tool + " from " + call.Server)
		return axocoatl.ToolResult{Content: "denied by the gate", IsError: true}, nil
	})
	defer remove()
	before := peer.calls.Load()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.eng.Execute(ctx, "caller", "go")
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != "tool said: Error: denied by the gate" {
		t.Fatalf("output %q, want the gate's denial", res.Output)
	}
	if got, _ := seen.Load().(string); got != "a2a__remote from remote" {
		t.Fatalf("interceptor saw %q", got)
	}
	if n := peer.calls.Load() - before; n != 0 {
		t.Fatalf("the remote received %d requests despite the denial", n)
	}
}

// The allow-list applies: an agent not allowed a2a__ tools neither sees
// nor calls it, and the remote receives nothing.
func TestAllowListApplies(t *testing.T) {
	peer := serveV1(t, answer)
	s := newSetup(t, "do it", []string{"mcp__*"}, remoteCfg(peer.URL))
	s.ready(t)
	before := peer.calls.Load()
	_, err := s.eng.CallTool(context.Background(), axocoatl.ToolCall{AgentID: "caller", Tool: "a2a__remote", Arguments: json.RawMessage(`{"input":"x"}`)})
	if !errors.Is(err, axocoatl.ErrToolDenied) {
		t.Fatalf("CallTool = %v, want ErrToolDenied", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.eng.Execute(ctx, "caller", "go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Output, "tool not allowed for this agent") {
		t.Fatalf("output %q, want the allow-list's refusal", res.Output)
	}
	if n := peer.calls.Load() - before; n != 0 {
		t.Fatalf("the remote received %d requests from an agent not allowed to call it", n)
	}
}

// Bad arguments are a precise failed call; the remote receives nothing.
func TestBadInput(t *testing.T) {
	peer := serveV1(t, answer)
	s := newSetup(t, "", nil, remoteCfg(peer.URL))
	s.ready(t)
	before := peer.calls.Load()
	for _, args := range []string{`{}`, `{"input":3}`, `[1]`, `{"input":null}`, `{"INPUT":"hi"}`, `null`} {
		_, err := s.eng.CallTool(context.Background(), axocoatl.ToolCall{Tool: "a2a__remote", Arguments: json.RawMessage(args)})
		if !errors.Is(err, a2aremote.ErrBadInput) {
			t.Errorf("args %s: %v, want ErrBadInput", args, err)
		}
	}
	if n := peer.calls.Load() - before; n != 0 {
		t.Fatalf("the remote received %d requests for bad input", n)
	}
}

// Header values and the URL's credentials never reach errors, logs,
// events or results: not when the remote is unreachable (Go's errors quote
// the whole URL), not when the remote echoes the header back.
func TestSecretsNotLeaked(t *testing.T) {
	const querySecret = "QUERYSECRET0123456789"
	const userSecret = "userinfo-secret-9876"
	dead := deadAddr(t)
	echo := serveV1(t, echoAuth)
	down := remoteCfg("http://" + userSecret + "@" + dead + "/agent?api_key=" + querySecret)
	down.Name = "down"
	echoCfg := remoteCfg(echo.URL)
	s := newSetup(t, "", nil, down, echoCfg)
	sub, err := s.eng.Bus().Subscribe(lattice.Filter{}, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	readyErr := s.mod.Ready(ctx)
	if readyErr == nil || !strings.Contains(readyErr.Error(), "connection refused") {
		t.Fatalf("Ready = %v, want the down agent's connection refused", readyErr)
	}
	_, callErr := s.eng.CallTool(ctx, axocoatl.ToolCall{Tool: "a2a__down", Arguments: json.RawMessage(`{"input":"x"}`)})
	if callErr == nil {
		t.Fatal("a call to an unreachable agent succeeded")
	}
	res, err := s.eng.CallTool(ctx, axocoatl.ToolCall{Tool: "a2a__remote", Arguments: json.RawMessage(`{"input":"x"}`)})
	if err != nil || res.Content != "you sent: [redacted]" {
		t.Fatalf("echoed header: %+v, %v; want it redacted", res, err)
	}
	var events strings.Builder
	for len(sub.Events()) > 0 {
		ev := <-sub.Events()
		events.Write(ev.Payload)
	}
	status, _ := json.Marshal(s.mod.Status())
	for what, text := range map[string]string{
		"Ready error": readyErr.Error(), "call error": callErr.Error(), "logs": s.logs.String(),
		"events": events.String(), "status": string(status), "result": res.Content,
	} {
		for _, secretValue := range []string{token, querySecret, userSecret} {
			if strings.Contains(text, secretValue) {
				t.Errorf("%s contains a secret: %s", what, text)
			}
		}
	}
	if !strings.Contains(events.String(), "A2A") && !strings.Contains(events.String(), "connection refused") {
		t.Errorf("events carry no A2A agent state: %s", events.String())
	}
}

// deadAddr is a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// closeServerAt stops listening at url's address (the peer's server).
func closeServerAt(t *testing.T, url string) {
	t.Helper()
	srv, ok := servers.Load(url)
	if !ok {
		t.Fatalf("no server at %s", url)
	}
	s := srv.(*httptest.Server)
	s.CloseClientConnections()
	s.Close()
}

// Stopping the module (Engine.Close) ends a call in flight with
// ErrStopped and cancels its remote task.
func TestStopCancelsCallInFlight(t *testing.T) {
	peer := serveV1(t, block)
	s := newSetup(t, "", nil, remoteCfg(peer.URL))
	s.ready(t)
	done := make(chan error, 1)
	go func() {
		_, err := s.eng.CallTool(context.Background(), axocoatl.ToolCall{Tool: "a2a__remote", Arguments: json.RawMessage(`{"input":"x"}`)})
		done <- err
	}()
	id := recv(t, peer.started, "the remote task to start")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.mod.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, a2aremote.ErrStopped) {
		t.Fatalf("call in flight at Stop: %v, want ErrStopped", err)
	}
	if got := recv(t, peer.cancels, "CancelTask at the remote"); got != id {
		t.Fatalf("remote cancelled %q, want %q", got, id)
	}
	if _, ok := s.eng.Tool("a2a__remote"); ok {
		t.Fatal("the tool is still registered after Stop")
	}
}

// The bounds: text into the model (max_output_bytes, cut with a note), one
// HTTP response (max_response_bytes, a precise error), calls in flight
// (max_concurrent: the next waits for a slot within its timeout).
//
// Guards: bound a2a_agents[].max_response_bytes, bound
// a2a_agents[].max_output_bytes, bound a2a_agents[].max_concurrent
// (docs/bounds.md).
func TestBounds(t *testing.T) {
	peer := serveV1(t, answer)
	long := strings.Repeat("é", 3000) // 6000 bytes
	call := func(s *setup, input string) (axocoatl.ToolResult, error) {
		args, _ := json.Marshal(map[string]string{"input": input})
		return s.eng.CallTool(context.Background(), axocoatl.ToolCall{Tool: "a2a__remote", Arguments: args})
	}
	t.Run("max_output_bytes", func(t *testing.T) {
		cfg := remoteCfg(peer.URL)
		cfg.MaxOutputBytes = 101
		s := newSetup(t, "", nil, cfg)
		s.ready(t)
		res, err := call(s, long)
		if err != nil {
			t.Fatal(err)
		}
		text, note, _ := strings.Cut(res.Content, "\n[output cut: ")
		if len(text) > 101 || !strings.HasPrefix(text, "remote answer to: éé") || !strings.Contains(note, "more bytes over max_output_bytes (101)") {
			t.Fatalf("result %q: want at most 101 bytes and a note", res.Content)
		}
		if !utf8Valid(text) {
			t.Fatalf("cut inside a character: %q", text)
		}
	})
	t.Run("max_response_bytes", func(t *testing.T) {
		cfg := remoteCfg(peer.URL)
		cfg.MaxResponseBytes = 2000
		s := newSetup(t, "", nil, cfg)
		s.ready(t)
		_, err := call(s, long)
		if !strings.Contains(fmt.Sprint(err), "a2a response over its bound: more than 2000 bytes") {
			t.Fatalf("call with a 6 KB answer and max_response_bytes 2000: %v", err)
		}
	})
	t.Run("max_concurrent", func(t *testing.T) {
		slow := serveV1(t, block)
		cfg := remoteCfg(slow.URL)
		cfg.MaxConcurrent = 1
		s := newSetup(t, "", nil, cfg)
		s.ready(t)
		callCtx := func(ctx context.Context, input string) error {
			_, err := s.eng.CallTool(ctx, axocoatl.ToolCall{Tool: "a2a__remote", Arguments: json.RawMessage(`{"input":"` + input + `"}`)})
			return err
		}
		firstCtx, cancelFirst := context.WithCancel(context.Background())
		first := make(chan error, 1)
		go func() { first <- callCtx(firstCtx, "one") }()
		recv(t, slow.started, "the first call to reach the remote")
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		err := callCtx(ctx, "two")
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "waiting for a free slot (max_concurrent 1)") {
			t.Fatalf("second call: %v, want it to end waiting for the slot", err)
		}
		cancelFirst()
		if err := <-first; !errors.Is(err, context.Canceled) {
			t.Fatalf("first call: %v", err)
		}
		select {
		case id := <-slow.started:
			t.Fatalf("a second task %s reached the remote past max_concurrent 1", id)
		default:
		}
	})
}

func utf8Valid(s string) bool { return utf8.ValidString(s) }

// Calls reuse connections: a streamed answer is read to its end, so the
// HTTP client keeps the connection (a body closed early would cost a new
// connection, and over TLS a handshake, per call).
func TestConnectionsReused(t *testing.T) {
	for _, g := range generations {
		t.Run(g.name, func(t *testing.T) {
			peer := g.serve(t, answer)
			s := newSetup(t, "", nil, remoteCfg(peer.URL))
			s.ready(t)
			before := peer.conns.Load()
			for range 50 {
				res, err := s.eng.CallTool(context.Background(), axocoatl.ToolCall{Tool: "a2a__remote", Arguments: json.RawMessage(`{"input":"x"}`)})
				if err != nil || res.Content != "remote answer to: x" {
					t.Fatal(res, err)
				}
			}
			if n := peer.conns.Load() - before; n > 2 {
				t.Fatalf("50 sequential calls opened %d connections", n)
			}
		})
	}
}

// Check (the doctor probe) reads a card of either generation and says which
// one a call will speak; a card that is not one, or names no interface, is
// a precise error.
//
// Guards: bound "the card" (a2a client) (docs/bounds.md).
func TestCheck(t *testing.T) {
	for _, g := range generations {
		t.Run(g.name, func(t *testing.T) {
			peer := g.serve(t, answer)
			info, err := a2aremote.Check(context.Background(), remoteCfg(peer.URL), nil)
			if err != nil {
				t.Fatal(err)
			}
			binding := "JSONRPC "
			if strings.HasSuffix(g.name, "-rest") {
				binding = "HTTP+JSON "
			}
			if info.Generation != g.gen || info.Name != "Planner" || !info.Streaming || len(info.Interfaces) != 1 || !strings.HasPrefix(info.Interfaces[0], binding) {
				t.Fatalf("Check = %+v, want generation %s", info, g.gen)
			}
		})
	}
	for _, tc := range []struct{ name, body, want string }{
		{"not json", "hello", "agent card is not JSON of an A2A card"},
		{"no interface", `{"name":"x","description":"y","version":"1"}`, "agent card names no interface"},
		{"relative url", `{"name":"x","url":"/a2a","preferredTransport":"JSONRPC","protocolVersion":"0.3.0"}`, `interface URL "/a2a" is not an absolute http or https URL`},
		{"over 1 MiB", `{"name":"` + strings.Repeat("x", 1<<20) + `"}`, "a2a response over its bound: more than 1048576 bytes"},
		{"only grpc", `{"name":"x","supportedInterfaces":[{"url":"http://h/a2a","protocolBinding":"GRPC","protocolVersion":"1.0"}]}`, "offers no interface this client speaks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			_, err := a2aremote.Check(context.Background(), remoteCfg(srv.URL), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "a2a agent remote: ") {
				t.Fatalf("Check = %v, want %q", err, tc.want)
			}
		})
	}
}

// A configured header value too short to be scrubbed (under MinRedactLen)
// is named in a warning, by its key only; a long one is not.
func TestShortSecretWarned(t *testing.T) {
	echo := serveV1(t, echoAuth)
	cfg := remoteCfg(echo.URL)
	cfg.Headers["X-Pin"] = "7q"
	s := newSetup(t, "", nil, cfg)
	s.ready(t)
	logs := s.logs.String()
	if !strings.Contains(logs, "too short to redact") || !strings.Contains(logs, "key=headers.X-Pin") {
		t.Fatalf("no warning naming headers.X-Pin:\n%s", logs)
	}
	if strings.Contains(logs, "key=headers.Authorization") || strings.Contains(logs, "7q") {
		t.Errorf("warned about the long value, or showed the short one:\n%s", logs)
	}
}

// The module's client calls each method it uses on a 0.3 remote of every
// server (a2a-go v0.3 JSON-RPC, a2av0's HTTP+JSON, @a2a-js/sdk's
// HTTP+JSON): a blocking SendMessage (what a remote whose card says it does
// not stream is sent; @a2a-js/sdk answers it with 201 Created), GetTask of
// that task, GetTask of an unknown task (ErrTaskNotFound), CancelTask of a
// finished task (an A2A error, not a success) and ListTasks (no 0.3
// method: ErrUnsupportedOperation).
func TestClientMethods03(t *testing.T) {
	for _, g := range generations {
		if g.gen != "0.3" {
			continue
		}
		t.Run(g.name, func(t *testing.T) {
			peer := g.serve(t, answer)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			card, err := (&agentcard.Resolver{Client: http.DefaultClient, CardParser: a2av0.NewAgentCardParser()}).Resolve(ctx, peer.URL)
			if err != nil {
				t.Fatal(err)
			}
			c, err := a2aremote.NewClient(ctx, card, &http.Client{})
			if err != nil {
				t.Fatal(err)
			}
			res, err := c.SendMessage(ctx, &a2a1.SendMessageRequest{Message: a2a1.NewMessage(a2a1.MessageRoleUser, a2a1.NewTextPart("hello"))})
			if err != nil {
				t.Fatal(err)
			}
			task, ok := res.(*a2a1.Task)
			if !ok || task.Status.State != a2a1.TaskStateCompleted || len(task.Artifacts) != 1 || task.Artifacts[0].Parts[0].Text() != "remote answer to: hello" {
				t.Fatalf("SendMessage = %#v, want the completed task with its artifact", res)
			}
			got, err := c.GetTask(ctx, &a2a1.GetTaskRequest{ID: task.ID})
			if err != nil || got.ID != task.ID || got.Status.State != a2a1.TaskStateCompleted || len(got.Artifacts) != 1 || got.Artifacts[0].Parts[0].Text() != "remote answer to: hello" {
				t.Fatalf("GetTask = %+v, %v", got, err)
			}
			if _, err := c.GetTask(ctx, &a2a1.GetTaskRequest{ID: "no-such-task"}); !errors.Is(err, a2a1.ErrTaskNotFound) {
				t.Fatalf("GetTask of an unknown task = %v, want ErrTaskNotFound", err)
			}
			// A task id is the remote's word: whatever it holds, the server
			// reads it as one id (over HTTP+JSON, one path segment).
			for _, id := range []string{"a/b", "../../" + string(task.ID), "x?historyLength=1#f", "a b:c"} {
				if _, err := c.GetTask(ctx, &a2a1.GetTaskRequest{ID: a2a1.TaskID(id)}); !errors.Is(err, a2a1.ErrTaskNotFound) {
					t.Fatalf("GetTask of task id %q = %v, want ErrTaskNotFound", id, err)
				}
			}
			if _, err := c.CancelTask(ctx, &a2a1.CancelTaskRequest{ID: task.ID}); err == nil || !errors.As(err, new(*a2a1.Error)) {
				t.Fatalf("CancelTask of a completed task = %v, want an A2A error", err)
			}
			if _, err := c.ListTasks(ctx, &a2a1.ListTasksRequest{}); !errors.Is(err, a2a1.ErrUnsupportedOperation) {
				t.Fatalf("ListTasks = %v, want ErrUnsupportedOperation", err)
			}
		})
	}
}
