package a2a

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	axocoatl "github.com/axocoatl/axocoatl-go"
)

// traced continues the caller's trace: a request whose context carries no
// span yet (the Engine's guard, [axocoatl.Engine.GuardHTTP], may have
// started one from the same header) gets the remote parent its
// traceparent header names, bounded by the Engine's propagator
// ([axocoatl.Engine.Propagator]). Every route of the [Handler] passes it.
func traced(e *axocoatl.Engine, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !trace.SpanContextFromContext(r.Context()).IsValid() && r.Header.Get("traceparent") != "" {
			r = r.WithContext(e.Propagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
		}
		next.ServeHTTP(w, r)
	})
}

// withSpanOf returns run carrying the span of req, if it has one: a run
// that outlives its request (its context descends from the Handler's,
// not the request's) stays in the caller's trace, as the lattice events
// of its [axocoatl.Engine.ExecuteRequest] do.
func withSpanOf(run, req context.Context) context.Context {
	span := trace.SpanFromContext(req)
	if !span.SpanContext().IsValid() {
		return run
	}
	return trace.ContextWithSpan(run, span)
}
