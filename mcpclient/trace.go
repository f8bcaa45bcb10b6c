package mcpclient

import (
	"context"
	"net/url"

	"github.com/axocoatl/axocoatl-go/internal/tracehttp"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	axocoatl "github.com/axocoatl/axocoatl-go"
)

// Attribute keys of the client span of a tools/call (OpenTelemetry's MCP
// semantic conventions, and the Engine's name of the server).
const (
	attrMCPMethod   = attribute.Key("mcp.method.name")
	attrMCPSession  = attribute.Key("mcp.session.id")
	attrMCPVersion  = attribute.Key("mcp.protocol.version")
	attrToolName    = attribute.Key("gen_ai.tool.name")
	attrTransport   = attribute.Key("network.transport")
	attrServerAddr  = attribute.Key("server.address")
	attrServerPort  = attribute.Key("server.port")
	attrErrorType   = attribute.Key("error.type")
	attrServerName  = attribute.Key("axocoatl.mcp.server")
	attrTaskID      = attribute.Key("axocoatl.task.id")
	attrToolIsError = attribute.Key("axocoatl.mcp.tool.is_error")
)

// startSpan starts the client span of one tools/call (name: "tools/call
// <bare>", built once per tool), a child of ctx's span, and puts its
// trace context in the request's _meta (SEP-414: traceparent, tracestate
// when there is one; both eras). Only a call inside a trace gets a span:
// with tracing off and no caller's traceparent, nothing is allocated (a
// context lookup). The HTTP transport puts the same context in the
// request's headers (headerTransport).
func (s *server) startSpan(ctx context.Context, cs *mcp.ClientSession, bare, name string, call axocoatl.ToolCall, params *mcp.CallToolParams) (context.Context, trace.Span) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, nil
	}
	// Sized to what is set (the SDK copies it; over 512 bytes, 8
	// attributes, the allocator takes a slower path).
	id, v := cs.ID(), protocolVersion(cs)
	n := len(s.dial.spanAttrs) + 1
	for _, set := range []bool{call.TaskID != "", id != "", v != ""} {
		if set {
			n++
		}
	}
	attrs := make([]attribute.KeyValue, 0, n)
	attrs = append(attrs, s.dial.spanAttrs...)
	attrs = append(attrs, attrToolName.String(bare))
	if call.TaskID != "" {
		attrs = append(attrs, attrTaskID.String(call.TaskID))
	}
	if id != "" {
		attrs = append(attrs, attrMCPSession.String(id))
	}
	if v != "" {
		attrs = append(attrs, attrMCPVersion.String(v))
	}
	// The attributes at the start, where a sampler can read them (MCP
	// semantic conventions).
	ctx, span := s.eng.Tracer().Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	// Sized for the keys the go-sdk adds (protocol version, client info
	// and capabilities in the 2026-07-28 era).
	meta := make(mcp.Meta, 4)
	s.eng.Propagator().Inject(ctx, axocoatl.MetaCarrier(meta))
	params.Meta = meta
	return ctx, span
}

// endSpan ends a call's span with how it went (kind: an error.type, when
// err is not nil).
func endSpan(span trace.Span, res *mcp.CallToolResult, err error, kind string) {
	if span == nil {
		return
	}
	switch {
	case err != nil:
		span.SetAttributes(attrErrorType.String(kind))
		span.SetStatus(codes.Error, "tools/call failed")
	case res != nil && res.IsError:
		// A tool's own failure: MCP semconv's error.type "tool_error".
		span.SetAttributes(attrToolIsError.Bool(true), attrErrorType.String("tool_error"))
		span.SetStatus(codes.Error, "tool error")
	}
	span.End()
}

// spanAttrs are the constant attributes of a server's call spans: the
// method, the server's name, and its network attributes.
func spanAttrs(cfg ServerConfig) []attribute.KeyValue {
	return append([]attribute.KeyValue{attrMCPMethod.String("tools/call"), attrServerName.String(cfg.Name)}, netAttrs(cfg)...)
}

// netAttrs are a server's network attributes: its transport, and for
// HTTP its host and port (never the URL: its query or userinfo may hold
// a credential).
func netAttrs(cfg ServerConfig) []attribute.KeyValue {
	switch {
	case cfg.Dial != nil:
		return nil
	case cfg.URL != "":
		u, err := url.Parse(cfg.URL)
		if err != nil {
			return []attribute.KeyValue{attrTransport.String("tcp")}
		}
		return tracehttp.ServerAttrs([]attribute.KeyValue{attrTransport.String("tcp")}, u)
	}
	return []attribute.KeyValue{attrTransport.String("pipe")}
}
