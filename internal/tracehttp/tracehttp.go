// Package tracehttp holds what every module's outbound HTTP tracing does
// the same way: a peer's server.address and server.port attributes, and
// the trace context of a request's span in its headers.
package tracehttp

import (
	"net/http"
	"net/url"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ServerAttrs appends to attrs the server.address and server.port of u
// (the scheme's port when it names none): the host and port only, never
// the URL, whose path, query or userinfo may hold a credential.
func ServerAttrs(attrs []attribute.KeyValue, u *url.URL) []attribute.KeyValue {
	if u.Hostname() == "" {
		return attrs
	}
	attrs = append(attrs, attribute.String("server.address", u.Hostname()))
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if p, err := strconv.Atoi(port); err == nil {
		attrs = append(attrs, attribute.Int("server.port", p))
	}
	return attrs
}

// InjectHeaders returns req with the trace context of its context's span
// in its headers (traceparent, tracestate), cloned first unless cloned
// says the caller already did; req itself when it has no span (nothing
// allocated) or prop is nil.
func InjectHeaders(prop propagation.TextMapPropagator, req *http.Request, cloned bool) *http.Request {
	if prop == nil || !trace.SpanContextFromContext(req.Context()).IsValid() {
		return req
	}
	if !cloned {
		req = req.Clone(req.Context())
	}
	prop.Inject(req.Context(), propagation.HeaderCarrier(req.Header))
	return req
}
