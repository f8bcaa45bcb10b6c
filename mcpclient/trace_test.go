package mcpclient

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/internal/tracehttp"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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

// tracedModule is startModule with an Engine that records its spans.
func tracedModule(t *testing.T, cfg Config) (*axocoatl.Engine, *tracetest.SpanRecorder, *Module) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
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
	return e, rec, m
}

// A tools/call inside a trace carries the trace context of its client
// span in _meta (SEP-414), in both eras, and over HTTP in the headers too;
// the span is a client span, child of the caller's, named
// "tools/call <tool>" with the MCP conventions' attributes. A call
// outside any trace carries none.
func TestTraceContextOut(t *testing.T) {
	cases := []struct {
		name    string
		version string // the era the client ends up in
		http    bool
		server  func(*mcp.Server) ServerConfig
	}{
		{"memory", "2026-07-28", false, func(srv *mcp.Server) ServerConfig {
			return ServerConfig{Name: "tr", Dial: func(ctx context.Context) (mcp.Transport, error) {
				ct, st := mcp.NewInMemoryTransports()
				if _, err := srv.Connect(ctx, st, nil); err != nil {
					return nil, err
				}
				return ct, nil
			}}
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
			var span sdktrace.ReadOnlySpan
			for _, sp := range spans {
				if sp.Name() == "tools/call where" {
					span = sp
				}
			}
			if span == nil {
				t.Fatalf("no span tools/call where among %d", len(spans))
			}
			// The Engine's execute_tool span stands between the caller's and
			// the call's.
			var tool sdktrace.ReadOnlySpan
			for _, sp := range spans {
				if sp.SpanContext().SpanID() == span.Parent().SpanID() {
					tool = sp
				}
			}
			if tool == nil || tool.Name() != "execute_tool mcp__tr__where" || tool.Parent().SpanID() != parent.SpanID() {
				t.Fatalf("the call's span is not a child of execute_tool mcp__tr__where, child of the caller's: parent %v", tool)
			}
			if span.SpanKind() != trace.SpanKindClient || span.SpanContext().TraceID() != parent.TraceID() {
				t.Errorf("span kind %v parent %v trace %v", span.SpanKind(), span.Parent().SpanID(), span.SpanContext().TraceID())
			}
			attrs := map[string]string{}
			for _, kv := range span.Attributes() {
				attrs[string(kv.Key)] = kv.Value.String()
			}
			if attrs["mcp.method.name"] != "tools/call" || attrs["gen_ai.tool.name"] != "where" || attrs["mcp.protocol.version"] != c.version || attrs["axocoatl.mcp.server"] != "tr" {
				t.Errorf("attributes %v", attrs)
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
			if len(ended) != 2 {
				t.Fatalf("a call outside a trace made %d spans, want execute_tool and tools/call", len(ended))
			}
			var own sdktrace.ReadOnlySpan
			for _, sp := range ended {
				if sp.Name() == "tools/call where" {
					own = sp
				}
			}
			if own == nil || own.SpanContext().TraceID() == parent.TraceID() {
				t.Fatalf("a call outside a trace: spans %v", ended)
			}
			want = "00-" + own.SpanContext().TraceID().String() + "-" + own.SpanContext().SpanID().String() + "-01"
			if s.meta != want || s.state != "" || (c.http && s.header != want) {
				t.Errorf("a call outside a trace sent %+v, want its own trace's %q", s, want)
			}
		})
	}
}

// Outside a trace (tracing off, no caller's traceparent) the tracing of a
// call allocates nothing: no span, no _meta, no header clone.
//
// Guards: the bench/README.md figure "tracing off adds no allocation to
// the MCP tool call".
func TestTracingOffAllocatesNothing(t *testing.T) {
	srv, _ := traceServer()
	e, _, m := tracedModule(t, Config{Servers: []ServerConfig{{Name: "tr", Dial: func(ctx context.Context) (mcp.Transport, error) {
		ct, st := mcp.NewInMemoryTransports()
		if _, err := srv.Connect(ctx, st, nil); err != nil {
			return nil, err
		}
		return ct, nil
	}}}})
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
		_, span := s.startSpan(ctx, cs, "where", "tools/call where", axocoatl.ToolCall{}, params)
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
