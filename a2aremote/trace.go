package a2aremote

import (
	"context"
	"net/url"

	"github.com/axocoatl/axocoatl-go/internal/tracehttp"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// startSpan starts the client span of one call of the remote agent
// ("invoke_agent <name>", the GenAI conventions' span of a remote agent),
// a child of ctx's span. Only a call inside a trace gets one (tracing off
// and no caller's traceparent: a context lookup, nothing allocated). Its
// trace context reaches the remote in the traceparent header of every
// request of the call (roundTripper).
func (r *remote) startSpan(ctx context.Context) (context.Context, trace.Span) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, nil
	}
	attrs := []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "invoke_agent"),
		attribute.String("gen_ai.agent.name", r.cfg.Name),
	}
	if u, err := url.Parse(r.cfg.URL); err == nil {
		attrs = tracehttp.ServerAttrs(attrs, u)
	}
	r.mu.Lock()
	gen := r.generation
	r.mu.Unlock()
	if gen != "" {
		attrs = append(attrs, attribute.String("axocoatl.a2a.protocol", gen))
	}
	return r.eng.Tracer().Start(ctx, "invoke_agent "+r.cfg.Name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endSpan ends a call's span; err's text stays out (a remote's words).
func endSpan(span trace.Span, err error, isError bool) {
	if span == nil {
		return
	}
	switch {
	case err != nil:
		span.SetAttributes(attribute.String("error.type", "_OTHER"))
		span.SetStatus(codes.Error, "a2a call failed")
	case isError:
		span.SetAttributes(attribute.String("error.type", "task_failed"))
		span.SetStatus(codes.Error, "remote task failed")
	}
	span.End()
}
