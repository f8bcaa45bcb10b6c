package axocoatl

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/axocoatl/axocoatl-go/lattice"
)

// An event published inside a trace carries its trace context, which
// EventContext gives back as the remote parent; outside a trace stamping
// allocates nothing.
func TestEventTraceContext(t *testing.T) {
	ts, _ := trace.ParseTraceState("a=1")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: [16]byte{1}, SpanID: [8]byte{2}, TraceFlags: trace.FlagsSampled, TraceState: ts})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	var ev lattice.Event
	stampTrace(ctx, &ev)
	if ev.TraceParent != "00-01000000000000000000000000000000-0200000000000000-01" || ev.TraceState != "a=1" {
		t.Fatalf("stamped %q %q", ev.TraceParent, ev.TraceState)
	}
	got := trace.SpanContextFromContext(EventContext(context.Background(), ev))
	if got.TraceID() != sc.TraceID() || got.SpanID() != sc.SpanID() || !got.IsRemote() || got.TraceState().String() != "a=1" {
		t.Fatalf("EventContext gave %v", got)
	}
	var plain lattice.Event
	bg := context.Background()
	// The event is the caller's local, as publishEvent's is: stamping
	// must not make it escape.
	if n := testing.AllocsPerRun(100, func() {
		ev := lattice.Event{Type: "x"}
		stampTrace(bg, &ev)
		plain = ev
	}); n != 0 || plain.TraceParent != "" {
		t.Fatalf("outside a trace: %v allocations, traceparent %q", n, plain.TraceParent)
	}
	if EventContext(bg, plain) != bg {
		t.Fatal("an event without trace changed the context")
	}
}

// The Engine's propagator reads no value over MaxTraceHeaderBytes: an
// oversize traceparent starts no trace, an oversize tracestate is dropped.
//
// Guards: bound "a caller's traceparent or tracestate value" (512 bytes,
// docs/bounds.md, every door).
func TestPropagatorBounded(t *testing.T) {
	tp := "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	var state []string
	for i := range 32 {
		state = append(state, "k"+strings.Repeat("x", 4)+string(rune('a'+i%26))+string(rune('a'+i/26))+"="+strings.Repeat("v", 12))
	}
	long := strings.Join(state, ",")
	if len(long) <= lattice.MaxTraceHeaderBytes {
		t.Fatalf("tracestate of %d bytes is not over the bound", len(long))
	}
	if _, err := trace.ParseTraceState(long); err != nil {
		t.Fatalf("the test's tracestate does not parse: %v", err)
	}
	prop := (&Engine{}).Propagator()
	sc := trace.SpanContextFromContext(prop.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp, "tracestate": long}))
	if !sc.IsValid() || sc.TraceState().Len() != 0 {
		t.Fatalf("oversize tracestate: %v %q", sc.IsValid(), sc.TraceState())
	}
	sc = trace.SpanContextFromContext(prop.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp + "-" + strings.Repeat("a", 600)}))
	if sc.IsValid() {
		t.Fatal("an oversize traceparent was read")
	}
	sc = trace.SpanContextFromContext(prop.Extract(context.Background(), MetaCarrier{"traceparent": tp, "tracestate": "a=1", "other": 3}))
	if !sc.IsValid() || sc.TraceState().String() != "a=1" {
		t.Fatalf("from _meta: %v", sc)
	}
}

// formatTrace writes what the propagator writes (flags, tracestate, no
// tracestate when empty), for every flags byte: events and the propagator
// must not disagree on a trace.
func TestFormatTraceIsTheTraceContextPropagator(t *testing.T) {
	ts, _ := trace.ParseTraceState("a=1,b=2")
	for _, state := range []trace.TraceState{{}, ts} {
		for f := range 256 {
			sc := trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: [16]byte{0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd, 0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, byte(f)},
				SpanID:  [8]byte{0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, byte(f)}, TraceFlags: trace.TraceFlags(f), TraceState: state,
			})
			ctx := trace.ContextWithSpanContext(context.Background(), sc)
			want := propagation.MapCarrier{}
			propagation.TraceContext{}.Inject(ctx, want)
			tp, tstate := formatTrace(ctx)
			if tp != want["traceparent"] || tstate != want["tracestate"] {
				t.Fatalf("flags %#x: formatTrace %q %q, the propagator %q %q", f, tp, tstate, want["traceparent"], want["tracestate"])
			}
		}
	}
	if tp, ts := formatTrace(context.Background()); tp != "" || ts != "" {
		t.Fatalf("outside a trace: %q %q", tp, ts)
	}
}
