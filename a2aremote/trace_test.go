package a2aremote_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/a2aremote"
)

// A call of a remote agent inside a trace is a client span,
// "invoke_agent <name>", child of the caller's, and every request of it
// carries the span's traceparent header: A2A 1.0 and 0.3 (JSON-RPC and
// HTTP+JSON). The Engine's execute_tool span stands between the two. A
// call outside any trace starts its own (execute_tool is its root), and
// sends that trace, never an earlier call's.
func TestTraceContextOut(t *testing.T) {
	for _, c := range []struct {
		name  string
		serve func(testing.TB, behaviour) *remotePeer
	}{{"1.0", serveV1}, {"0.3", serveV03}, {"0.3 rest", serveV03REST}} {
		t.Run(c.name, func(t *testing.T) {
			p := c.serve(t, answer)
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			e := axocoatl.New(axocoatl.Options{TracerProvider: tp})
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = e.Close(ctx)
			})
			m, err := a2aremote.New(a2aremote.Config{Agents: []a2aremote.AgentConfig{{Name: "remote", URL: p.URL}}})
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Use(context.Background(), m); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			if err := m.Ready(ctx); err != nil {
				t.Fatal(err)
			}
			parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: [16]byte{9, 9}, SpanID: [8]byte{7}, TraceFlags: trace.FlagsSampled, Remote: true})
			args := json.RawMessage(`{"input":"plan"}`)
			res, err := e.CallTool(trace.ContextWithRemoteSpanContext(ctx, parent), axocoatl.ToolCall{Tool: "a2a__remote", Arguments: args})
			if err != nil || res.IsError {
				t.Fatalf("call: %+v %v", res, err)
			}
			var span sdktrace.ReadOnlySpan
			for _, sp := range rec.Ended() {
				if sp.Name() == "invoke_agent remote" {
					span = sp
				}
			}
			if span == nil {
				t.Fatalf("no span invoke_agent remote among %d", len(rec.Ended()))
			}
			var tool sdktrace.ReadOnlySpan
			for _, sp := range rec.Ended() {
				if sp.SpanContext().SpanID() == span.Parent().SpanID() {
					tool = sp
				}
			}
			if tool == nil || tool.Name() != "execute_tool a2a__remote" || tool.Parent().SpanID() != parent.SpanID() {
				t.Fatalf("the call's span is not a child of execute_tool a2a__remote, child of the caller's: parent %v", tool)
			}
			if span.SpanKind() != trace.SpanKindClient || span.SpanContext().TraceID() != parent.TraceID() {
				t.Errorf("span kind %v parent %v trace %v", span.SpanKind(), span.Parent().SpanID(), span.SpanContext().TraceID())
			}
			want := "00-" + parent.TraceID().String() + "-" + span.SpanContext().SpanID().String() + "-01"
			if got, _ := p.tparent.Load().(string); got != want {
				t.Errorf("traceparent %q, want %q", got, want)
			}

			n := len(rec.Ended())
			if _, err := e.CallTool(ctx, axocoatl.ToolCall{Tool: "a2a__remote", Arguments: args}); err != nil {
				t.Fatal(err)
			}
			ended := rec.Ended()[n:]
			if len(ended) != 2 {
				t.Fatalf("a call outside a trace made %d spans, want execute_tool and invoke_agent", len(ended))
			}
			var own sdktrace.ReadOnlySpan
			for _, sp := range ended {
				if sp.Name() == "invoke_agent remote" {
					own = sp
				}
			}
			if own == nil || own.SpanContext().TraceID() == parent.TraceID() {
				t.Fatalf("a call outside a trace: spans %v", ended)
			}
			want = "00-" + own.SpanContext().TraceID().String() + "-" + own.SpanContext().SpanID().String() + "-01"
			if got, _ := p.tparent.Load().(string); got != want {
				t.Errorf("a call outside a trace sent traceparent %q, want its own trace's %q", got, want)
			}
		})
	}
}
