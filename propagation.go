package axocoatl

import (
	"context"
	"encoding/hex"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/axocoatl/axocoatl-go/lattice"
)

// boundedTraceContext is W3C Trace Context whose Extract ignores a
// traceparent or tracestate value over [lattice.MaxTraceHeaderBytes]: a
// peer's value is parsed only within that bound (a tracestate of at most
// 32 members, W3C's own limit, is then what the propagator keeps).
type boundedTraceContext struct{ propagation.TraceContext }

func (b boundedTraceContext) Extract(ctx context.Context, carrier propagation.TextMapCarrier) context.Context {
	return b.TraceContext.Extract(ctx, boundedCarrier{carrier})
}

// boundedCarrier reads nothing over the bound: an oversize traceparent
// starts no trace, an oversize tracestate is dropped (the traceparent
// still holds, as W3C requires of a tracestate that does not parse).
type boundedCarrier struct{ propagation.TextMapCarrier }

func (c boundedCarrier) Get(key string) string {
	v := c.TextMapCarrier.Get(key)
	if len(v) > lattice.MaxTraceHeaderBytes {
		return ""
	}
	return v
}

// eventCarrier is the trace context an event carries
// ([lattice.Event].TraceParent, TraceState) as a propagation carrier.
type eventCarrier struct{ ev *lattice.Event }

func (c eventCarrier) Get(key string) string {
	switch key {
	case "traceparent":
		return c.ev.TraceParent
	case "tracestate":
		return c.ev.TraceState
	}
	return ""
}

func (c eventCarrier) Set(key, value string) {
	switch key {
	case "traceparent":
		c.ev.TraceParent = value
	case "tracestate":
		c.ev.TraceState = value
	}
}

func (eventCarrier) Keys() []string { return []string{"traceparent", "tracestate"} }

// stampTrace sets ev's trace context from ctx's span, when it has one
// (tracing off and no caller's traceparent: one context lookup, no
// allocation).
func stampTrace(ctx context.Context, ev *lattice.Event) {
	if ev.TraceParent != "" {
		return
	}
	ev.TraceParent, ev.TraceState = formatTrace(ctx)
}

// formatTrace is ctx's trace context as traceparent and tracestate ("" and
// "" outside a trace): what traceContext.Inject writes, formatted here
// because through a carrier (an interface) the value written to escapes,
// and an event stamped that way moved to the heap.
func formatTrace(ctx context.Context) (traceParent, traceState string) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", ""
	}
	return traceParentOf(sc), sc.TraceState().String()
}

// traceParentOf is sc as a W3C traceparent (version 00); the flags are
// the ones the specification defines (sampled, random), as
// propagation.TraceContext writes them.
func traceParentOf(sc trace.SpanContext) string {
	var b [55]byte // 00-<32 hex>-<16 hex>-<2 hex>
	tid, sid := sc.TraceID(), sc.SpanID()
	flags := [1]byte{byte(sc.TraceFlags() & (trace.FlagsSampled | trace.FlagsRandom))}
	b[0], b[1], b[2], b[35], b[52] = '0', '0', '-', '-', '-'
	hex.Encode(b[3:35], tid[:])
	hex.Encode(b[36:52], sid[:])
	hex.Encode(b[53:55], flags[:])
	return string(b[:])
}

// EventContext returns ctx carrying the trace context of ev (the one of
// the run or request that published it, [lattice.Event].TraceParent) as
// its remote parent, so that what an observer does about the event
// (a webhook delivery) is part of that trace; ctx unchanged when ev has
// none. The values are bounded as any peer's are
// ([lattice.MaxTraceHeaderBytes]).
func EventContext(ctx context.Context, ev lattice.Event) context.Context {
	if ev.TraceParent == "" {
		return ctx
	}
	return traceContext.Extract(ctx, eventCarrier{&ev})
}

// MetaCarrier is a propagation carrier over a JSON object of any values,
// such as an MCP request's _meta (where SEP-414 puts traceparent and
// tracestate): Get reads string values only, Set writes strings.
type MetaCarrier map[string]any

func (m MetaCarrier) Get(key string) string {
	s, _ := m[key].(string)
	return s
}

func (m MetaCarrier) Set(key, value string) { m[key] = value }

func (m MetaCarrier) Keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}
