package mcpserver

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	axocoatl "github.com/axocoatl/axocoatl-go"
)

// With tracing off a tools/call's span site allocates nothing (no span,
// no attributes), and a caller's traceparent still becomes the run's
// remote parent: the trace goes on through us without our spans.
func TestTracingOffAllocatesNothing(t *testing.T) {
	e := axocoatl.New(axocoatl.Options{})
	defer e.Close(context.Background())
	if e.TracingOn() {
		t.Fatal("tracing is on")
	}
	s := &Server{engine: e}
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "agent_a"}}
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() {
		sctx, span := s.startSpan(ctx, req)
		endSpan(span, nil, nil)
		if span != nil || sctx != ctx {
			t.Fatal("a span with tracing off")
		}
	}); n != 0 {
		t.Fatalf("%v allocations per call with tracing off, want 0", n)
	}
	req.Params.Meta = mcp.Meta{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	sctx, span := s.startSpan(ctx, req)
	sc := trace.SpanContextFromContext(sctx)
	if span != nil || !sc.IsRemote() || sc.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" || sc.SpanID().String() != "b7ad6b7169203331" {
		t.Fatalf("the caller's trace context was not carried on: span %v, context %v", span, sc)
	}
}
