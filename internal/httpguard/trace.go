package httpguard

import (
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/axocoatl/axocoatl-go/internal/mount"
)

// Tracing makes a server span of each guarded request.
type Tracing struct {
	Tracer     trace.Tracer
	Propagator propagation.TextMapPropagator
	// On reports whether spans are made now (the root package's check
	// that a provider records); nil: never.
	On func() bool
}

// serveTraced serves r inside a server span continuing the caller's
// traceparent. The span is named "METHOD route" (HTTP conventions: the
// route pattern, never the path, so ids do not make names); it records
// the method, the route, the status and, for a 5xx, an error. No header,
// query or body is recorded.
func (g *Guard) serveTraced(w http.ResponseWriter, r *http.Request, serve func(http.ResponseWriter, *http.Request)) {
	t := g.tracing
	ctx := t.Propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	method := knownMethod(r.Method)
	ctx, span := t.Tracer.Start(ctx, spanMethod(method), trace.WithSpanKind(trace.SpanKindServer))
	defer span.End()
	r = r.WithContext(ctx)
	sw := &statusWriter{ResponseWriter: w}
	serve(sw, r)
	if !span.IsRecording() {
		return
	}
	status := sw.status
	if status == 0 {
		status = http.StatusOK
	}
	span.SetAttributes(semconv.HTTPRequestMethodKey.String(method), semconv.HTTPResponseStatusCode(status))
	if sw.req != nil {
		r = sw.req // the request the handler's mux matched
	}
	if route := routeOf(r); route != "" {
		span.SetName(spanMethod(method) + " " + route)
		span.SetAttributes(semconv.HTTPRoute(route))
	}
	if status >= 500 {
		span.SetStatus(codes.Error, "")
		span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(status)))
	}
}

// knownMethod is r.Method when HTTP defines it, else "_OTHER" (the
// conventions' value: a client choosing methods must not choose names).
func knownMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	}
	return "_OTHER"
}

func spanMethod(m string) string {
	if m == "_OTHER" {
		return "HTTP"
	}
	return m
}

// routeOf is the route r was matched by, the mount prefix in front: the
// path of its ServeMux pattern ("POST /tasks/{id}" → "/a2a/tasks/{id}").
func routeOf(r *http.Request) string {
	p := r.Pattern
	if p == "" {
		return ""
	}
	if i := strings.IndexByte(p, ' '); i >= 0 {
		p = p[i+1:]
	}
	if i := strings.IndexByte(p, '/'); i > 0 {
		p = p[i:] // a host in the pattern is not part of the route
	}
	return mount.Prefix(r) + p
}

// statusWriter keeps the status of the answer; Unwrap hands the
// connection's controls on (http.ResponseController).
type statusWriter struct {
	http.ResponseWriter
	status int
	// req is the request a mux under the guard matched: it sets Pattern
	// on the request it was handed, which the guard reads afterwards.
	req *http.Request
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Flush implements http.Flusher (streamed answers: SSE).
func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
