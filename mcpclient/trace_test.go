package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/internal/tracehttp"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

// seen is what a go-sdk server's tool was sent of the caller's trace:
// the _meta traceparent and tracestate, and the HTTP header traceparent.
type seen struct {
	meta, state, header string
	version             string
}

// traceServer is a go-sdk server whose "where" tool records what it saw.
func traceServer() (*mcp.Server, <-chan seen) {
	ch := make(chan seen, 8)
	srv := mcp.NewServer(&mcp.Implementation{Name: "traced", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "where", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var s seen
		m := req.Params.GetMeta()
		s.meta, _ = m["traceparent"].(string)
		s.state, _ = m["tracestate"].(string)
		if req.Extra != nil && req.Extra.Header != nil {
			s.header = req.Extra.Header.Get("traceparent")
		}
		s.version = req.ProtocolVersion()
		ch <- s
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "here"}}}, nil
	})
	return srv, ch
}

// inMemory dials a fresh in-memory session of srv for each attempt.
func inMemory(srv *mcp.Server) func(context.Context) (mcp.Transport, error) {
	return func(ctx context.Context) (mcp.Transport, error) {
		ct, st := mcp.NewInMemoryTransports()
		if _, err := srv.Connect(ctx, st, nil); err != nil {
			return nil, err
		}
		return ct, nil
	}
}

// waitServer is a go-sdk server whose tool "wait" returns when its
// request's context ends; entered, when not nil, is told of each call.
func waitServer(entered chan<- struct{}) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "wait", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if entered != nil {
			entered <- struct{}{}
		}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	return srv
}

// spansByName are spans by name (the last of a name).
func spansByName(spans []sdktrace.ReadOnlySpan) map[string]sdktrace.ReadOnlySpan {
	byName := make(map[string]sdktrace.ReadOnlySpan, len(spans))
	for _, sp := range spans {
		byName[sp.Name()] = sp
	}
	return byName
}

// attrOf is span's attribute key as a string, "" when it has none.
func attrOf(span sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range span.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

// tracedModule is startModule with an Engine that records its spans.
func tracedModule(t *testing.T, cfg Config) (*axocoatl.Engine, *tracetest.SpanRecorder, *Module) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	e, m := moduleWith(t, sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)), cfg)
	return e, rec, m
}

// moduleWith is startModule with an Engine tracing with tp (shut down at
// the test's end).
func moduleWith(t *testing.T, tp *sdktrace.TracerProvider, cfg Config) (*axocoatl.Engine, *Module) {
	t.Helper()
	e := axocoatl.New(axocoatl.Options{TracerProvider: tp})
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Use(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := e.Close(ctx); err != nil {
			t.Errorf("engine close: %v", err)
		}
		_ = tp.Shutdown(ctx)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	return e, m
}

// A tools/call inside a trace carries the trace context of the Engine's
// execute_tool span in _meta (SEP-414), in both eras, and over HTTP in
// the headers too; that span, a child of the caller's, has the MCP
// conventions' attributes, and no separate tools/call span is made (the
// conventions: SHOULD NOT, when execute_tool already traces the call). A
// call outside any trace starts a trace of its own.
func TestTraceContextOut(t *testing.T) {
	cases := []struct {
		name    string
		version string // the era the client ends up in
		http    bool
		server  func(*mcp.Server) ServerConfig
	}{
		{"memory", "2026-07-28", false, func(srv *mcp.Server) ServerConfig {
			return ServerConfig{Name: "tr", Dial: inMemory(srv)}
		}},
		{"http 2025-11-25", "2025-11-25", true, func(srv *mcp.Server) ServerConfig {
			hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
			t.Cleanup(hs.Close)
			return ServerConfig{Name: "tr", URL: hs.URL}
		}},
		{"http 2026-07-28", "2026-07-28", true, func(srv *mcp.Server) ServerConfig {
			hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true}))
			t.Cleanup(hs.Close)
			return ServerConfig{Name: "tr", URL: hs.URL}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv, got := traceServer()
			e, rec, _ := tracedModule(t, Config{Servers: []ServerConfig{c.server(srv)}})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()

			// The caller's span, with a tracestate to pass on.
			ts, err := trace.ParseTraceState("axo=1")
			if err != nil {
				t.Fatal(err)
			}
			parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: [16]byte{1, 2, 3}, SpanID: [8]byte{4, 5, 6}, TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true})
			pctx := trace.ContextWithRemoteSpanContext(ctx, parent)
			if res, err := e.CallTool(pctx, axocoatl.ToolCall{Tool: "mcp__tr__where", Arguments: json.RawMessage(`{}`)}); err != nil || res.Content != "here" {
				t.Fatalf("call: %+v %v", res, err)
			}
			s := <-got
			if s.version != c.version {
				t.Errorf("era %q, want %q", s.version, c.version)
			}
			spans := rec.Ended()
			if len(spans) != 1 {
				t.Fatalf("%d spans, want execute_tool alone: %v", len(spans), spanNames(spans))
			}
			span := spans[0]
			if span.Name() != "execute_tool mcp__tr__where" || span.Parent().SpanID() != parent.SpanID() || span.SpanContext().TraceID() != parent.TraceID() {
				t.Fatalf("span %q, parent %v, trace %v: want execute_tool mcp__tr__where, child of the caller's", span.Name(), span.Parent().SpanID(), span.SpanContext().TraceID())
			}
			attrs := map[string]string{}
			for _, kv := range span.Attributes() {
				attrs[string(kv.Key)] = kv.Value.String()
			}
			// gen_ai.tool.name stays the Engine's: the name the model called.
			if attrs["mcp.method.name"] != "tools/call" || attrs["gen_ai.tool.name"] != "mcp__tr__where" || attrs["mcp.protocol.version"] != c.version ||
				attrs["axocoatl.mcp.server"] != "tr" || attrs["gen_ai.operation.name"] != "execute_tool" {
				t.Errorf("attributes %v", attrs)
			}
			if c.http && (attrs["network.transport"] != "tcp" || attrs["server.address"] != "127.0.0.1") {
				t.Errorf("network attributes %v", attrs)
			}
			want := "00-" + parent.TraceID().String() + "-" + span.SpanContext().SpanID().String() + "-01"
			if s.meta != want || s.state != "axo=1" {
				t.Errorf("_meta traceparent %q tracestate %q, want %q and axo=1", s.meta, s.state, want)
			}
			if c.http && s.header != want {
				t.Errorf("header traceparent %q, want %q", s.header, want)
			}

			// Outside a trace: the call starts its own (execute_tool is its
			// root) and sends that one, never the earlier call's.
			before := len(rec.Ended())
			if _, err := e.CallTool(ctx, axocoatl.ToolCall{Tool: "mcp__tr__where", Arguments: json.RawMessage(`{}`)}); err != nil {
				t.Fatal(err)
			}
			s = <-got
			ended := rec.Ended()[before:]
			if len(ended) != 1 || ended[0].SpanContext().TraceID() == parent.TraceID() || ended[0].Parent().IsValid() {
				t.Fatalf("a call outside a trace made spans %v, want one root execute_tool", spanNames(ended))
			}
			own := ended[0]
			want = "00-" + own.SpanContext().TraceID().String() + "-" + own.SpanContext().SpanID().String() + "-01"
			if s.meta != want || s.state != "" || (c.http && s.header != want) {
				t.Errorf("a call outside a trace sent %+v, want its own trace's %q", s, want)
			}
		})
	}
}

// spanNames are the names of spans, for a failure's message.
func spanNames(spans []sdktrace.ReadOnlySpan) []string {
	names := make([]string, len(spans))
	for i, sp := range spans {
		names[i] = sp.Name()
	}
	return names
}

// A span between the Engine's execute_tool and the call (an interceptor's)
// means execute_tool no longer traces the call alone: the call gets its
// own client span "tools/call <tool>", a child of that span, with the
// server's bare tool name, and sends its context. A failed call's
// error.type is the MCP client's word for it (the session closed), on
// the span that traces the call.
func TestNestedClientSpan(t *testing.T) {
	srv, got := traceServer()
	e, rec, _ := tracedModule(t, Config{Servers: []ServerConfig{{Name: "tr", Dial: inMemory(srv)}}})
	e.Intercept(func(ctx context.Context, call axocoatl.ToolCall, next axocoatl.ToolFunc) (axocoatl.ToolResult, error) {
		ctx, span := e.Tracer().Start(ctx, "gate")
		defer span.End()
		return next(ctx, call)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if res, err := e.CallTool(ctx, axocoatl.ToolCall{Tool: "mcp__tr__where", Arguments: json.RawMessage(`{}`)}); err != nil || res.Content != "here" {
		t.Fatalf("call: %+v %v", res, err)
	}
	s := <-got
	byName := spansByName(rec.Ended())
	call, gate, tool := byName["tools/call where"], byName["gate"], byName["execute_tool mcp__tr__where"]
	if call == nil || gate == nil || tool == nil {
		t.Fatalf("spans %v, want execute_tool, gate and tools/call", spanNames(rec.Ended()))
	}
	if call.Parent().SpanID() != gate.SpanContext().SpanID() || gate.Parent().SpanID() != tool.SpanContext().SpanID() || call.SpanKind() != trace.SpanKindClient {
		t.Fatalf("tools/call's parent %v (gate %v), kind %v", call.Parent().SpanID(), gate.SpanContext().SpanID(), call.SpanKind())
	}
	attrs := map[string]string{}
	for _, kv := range call.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	if attrs["mcp.method.name"] != "tools/call" || attrs["gen_ai.tool.name"] != "where" || attrs["axocoatl.mcp.server"] != "tr" || attrs["network.transport"] != "" {
		t.Errorf("client span attributes %v", attrs)
	}
	for _, kv := range tool.Attributes() {
		if kv.Key == "mcp.method.name" {
			t.Errorf("execute_tool got the MCP attributes although a client span was made")
		}
	}
	if want := "00-" + call.SpanContext().TraceID().String() + "-" + call.SpanContext().SpanID().String() + "-01"; s.meta != want {
		t.Errorf("_meta traceparent %q, want the client span's %q", s.meta, want)
	}
}

// execute_tool takes the MCP attributes of its own call only: a host's Go
// tool that runs an MCP tool's Call itself (a composite tool, with its own
// ctx, not through Engine.CallTool) leaves its own span as it is, and the
// MCP call gets a client span of its own under it.
func TestToolSpanOfAnotherTool(t *testing.T) {
	srv, got := traceServer()
	e, rec, _ := tracedModule(t, Config{Servers: []ServerConfig{{Name: "tr", Dial: inMemory(srv)}}})
	if err := e.RegisterTool(axocoatl.Tool{Name: "composite", Call: func(ctx context.Context, _ axocoatl.ToolCall) (axocoatl.ToolResult, error) {
		inner, ok := e.Tool("mcp__tr__where")
		if !ok {
			return axocoatl.ToolResult{}, errors.New("no inner tool")
		}
		return inner.Call(ctx, axocoatl.ToolCall{Tool: "mcp__tr__where", Arguments: json.RawMessage(`{}`)})
	}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if res, err := e.CallTool(ctx, axocoatl.ToolCall{Tool: "composite", Arguments: json.RawMessage(`{}`)}); err != nil || res.Content != "here" {
		t.Fatalf("call: %+v %v", res, err)
	}
	s := <-got
	byName := spansByName(rec.Ended())
	outer, call := byName["execute_tool composite"], byName["tools/call where"]
	if outer == nil || call == nil {
		t.Fatalf("spans %v, want execute_tool composite and tools/call where", spanNames(rec.Ended()))
	}
	for _, kv := range outer.Attributes() {
		if kv.Key == "mcp.method.name" || kv.Key == "axocoatl.mcp.server" {
			t.Errorf("execute_tool composite got the inner MCP call's %s", kv.Key)
		}
	}
	if call.Parent().SpanID() != outer.SpanContext().SpanID() {
		t.Errorf("tools/call's parent %v, want execute_tool composite %v", call.Parent().SpanID(), outer.SpanContext().SpanID())
	}
	if want := "00-" + call.SpanContext().TraceID().String() + "-" + call.SpanContext().SpanID().String() + "-01"; s.meta != want {
		t.Errorf("_meta traceparent %q, want the client span's %q", s.meta, want)
	}
}

// The error.type of a call that failed in the MCP client is the client's
// word for it on the Engine's execute_tool span ("stopped": the module
// stopped mid-call), where the Engine alone would say "_OTHER".
func TestToolSpanErrorType(t *testing.T) {
	entered := make(chan struct{}, 1)
	srv := waitServer(entered)
	e, rec, m := tracedModule(t, Config{Servers: []ServerConfig{{Name: "tr", Dial: inMemory(srv)}}})
	errc := make(chan error, 1)
	go func() {
		_, err := e.CallTool(context.Background(), axocoatl.ToolCall{Tool: "mcp__tr__wait", Arguments: json.RawMessage(`{}`)})
		errc <- err
	}()
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, ErrStopped) {
		t.Fatalf("call ended with %v, want ErrStopped", err)
	}
	spans := rec.Ended()
	if len(spans) != 1 || spans[0].Name() != "execute_tool mcp__tr__wait" {
		t.Fatalf("spans %v, want execute_tool alone", spanNames(spans))
	}
	kind := attrOf(spans[0], "error.type")
	if kind != "stopped" || spans[0].Status().Code != codes.Error {
		t.Fatalf("error.type %q status %v, want stopped and Error", kind, spans[0].Status())
	}
}

// A call whose caller's deadline passed mid-call (the run's timeout, a
// CallTool ctx's) is error.type "timeout" on the span that traces it, as
// the Engine and the docs name a deadline, not "canceled": the MCP
// client's word for it must not turn a timeout into a cancel.
func TestToolSpanCallerDeadline(t *testing.T) {
	srv := waitServer(nil)
	e, rec, _ := tracedModule(t, Config{Servers: []ServerConfig{{Name: "tr", Dial: inMemory(srv)}}})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := e.CallTool(ctx, axocoatl.ToolCall{Tool: "mcp__tr__wait", Arguments: json.RawMessage(`{}`)}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("call ended with %v, want DeadlineExceeded", err)
	}
	spans := rec.Ended()
	if len(spans) != 1 || spans[0].Name() != "execute_tool mcp__tr__wait" {
		t.Fatalf("spans %v, want execute_tool alone", spanNames(spans))
	}
	kind := attrOf(spans[0], "error.type")
	if kind != "timeout" {
		t.Fatalf("error.type %q, want timeout", kind)
	}
}

// The MCP client's error.type names its own failure only: when the call
// ends with another error (an interceptor that panicked, or gave its own
// after the MCP call failed), execute_tool is labelled by that one
// ("tool_panicked"), not by the MCP call's earlier word for its failure.
func TestToolSpanErrorTypeNotStale(t *testing.T) {
	srv := waitServer(nil)
	e, rec, _ := tracedModule(t, Config{Servers: []ServerConfig{{Name: "tr", Dial: inMemory(srv)}}})
	e.Intercept(func(ctx context.Context, call axocoatl.ToolCall, next axocoatl.ToolFunc) (axocoatl.ToolResult, error) {
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		res, err := next(short, call)
		if err != nil {
			panic("the interceptor fails")
		}
		return res, err
	})
	if _, err := e.CallTool(context.Background(), axocoatl.ToolCall{Tool: "mcp__tr__wait", Arguments: json.RawMessage(`{}`)}); !errors.Is(err, axocoatl.ErrToolPanicked) {
		t.Fatalf("call ended with %v, want ErrToolPanicked", err)
	}
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("spans %v, want execute_tool alone", spanNames(spans))
	}
	kind := attrOf(spans[0], "error.type")
	if kind != "tool_panicked" {
		t.Fatalf("error.type %q, want tool_panicked", kind)
	}
}

// Outside a trace (tracing off, no caller's traceparent) the tracing of a
// call allocates nothing: no span, no _meta, no header clone.
//
// Guards: the bench/README.md figure "tracing off adds no allocation to
// the MCP tool call".
func TestTracingOffAllocatesNothing(t *testing.T) {
	srv, _ := traceServer()
	e, _, m := tracedModule(t, Config{Servers: []ServerConfig{{Name: "tr", Dial: inMemory(srv)}}})
	s := m.servers[0]
	cs := s.liveSession()
	ctx := context.Background()
	params := &mcp.CallToolParams{Name: "where"}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1/", nil)
	if err != nil {
		t.Fatal(err)
	}
	prop := e.Propagator()
	if n := testing.AllocsPerRun(100, func() {
		_, span := s.startSpan(ctx, cs, "mcp__tr__where", "where", "tools/call where", axocoatl.ToolCall{}, params)
		endSpan(span, nil, nil, "")
		if tracehttp.InjectHeaders(prop, req, false) != req {
			t.Fatal("a request outside a trace was cloned")
		}
	}); n != 0 {
		t.Fatalf("%v allocations per call outside a trace, want 0", n)
	}
	if params.Meta != nil {
		t.Fatalf("_meta set outside a trace: %v", params.Meta)
	}
}

// BenchmarkToolCallTracing compares, paired in one loop on one Engine
// (an always-sampling SDK provider batching to a local OTLP/HTTP
// receiver) and one in-memory server, a tool call outside any trace
// ("off") with one inside a caller's trace ("on": the client span, the
// _meta traceparent, and the server reading it). It reports on/off.
func BenchmarkToolCallTracing(b *testing.B) {
	recv := testutil.NewOTLPReceiver(b)
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(recv.URL+"/v1/traces"))
	if err != nil {
		b.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ts := newTestServer()
	e := axocoatl.New(axocoatl.Options{TracerProvider: tp})
	m, err := New(Config{Servers: []ServerConfig{{Name: "mem", Dial: ts.dial}}})
	if err != nil {
		b.Fatal(err)
	}
	if err := e.Use(context.Background(), m); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = e.Close(context.Background()) })
	if err := m.Ready(context.Background()); err != nil {
		b.Fatal(err)
	}
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: [16]byte{1}, SpanID: [8]byte{2}, TraceFlags: trace.FlagsSampled, Remote: true})
	on := trace.ContextWithRemoteSpanContext(context.Background(), parent)
	call := axocoatl.ToolCall{Tool: "mcp__mem__echo", Arguments: json.RawMessage(`{"message":"hi"}`)}
	do := func(ctx context.Context) func() {
		return func() {
			if res, err := e.CallTool(ctx, call); err != nil || res.Content != "Echo: hi" {
				b.Fatal(res, err)
			}
		}
	}
	b.ReportAllocs()
	testutil.Paired(b, do(on), do(context.Background()))
}

// An unsampled call (a provider that samples nothing, or a caller's
// trace not sampled) is traced by the Engine's execute_tool span too,
// which records nothing: no span of the call's own, and the server is
// sent that span's context, not sampled.
func TestUnsampledToolCall(t *testing.T) {
	srv, got := traceServer()
	e, _ := moduleWith(t, sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample())), Config{Servers: []ServerConfig{{Name: "tr", Dial: inMemory(srv)}}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if res, err := e.CallTool(ctx, axocoatl.ToolCall{Tool: "mcp__tr__where", Arguments: json.RawMessage(`{}`)}); err != nil || res.Content != "here" {
		t.Fatalf("call: %+v %v", res, err)
	}
	s := <-got
	if len(s.meta) != 55 || !strings.HasSuffix(s.meta, "-00") {
		t.Fatalf("_meta traceparent %q, want an unsampled one", s.meta)
	}
}
