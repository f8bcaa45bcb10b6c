package mcpclient

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/internal/otlpexport"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

// tracedBenchEngine is benchEngine's Engine with opts (a TracerProvider).
func tracedBenchEngine(b *testing.B, opts axocoatl.Options, ts *testServer) *axocoatl.Engine {
	opts.Logger = slog.New(slog.DiscardHandler)
	e := axocoatl.New(opts)
	m, err := New(Config{Servers: []ServerConfig{{Name: "mem", Dial: ts.dial}}})
	if err != nil {
		b.Fatal(err)
	}
	if err := e.Use(context.Background(), m); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = e.Close(ctx)
	})
	if err := m.Ready(context.Background()); err != nil {
		b.Fatal(err)
	}
	if err := e.AddAgent(agent.Spec{ID: "bench", Tools: []string{"mcp__mem__*"}}, provider.EchoModel{}); err != nil {
		b.Fatal(err)
	}
	e.Intercept(func(ctx context.Context, call axocoatl.ToolCall, next axocoatl.ToolFunc) (axocoatl.ToolResult, error) {
		return next(ctx, call)
	})
	return e
}

// BenchmarkTracingPaired pairs an in-memory MCP tool call through an
// Engine tracing every call (always sampled, a batch span processor
// exporting over OTLP/HTTP to a local collector) with the same call
// through an Engine with tracing off, in one loop: engine/direct is
// on ÷ off (#28's bound: ≤ 1.05×).
func BenchmarkTracingPaired(b *testing.B) {
	recv := testutil.NewOTLPReceiver(b)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithBatcher(otlpexport.New(otlpexport.Options{URL: recv.URL + "/v1/traces"})))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ts := newTestServer()
	on := tracedBenchEngine(b, axocoatl.Options{TracerProvider: tp}, ts)
	off := tracedBenchEngine(b, axocoatl.Options{}, ts)
	ctx := context.Background()
	call := axocoatl.ToolCall{AgentID: "bench", Tool: "mcp__mem__echo", Arguments: json.RawMessage(`{"message":"hi"}`)}
	via := func(e *axocoatl.Engine) func() {
		return func() {
			if res, err := e.CallTool(ctx, call); err != nil || res.Content != "Echo: hi" {
				b.Fatal(res, err)
			}
		}
	}
	testutil.Paired(b, via(on), via(off))
	if err := tp.ForceFlush(ctx); err != nil {
		b.Fatal(err)
	}
	if len(recv.Spans()) == 0 {
		b.Fatal("no span reached the collector")
	}
}

// BenchmarkSpanCost is BenchmarkEngineOverhead's call (a tool that
// returns at once) with tracing on and off: the spans' own cost per call.
func BenchmarkSpanCost(b *testing.B) {
	recv := testutil.NewOTLPReceiver(b)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithBatcher(otlpexport.New(otlpexport.Options{URL: recv.URL + "/v1/traces"})))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	// "on-noexport": the span alone, ended into a synchronous no-op
	// exporter (no batch, no encoding, no receiver).
	sync := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSyncer(tracetest.NewNoopExporter()))
	b.Cleanup(func() { _ = sync.Shutdown(context.Background()) })
	for name, opts := range map[string]axocoatl.Options{"on": {TracerProvider: tp}, "on-noexport": {TracerProvider: sync}, "off": {}} {
		b.Run(name, func(b *testing.B) {
			e := axocoatl.New(opts)
			defer e.Close(context.Background())
			if err := e.AddAgent(agent.Spec{ID: "bench"}, provider.EchoModel{}); err != nil {
				b.Fatal(err)
			}
			e.RegisterTool(axocoatl.Tool{Name: "mcp__x__echo", Server: "x", Call: func(context.Context, axocoatl.ToolCall) (axocoatl.ToolResult, error) {
				return axocoatl.ToolResult{Content: "ok"}, nil
			}})
			call := axocoatl.ToolCall{AgentID: "bench", Tool: "mcp__x__echo", Arguments: json.RawMessage(`{}`)}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.CallTool(context.Background(), call); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTracingOnOff is BenchmarkTracingPaired's two calls one after
// the other, and an unsampled one, for what each allocates per call
// (-benchmem; the traced call's figure includes its share of the export
// and of the receiver).
func BenchmarkTracingOnOff(b *testing.B) {
	recv := testutil.NewOTLPReceiver(b)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithBatcher(otlpexport.New(otlpexport.Options{URL: recv.URL + "/v1/traces"})))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ts := newTestServer()
	// "unsampled": spans started and never sampled (the trace context
	// still goes in _meta).
	never := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	b.Cleanup(func() { _ = never.Shutdown(context.Background()) })
	engines := map[string]*axocoatl.Engine{
		"on":        tracedBenchEngine(b, axocoatl.Options{TracerProvider: tp}, ts),
		"unsampled": tracedBenchEngine(b, axocoatl.Options{TracerProvider: never}, ts),
		"off":       tracedBenchEngine(b, axocoatl.Options{}, ts),
	}
	call := axocoatl.ToolCall{AgentID: "bench", Tool: "mcp__mem__echo", Arguments: json.RawMessage(`{"message":"hi"}`)}
	for _, name := range []string{"on", "unsampled", "off"} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if res, err := engines[name].CallTool(context.Background(), call); err != nil || res.Content != "Echo: hi" {
					b.Fatal(res, err)
				}
			}
		})
	}
}

// BenchmarkTracingParts is BenchmarkTracingPaired with less of tracing
// on, to tell where the traced call's time goes: "recorded" spans
// exported to a no-op exporter (no encoding, no receiver), "unsampled"
// spans (never sampled: the spans' starts and the trace context in
// _meta, nothing recorded), and "untraced", a second Engine with tracing
// off (the pairing's own noise).
func BenchmarkTracingParts(b *testing.B) {
	providers := map[string]*sdktrace.TracerProvider{
		"recorded":  sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(tracetest.NewNoopExporter())),
		"unsampled": sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample())),
	}
	ts := newTestServer()
	off := tracedBenchEngine(b, axocoatl.Options{}, ts)
	call := axocoatl.ToolCall{AgentID: "bench", Tool: "mcp__mem__echo", Arguments: json.RawMessage(`{"message":"hi"}`)}
	via := func(e *axocoatl.Engine) func() {
		return func() {
			if res, err := e.CallTool(context.Background(), call); err != nil || res.Content != "Echo: hi" {
				b.Fatal(res, err)
			}
		}
	}
	for _, name := range []string{"recorded", "unsampled", "untraced"} {
		opts := axocoatl.Options{}
		if tp := providers[name]; tp != nil {
			b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			opts.TracerProvider = tp
		}
		on := tracedBenchEngine(b, opts, ts)
		b.Run(name, func(b *testing.B) { testutil.Paired(b, via(on), via(off)) })
	}
}
