package axocoatl

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace/noop"

	"github.com/axocoatl/axocoatl-go/agent"
)

// With tracing off (no provider and no global one set, or a no-op
// provider) the span sites of a run and a tool call allocate nothing:
// Engine.Execute costs what it cost before spans.
func TestTracingOffAllocatesNothing(t *testing.T) {
	for name, opts := range map[string]Options{"zero": {}, "noop": {TracerProvider: noop.NewTracerProvider()}} {
		t.Run(name, func(t *testing.T) {
			e := New(opts)
			defer e.Close(context.Background())
			if e.tracing.on() {
				t.Fatal("tracing is on")
			}
			spec := &agent.Spec{ID: "a", Name: "a"}
			req := &Request{AgentID: "a", TaskID: "t"}
			call := &ToolCall{AgentID: "a", TaskID: "t", Tool: "x"}
			var m agent.Model = loopless{}
			ctx := context.Background()
			res := Result{}
			tres := ToolResult{}
			allocs := testing.AllocsPerRun(100, func() {
				rctx, span := e.startRun(ctx, spec, req)
				if e.traced(m, m, spec) != m {
					t.Fatal("the model is wrapped")
				}
				tctx, tspan := e.startTool(rctx, call)
				e.endTool(tspan, call, "id", &tres, nil)
				endRun(span, &res, nil)
				_ = tctx
			})
			if allocs != 0 {
				t.Fatalf("the span sites allocate %.0f times per run with tracing off", allocs)
			}
		})
	}
}

type loopless struct{}

func (loopless) Generate(context.Context, *agent.Request) (*agent.Response, error) {
	return &agent.Response{}, nil
}
