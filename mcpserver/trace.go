package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	axocoatl "github.com/axocoatl/axocoatl-go"
)

// startSpan starts the server span of a tools/call and returns the
// context of the run it starts. Its parent is the caller's trace context:
// the request's _meta traceparent (SEP-414; both eras, both transports),
// else the span ctx already carries (the HTTP door's, a host's), else over
// HTTP the request's traceparent header. A value over
// [lattice.MaxTraceHeaderBytes] is ignored (the Engine's propagator).
// With tracing off there is no span (nil) and nothing is allocated unless
// the caller sent a trace context, which the run still carries on.
func (s *Server) startSpan(ctx context.Context, req *mcp.CallToolRequest) (context.Context, trace.Span) {
	prop := s.engine.Propagator()
	if m := req.Params.GetMeta(); axocoatl.MetaCarrier(m).Get("traceparent") != "" {
		ctx = prop.Extract(ctx, axocoatl.MetaCarrier(m))
	} else if !trace.SpanContextFromContext(ctx).IsValid() && req.Extra != nil && req.Extra.Header != nil && req.Extra.Header.Get("traceparent") != "" {
		// A span already on ctx (the HTTP door's, from the same header)
		// stays the parent.
		ctx = prop.Extract(ctx, propagation.HeaderCarrier(req.Extra.Header))
	}
	if !s.engine.TracingOn() {
		return ctx, nil
	}
	attrs := []attribute.KeyValue{
		attribute.String("mcp.method.name", "tools/call"),
		attribute.String("gen_ai.tool.name", req.Params.Name),
		attribute.String("gen_ai.operation.name", "execute_tool"),
	}
	if v := req.ProtocolVersion(); v != "" {
		attrs = append(attrs, attribute.String("mcp.protocol.version", v))
	}
	if req.Session != nil {
		if id := req.Session.ID(); id != "" {
			attrs = append(attrs, attribute.String("mcp.session.id", id))
		}
	}
	return s.engine.Tracer().Start(ctx, "tools/call "+req.Params.Name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
}

// endSpan ends a tools/call's span with its outcome: a failed run is an
// error (MCP semconv's error.type "tool_error"; the reason is in the
// result, never in the span).
func endSpan(span trace.Span, res *mcp.CallToolResult, err error) {
	if span == nil {
		return
	}
	switch {
	case err != nil:
		span.SetAttributes(attribute.String("error.type", "_OTHER"))
		span.SetStatus(codes.Error, "tools/call failed")
	case res != nil && res.IsError:
		span.SetAttributes(attribute.String("error.type", "tool_error"))
		span.SetStatus(codes.Error, "tool error")
	}
	span.End()
}
