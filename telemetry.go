package axocoatl

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of every span the Engine and its
// modules make ([Engine.Tracer]).
const TracerName = "github.com/axocoatl/axocoatl-go"

// traceContext is W3C Trace Context (traceparent, tracestate): the one
// propagation format every door and every outbound call speaks. A fixed
// value rather than otel's global propagator, so a host's choice of
// propagator for its own traffic does not change what we send to peers.
//
// Extract ignores a value over [lattice.MaxTraceHeaderBytes].
var traceContext propagation.TextMapPropagator = boundedTraceContext{}

func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		// The global provider delegates to whatever the host sets later.
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(TracerName)
}

// Tracer returns the tracer of the Engine's spans, from
// [Options.TracerProvider]. Modules make their spans with it so one
// provider governs the whole process.
func (e *Engine) Tracer() trace.Tracer { return e.tracer }

// Propagator returns the propagation format of trace context in and out of
// the process: W3C Trace Context. Doors extract a caller's traceparent with
// it (HTTP headers: propagation.HeaderCarrier; MCP _meta:
// propagation.MapCarrier) and outbound calls inject the current span's.
func (e *Engine) Propagator() propagation.TextMapPropagator { return traceContext }
