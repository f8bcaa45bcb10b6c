package cluster

import (
	"context"
	"strings"
	"testing"

	natsgo "github.com/nats-io/nats.go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	axocoatl "github.com/axocoatl/axocoatl-go"
)

// Outside a trace a hop's tracing allocates nothing on either side: no
// span, no header (so the frame goes with PublishRequest, as before).
//
// Guards: the bench/README.md figure "tracing off adds no allocation to
// the cluster round trip", and bound "a caller's traceparent or
// tracestate value" (512 bytes, docs/bounds.md) on a task's NATS header.
func TestTracingOffAllocatesNothing(t *testing.T) {
	// Even with a recording provider: what decides is the caller's trace.
	e := axocoatl.New(axocoatl.Options{TracerProvider: sdktrace.NewTracerProvider()})
	defer e.Close(context.Background())
	m := &Module{eng: e, node: "n", subj: "s"}
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() {
		span, hdr := m.startCallSpan(ctx, "echo", "t1")
		if span != nil || hdr != nil {
			t.Fatal("a hop outside a trace was traced")
		}
		if _, span := m.startServeSpan(ctx, nil, "echo", "t1", "n"); span != nil {
			t.Fatal("a task without trace headers was traced")
		}
	}); n != 0 {
		t.Fatalf("%v allocations per hop outside a trace, want 0", n)
	}
	// Bounded: an oversize traceparent starts no trace.
	h := natsgo.Header{}
	h.Set(hdrTraceParent, "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-"+strings.Repeat("a", 600))
	if ctx, span := m.startServeSpan(ctx, h, "echo", "t1", "n"); span != nil || trace.SpanContextFromContext(ctx).IsValid() {
		t.Fatal("an oversize traceparent was read")
	}
}
