package a2aremote

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
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
	// The host and port only: the URL's path or query may hold a secret.
	if u, err := url.Parse(r.cfg.URL); err == nil && u.Hostname() != "" {
		attrs = append(attrs, attribute.String("server.address", u.Hostname()))
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		if p, err := strconv.Atoi(port); err == nil {
			attrs = append(attrs, attribute.Int("server.port", p))
		}
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

// injectHeaders returns req with the trace context of its context's span
// in its headers, cloned first unless cloned says the caller did; req
// itself when it has no span.
func injectHeaders(prop propagation.TextMapPropagator, req *http.Request, cloned bool) *http.Request {
	if prop == nil || !trace.SpanContextFromContext(req.Context()).IsValid() {
		return req
	}
	if !cloned {
		req = req.Clone(req.Context())
	}
	prop.Inject(req.Context(), propagation.HeaderCarrier(req.Header))
	return req
}
