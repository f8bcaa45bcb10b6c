package cluster

import (
	"context"

	natsgo "github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/axocoatl/axocoatl-go/lattice"
)

// The caller's trace context travels beside a task frame, in the NATS
// headers of its message, named as W3C names them: a daemon of an older
// version ignores headers it does not know, so the frame itself is
// unchanged and every version reads it; a task outside any trace has no
// header at all (the hot path writes and reads none).
const (
	hdrTraceParent = "traceparent"
	hdrTraceState  = "tracestate"
)

// natsCarrier is a NATS header as a propagation carrier (its keys are
// case-sensitive, unlike an HTTP header's). Get reads nothing over
// [lattice.MaxTraceHeaderBytes].
type natsCarrier natsgo.Header

func (c natsCarrier) Get(key string) string {
	v := natsgo.Header(c).Get(key)
	if len(v) > lattice.MaxTraceHeaderBytes {
		return ""
	}
	return v
}

func (c natsCarrier) Set(key, value string) { natsgo.Header(c).Set(key, value) }

func (c natsCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// startCallSpan starts the caller's span of a hop (a client span, child of
// ctx's) and returns the header that carries its trace context to the
// daemon that runs the task; nil, nil outside any trace (no allocation).
func (m *Module) startCallSpan(ctx context.Context, agentID, taskID string) (trace.Span, natsgo.Header) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil, nil
	}
	ctx, span := m.eng.Tracer().Start(ctx, "cluster.exec "+agentID, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("messaging.system", "nats"),
		attribute.String("messaging.operation.name", "send"),
		attribute.String("messaging.destination.name", m.subj+".exec."+agentID),
		attribute.String("gen_ai.agent.id", agentID),
		attribute.String("axocoatl.task.id", taskID),
		attribute.String("axocoatl.cluster.node", m.node),
	))
	h := natsgo.Header{}
	m.eng.Propagator().Inject(ctx, natsCarrier(h))
	return span, h
}

// startServeSpan continues the caller's trace on the daemon that runs the
// task: a server span, child of the trace context of the task's headers,
// whose child the run is. A task without one (tracing off on the caller)
// gets no span: the hop adds nothing.
func (m *Module) startServeSpan(ctx context.Context, h natsgo.Header, agentID, taskID, from string) (context.Context, trace.Span) {
	if h.Get(hdrTraceParent) == "" {
		return ctx, nil
	}
	ctx = m.eng.Propagator().Extract(ctx, natsCarrier(h))
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, nil
	}
	return m.eng.Tracer().Start(ctx, "cluster.exec "+agentID, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		attribute.String("messaging.system", "nats"),
		attribute.String("messaging.operation.name", "process"),
		attribute.String("gen_ai.agent.id", agentID),
		attribute.String("axocoatl.task.id", taskID),
		attribute.String("axocoatl.cluster.node", m.node),
		attribute.String("axocoatl.cluster.from", from),
	))
}

// endSpan ends a hop's span: kind is the error's kind ("": it succeeded).
func endSpan(span trace.Span, kind string) {
	if span == nil {
		return
	}
	if kind != "" {
		span.SetAttributes(attribute.String("error.type", kind))
		span.SetStatus(codes.Error, kind)
	}
	span.End()
}
