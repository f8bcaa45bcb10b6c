package axocoatl_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/openai"
	"github.com/axocoatl/axocoatl-go/secret"
)

// chatServer is an OpenAI-wire model that calls tool once per run (with
// secret text in its arguments), then answers; it names a dated model
// and reports usage, as the real service does.
func chatServer(t *testing.T, tool string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Stream   bool `json:"stream"`
			Messages []struct {
				Role    string `json:"role"`
				Content any    `json:"content"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
			http.Error(w, "want a chat completion request", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if last := req.Messages[len(req.Messages)-1]; last.Role == "tool" {
			fmt.Fprintf(w, `{"model":"gpt-test-2026-01-01","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":%q}}],"usage":{"prompt_tokens":30,"completion_tokens":5}}`,
				fmt.Sprint("done: ", last.Content))
			return
		}
		fmt.Fprintf(w, `{"model":"gpt-test-2026-01-01","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_7","type":"function","function":{"name":%q,"arguments":"{\"q\":\"the user's words\"}"}}]}}],"usage":{"prompt_tokens":20,"completion_tokens":3}}`, tool)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// tracedEngine is an Engine exporting to memory, with agent "ops" on the
// model at modelURL and the tool "lookup" from server "kb".
func tracedEngine(t *testing.T, modelURL string, capture bool) (*axocoatl.Engine, *tracetest.InMemoryExporter) {
	return tracedEngineWith(t, modelURL, axocoatl.Options{CaptureContent: capture})
}

func tracedEngineWith(t *testing.T, modelURL string, opts axocoatl.Options) (*axocoatl.Engine, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	opts.TracerProvider = tp
	e := axocoatl.New(opts)
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	m, err := openai.New(provider.Config{BaseURL: modelURL + "/v1", APIKey: secret.Secret("sk-never-in-a-span-4242")})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.AddAgent(agent.Spec{ID: "ops", Name: "Ops", Provider: "openai", Model: "gpt-test"}, m); err != nil {
		t.Fatal(err)
	}
	if err := e.RegisterTool(axocoatl.Tool{Name: "lookup", Server: "kb", Call: func(ctx context.Context, c axocoatl.ToolCall) (axocoatl.ToolResult, error) {
		return axocoatl.ToolResult{Content: "the tool's answer"}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	return e, exp
}

func spanNamed(t *testing.T, spans tracetest.SpanStubs, name string) []tracetest.SpanStub {
	t.Helper()
	var out []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		var names []string
		for _, s := range spans {
			names = append(names, s.Name)
		}
		t.Fatalf("no span %q among %q", name, names)
	}
	return out
}

func attrsOf(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

func wantAttrs(t *testing.T, s tracetest.SpanStub, want map[string]any) {
	t.Helper()
	got := attrsOf(s)
	for k, v := range want {
		g, ok := got[attribute.Key(k)]
		if !ok {
			t.Errorf("span %q: no %s (has %v)", s.Name, k, s.Attributes)
			continue
		}
		if fmt.Sprint(g.AsInterface()) != fmt.Sprint(v) {
			t.Errorf("span %q: %s = %v, want %v", s.Name, k, g.AsInterface(), v)
		}
	}
}

// One run makes invoke_agent → chat, execute_tool, chat, under the
// caller's span, with the GenAI conventions' attributes, and no prompt,
// answer, tool data or key in any span.
func TestRunSpans(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprint("observed=", stream), func(t *testing.T) {
			e, exp := tracedEngine(t, chatServer(t, "lookup"), false)
			parentCtx, parent := e.Tracer().Start(context.Background(), "door")
			req := axocoatl.Request{AgentID: "ops", Input: "the user's secret words", ConversationID: "c-1", CreateConversation: true}
			if stream {
				req.OnEvent = func(agent.RunEvent) {} // the model is called through GenerateStream
			}
			res, err := e.ExecuteRequest(parentCtx, req)
			parent.End()
			if err != nil {
				t.Fatal(err)
			}
			spans := exp.GetSpans()
			run := spanNamed(t, spans, "invoke_agent Ops")[0]
			if run.Parent.SpanID() != parent.SpanContext().SpanID() || run.SpanContext.TraceID() != parent.SpanContext().TraceID() {
				t.Fatalf("the run span is not a child of the caller's span")
			}
			wantAttrs(t, run, map[string]any{
				"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.id": "ops", "gen_ai.agent.name": "Ops",
				"gen_ai.conversation.id": "c-1", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-test",
				"gen_ai.usage.input_tokens": 50, "gen_ai.usage.output_tokens": 8,
				"axocoatl.task.id": res.TaskID, "axocoatl.source": "library",
			})
			chats := spanNamed(t, spans, "chat gpt-test")
			if len(chats) != 2 {
				t.Fatalf("%d chat spans, want 2", len(chats))
			}
			for i, c := range chats {
				if c.Parent.SpanID() != run.SpanContext.SpanID() {
					t.Errorf("chat span %d is not the run's child", i)
				}
			}
			wantAttrs(t, chats[0], map[string]any{
				"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-test",
				"gen_ai.response.model": "gpt-test-2026-01-01", "gen_ai.usage.input_tokens": 20, "gen_ai.usage.output_tokens": 3,
				"gen_ai.response.finish_reasons": []string{"tool_calls"},
			})
			wantAttrs(t, chats[1], map[string]any{"gen_ai.response.finish_reasons": []string{"stop"}, "gen_ai.usage.input_tokens": 30})
			tool := spanNamed(t, spans, "execute_tool lookup")[0]
			if tool.Parent.SpanID() != run.SpanContext.SpanID() {
				t.Errorf("the tool span is not the run's child")
			}
			wantAttrs(t, tool, map[string]any{
				"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup", "gen_ai.tool.call.id": "call_7",
				"axocoatl.tool.server": "kb", "gen_ai.agent.id": "ops",
			})
			for _, s := range spans {
				for _, kv := range s.Attributes {
					v := kv.Value.String()
					if strings.Contains(v, "secret words") || strings.Contains(v, "user's words") || strings.Contains(v, "tool's answer") || strings.Contains(v, "sk-never") {
						t.Errorf("span %q carries content without capture_content: %s=%s", s.Name, kv.Key, v)
					}
				}
				if s.Status.Code == codes.Error {
					t.Errorf("span %q failed: %s", s.Name, s.Status.Description)
				}
			}
		})
	}
}

// With CaptureContent the chat spans carry the messages in the
// conventions' shape and the tool span its arguments and result. Guards:
// a content attribute (16 KiB, MaxSpanContentBytes): a 40 KiB input is
// cut to fit, the newest messages kept.
func TestRunSpansCaptureContent(t *testing.T) {
	e, exp := tracedEngine(t, chatServer(t, "lookup"), true)
	if _, err := e.Execute(context.Background(), "ops", "what is "+strings.Repeat("x", 40<<10)); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	chats := spanNamed(t, spans, "chat gpt-test")
	in := attrsOf(chats[1])["gen_ai.input.messages"].AsString()
	if len(in) > axocoatl.MaxSpanContentBytes {
		t.Errorf("gen_ai.input.messages is %d bytes, over %d", len(in), axocoatl.MaxSpanContentBytes)
	}
	var msgs []struct {
		Role  string `json:"role"`
		Parts []struct {
			Type     string `json:"type"`
			Content  string `json:"content"`
			ID       string `json:"id"`
			Name     string `json:"name"`
			Response string `json:"response"`
		} `json:"parts"`
	}
	if err := json.Unmarshal([]byte(in), &msgs); err != nil {
		t.Fatalf("gen_ai.input.messages is not JSON: %v\n%.300s", err, in)
	}
	if len(msgs) != 3 || msgs[0].Role != "user" || !strings.HasPrefix(msgs[0].Parts[0].Content, "what is x") || !strings.HasSuffix(msgs[0].Parts[0].Content, "[cut]") ||
		msgs[1].Parts[0].Type != "tool_call" || msgs[1].Parts[0].Name != "lookup" || msgs[2].Parts[0].Response != "the tool's answer" {
		t.Errorf("gen_ai.input.messages = %.400s", in)
	}
	out := attrsOf(chats[1])["gen_ai.output.messages"].AsString()
	if !strings.Contains(out, `"content":"done: the tool's answer"`) || !strings.Contains(out, `"finish_reason":"stop"`) {
		t.Errorf("gen_ai.output.messages = %s", out)
	}
	tool := spanNamed(t, spans, "execute_tool lookup")[0]
	wantAttrs(t, tool, map[string]any{"gen_ai.tool.call.arguments": `{"q":"the user's words"}`, "gen_ai.tool.call.result": "the tool's answer"})
	for _, s := range spans {
		for _, kv := range s.Attributes {
			if strings.Contains(kv.Value.String(), "sk-never") {
				t.Errorf("span %q carries the API key in %s", s.Name, kv.Key)
			}
		}
	}
}

// A failed run and a failed tool call are spans with status Error and
// error.type.
func TestRunSpanErrors(t *testing.T) {
	e, exp := tracedEngine(t, chatServer(t, "missing"), false)
	if err := e.AddAgent(agent.Spec{ID: "short", MaxIterations: 1}, agent.Model(loopModel{})); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Execute(context.Background(), "ops", "hi"); err != nil {
		t.Fatal(err)
	}
	tool := spanNamed(t, exp.GetSpans(), "execute_tool missing")[0]
	if tool.Status.Code != codes.Error {
		t.Errorf("a call of an unknown tool: status %v", tool.Status)
	}
	if _, err := e.Execute(context.Background(), "short", "hi"); err == nil {
		t.Fatal("a run past max_iterations succeeded")
	}
	run := spanNamed(t, exp.GetSpans(), "invoke_agent short")[0]
	if run.Status.Code != codes.Error || !strings.Contains(run.Status.Description, "max_iterations") {
		t.Errorf("status %v", run.Status)
	}
	wantAttrs(t, run, map[string]any{"error.type": "max_iterations"})
}

// loopModel always asks for a tool.
type loopModel struct{}

func (loopModel) Generate(context.Context, *agent.Request) (*agent.Response, error) {
	return &agent.Response{ToolCalls: []agent.ToolCall{{ID: "x", Name: "lookup", Arguments: json.RawMessage(`{}`)}}}, nil
}

// A guarded door continues the caller's traceparent in a server span
// named by its route (no id in the name), and the run is its child.
func TestDoorSpan(t *testing.T) {
	const token = "door-token-0123456789abcdef"
	e, exp := tracedEngineWith(t, chatServer(t, "lookup"), axocoatl.Options{HTTP: axocoatl.HTTPOptions{APIToken: secret.Secret(token)}})
	inner := http.NewServeMux()
	inner.HandleFunc("POST /run/{agent}", func(w http.ResponseWriter, r *http.Request) {
		if _, err := e.ExecuteRequest(r.Context(), axocoatl.Request{AgentID: r.PathValue("agent"), Input: "hi", Source: axocoatl.SourceAPI}); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})
	outer := http.NewServeMux()
	outer.Handle("/api/", http.StripPrefix("/api", e.GuardHTTP(axocoatl.HTTPRoute{Scope: axocoatl.ScopeExecute}, inner)))
	srv := httptest.NewServer(outer)
	defer srv.Close()

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	post := func(path string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader("{}"))
		req.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if code := post("/api/run/ops"); code != http.StatusAccepted {
		t.Fatalf("status %d", code)
	}
	spans := exp.GetSpans()
	door := spanNamed(t, spans, "POST /api/run/{agent}")[0]
	if door.SpanContext.TraceID().String() != traceID || door.Parent.SpanID().String() != "00f067aa0ba902b7" || !door.Parent.IsRemote() {
		t.Fatalf("the door span does not continue the caller's trace: %v parent %v", door.SpanContext.TraceID(), door.Parent.SpanID())
	}
	wantAttrs(t, door, map[string]any{"http.request.method": "POST", "http.route": "/api/run/{agent}", "http.response.status_code": 202})
	run := spanNamed(t, spans, "invoke_agent Ops")[0]
	if run.Parent.SpanID() != door.SpanContext.SpanID() {
		t.Fatal("the run is not the door span's child")
	}
	exp.Reset()
	if code := post("/api/run/nobody"); code != http.StatusInternalServerError {
		t.Fatalf("status %d", code)
	}
	door = spanNamed(t, exp.GetSpans(), "POST /api/run/{agent}")[0]
	if door.Status.Code != codes.Error {
		t.Errorf("a 500 answer: status %v", door.Status)
	}
	wantAttrs(t, door, map[string]any{"error.type": "500", "http.response.status_code": 500})
	for _, s := range exp.GetSpans() {
		for _, kv := range s.Attributes {
			if strings.Contains(kv.Value.String(), token) {
				t.Errorf("span %q carries the token in %s", s.Name, kv.Key)
			}
		}
	}
}

// Guards: a name a peer chose in a span (256 bytes): a service answering
// with a model name of 10 KiB does not put it whole in the chat span.
func TestSpanPeerNamesBounded(t *testing.T) {
	e, exp := tracedEngine(t, chatServer(t, "lookup"), false)
	if err := e.AddAgent(agent.Spec{ID: "big"}, agent.Model(bigNames{})); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Execute(context.Background(), "big", "hi"); err != nil {
		t.Fatal(err)
	}
	chat := spanNamed(t, exp.GetSpans(), "chat")[0]
	got := attrsOf(chat)
	if m := got["gen_ai.response.model"].AsString(); len(m) > 256 || !strings.HasPrefix(m, "mmm") {
		t.Errorf("gen_ai.response.model is %d bytes", len(m))
	}
	if f := got["gen_ai.response.finish_reasons"].AsStringSlice(); len(f) != 1 || len(f[0]) > 256 {
		t.Errorf("gen_ai.response.finish_reasons %d bytes", len(f[0]))
	}
}

type bigNames struct{}

func (bigNames) Generate(context.Context, *agent.Request) (*agent.Response, error) {
	return &agent.Response{Content: "ok", Model: strings.Repeat("m", 10<<10), FinishReason: strings.Repeat("f", 10<<10)}, nil
}

// A run cancelled mid-call ends its spans: the chat span and the run's
// are Error with error.type canceled, none left open.
func TestCanceledRunSpans(t *testing.T) {
	e, exp := tracedEngine(t, chatServer(t, "lookup"), false)
	started := make(chan struct{})
	if err := e.AddAgent(agent.Spec{ID: "slow"}, agent.Model(blockModel{started})); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := e.Execute(ctx, "slow", "hi"); done <- err }()
	<-started
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a cancelled run succeeded")
	}
	spans := exp.GetSpans()
	run, chat := spanNamed(t, spans, "invoke_agent slow")[0], spanNamed(t, spans, "chat")[0]
	for _, s := range []tracetest.SpanStub{run, chat} {
		if s.Status.Code != codes.Error || attrsOf(s)["error.type"].AsString() != "canceled" {
			t.Errorf("span %q: status %v, error.type %q", s.Name, s.Status, attrsOf(s)["error.type"].AsString())
		}
	}
}

type blockModel struct{ started chan struct{} }

func (m blockModel) Generate(ctx context.Context, _ *agent.Request) (*agent.Response, error) {
	close(m.started)
	<-ctx.Done()
	return nil, ctx.Err()
}
