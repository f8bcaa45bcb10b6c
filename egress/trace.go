package egress

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/axocoatl/axocoatl-go/internal/tracehttp"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/axocoatl/axocoatl-go/lattice"
)

// Headers of a queued delivery's trace context (JetStream), the names
// W3C gives them.
const (
	hdrTraceParent = "traceparent"
	hdrTraceState  = "tracestate"
)

// tracing is what a module needs to trace its deliveries, from the Engine
// it started on; zero (a test send before Start): no spans.
type tracing struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

// traceCarrier is a delivery's trace context as a propagation carrier.
type traceCarrier struct{ d *delivery }

func (c traceCarrier) Get(key string) string {
	switch key {
	case hdrTraceParent:
		return c.d.traceParent
	case hdrTraceState:
		return c.d.traceState
	}
	return ""
}

func (c traceCarrier) Set(key, value string) {
	switch key {
	case hdrTraceParent:
		c.d.traceParent = value
	case hdrTraceState:
		c.d.traceState = value
	}
}

func (traceCarrier) Keys() []string { return []string{hdrTraceParent, hdrTraceState} }

// traceOf copies the trace context of ev (the run's that published it)
// into d, bounded like every one from outside.
func (d *delivery) traceOf(ev lattice.Event) {
	if ev.TraceParent == "" || len(ev.TraceParent) > lattice.MaxTraceHeaderBytes {
		return
	}
	d.traceParent = ev.TraceParent
	if len(ev.TraceState) <= lattice.MaxTraceHeaderBytes {
		d.traceState = ev.TraceState
	}
}

// parent is ctx with d's trace context as the remote parent of its
// attempts' spans.
func (t tracing) parent(ctx context.Context, d *delivery) context.Context {
	if t.prop == nil || d.traceParent == "" {
		return ctx
	}
	return t.prop.Extract(ctx, traceCarrier{d})
}

// startAttempt starts the client span of one delivery attempt, a child of
// the trace of the run that caused the event, and puts its traceparent in
// the request's headers. attempt counts from 1 (as MaxAttempts does).
func (h *hook) startAttempt(st *attemptState, r *http.Request) {
	t := h.m.tracing
	if t.tracer == nil {
		return
	}
	h.mu.Lock()
	attempt := len(st.d.attempts) - st.d.base + 1
	h.mu.Unlock()
	attrs := []attribute.KeyValue{
		attribute.String("http.request.method", http.MethodPost),
		attribute.String("axocoatl.webhook.name", h.cfg.Name),
		attribute.Int("axocoatl.webhook.attempt", attempt),
		attribute.String("axocoatl.webhook.delivery_id", st.d.id),
		attribute.String("axocoatl.event.type", st.d.eventType),
	}
	if attempt > 1 {
		attrs = append(attrs, attribute.Int("http.request.resend_count", attempt-1))
	}
	attrs = tracehttp.ServerAttrs(attrs, r.URL)
	ctx, span := t.tracer.Start(st.parent, "POST "+h.cfg.Name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	st.span = span
	t.prop.Inject(ctx, propagation.HeaderCarrier(r.Header))
}

// endAttempt ends the span of the attempt just made: its status code, or
// the kind of its failure (never the error's text: it may name the URL).
func (h *hook) endAttempt(st *attemptState, code int, err error, timeout bool) {
	span := st.span
	if span == nil {
		return
	}
	st.span = nil
	switch {
	case errors.Is(err, context.Canceled):
		span.SetAttributes(attribute.String("error.type", "canceled"))
		span.SetStatus(codes.Error, "canceled")
	case timeout:
		span.SetAttributes(attribute.String("error.type", "timeout"))
		span.SetStatus(codes.Error, "timeout")
	case err != nil:
		span.SetAttributes(attribute.String("error.type", "_OTHER"))
		span.SetStatus(codes.Error, "request failed")
	default:
		span.SetAttributes(attribute.Int("http.response.status_code", code))
		if code < 200 || code > 299 {
			span.SetAttributes(attribute.String("error.type", strconv.Itoa(code)))
			span.SetStatus(codes.Error, http.StatusText(code))
		}
	}
	span.End()
}
