package mcpclient

import (
	"context"
	"net/url"

	"github.com/axocoatl/axocoatl-go/internal/toolspan"
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

// callSpan is how one tools/call is traced: the Engine's execute_tool
// span of the call, given its MCP attributes (shared), or a client span
// of its own (own); neither outside a trace.
type callSpan struct {
	shared *toolspan.Span
	own    trace.Span
}

// startSpan traces one tools/call and puts its trace context in the
// request's _meta (SEP-414: traceparent, tracestate when there is one;
// both eras). Only a call inside a trace is traced: with tracing off and
// no caller's traceparent, nothing is allocated (a context lookup). The
// HTTP transport puts the same context in the request's headers
// (headerTransport).
//
// A call the Engine traces (ctx's current span is its execute_tool of
// q, the tool's name in the Engine) adds the MCP attributes to that span,
// started by the Engine, and sends its context: OpenTelemetry's MCP conventions say a client instrumentation
// that can tell execute_tool already traces the call SHOULD NOT create a
// separate span. Otherwise (a caller's span, an interceptor's in between,
// the execute_tool of another tool whose code runs this one's Call) the
// call gets a client span "tools/call <bare>" (name, built once per
// tool), a child of ctx's.
func (s *server) startSpan(ctx context.Context, cs *mcp.ClientSession, q, bare, name string, call axocoatl.ToolCall, params *mcp.CallToolParams) (context.Context, callSpan) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, callSpan{}
	}
	var cspan callSpan
	if cspan.shared = toolspan.From(ctx, q); cspan.shared == nil || cspan.shared.IsRecording() {
		// The attributes at the start, where a sampler can read them (MCP
		// semantic conventions). On the Engine's span gen_ai.tool.name is
		// the Engine's (the name the model called), not the server's.
		attrs := s.mcpAttrs(cs, bare, call, cspan.shared == nil)
		if cspan.shared != nil {
			cspan.shared.SetAttributes(attrs...)
		} else {
			ctx, cspan.own = s.eng.Tracer().Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
		}
	}
	// Sized for the keys the go-sdk adds (protocol version, client info
	// and capabilities in the 2026-07-28 era).
	meta := make(mcp.Meta, 4)
	s.eng.Propagator().Inject(ctx, axocoatl.MetaCarrier(meta))
	params.Meta = meta
	return ctx, cspan
}

// mcpAttrs are the MCP conventions' attributes of a tools/call: the
// server's constant ones, the session's, the task's, and the tool's bare
// name when withTool.
func (s *server) mcpAttrs(cs *mcp.ClientSession, bare string, call axocoatl.ToolCall, withTool bool) []attribute.KeyValue {
	// Sized to what is set (the SDK copies it; over 512 bytes, 8
	// attributes, the allocator takes a slower path).
	id, v := cs.ID(), protocolVersion(cs)
	n := len(s.dial.spanAttrs)
	for _, set := range []bool{withTool, call.TaskID != "", id != "", v != ""} {
		if set {
			n++
		}
	}
	attrs := make([]attribute.KeyValue, 0, n)
	attrs = append(attrs, s.dial.spanAttrs...)
	if withTool {
		attrs = append(attrs, attrToolName.String(bare))
	}
	if call.TaskID != "" {
		attrs = append(attrs, attrTaskID.String(call.TaskID))
	}
	if id != "" {
		attrs = append(attrs, attrMCPSession.String(id))
	}
	if v != "" {
		attrs = append(attrs, attrMCPVersion.String(v))
	}
	return attrs
}

// endSpan ends a call's tracing with how it went (kind: an error.type,
// when err, the error the call returns, is not nil). The Engine's span is
// the Engine's to end: it is told the kind of err, and a tool's own
// failure it sees in the result.
func endSpan(span callSpan, res *mcp.CallToolResult, err error, kind string) {
	switch {
	case span.shared != nil:
		if err != nil {
			span.shared.SetErrorType(kind, err)
		} else if res != nil && res.IsError && span.shared.IsRecording() {
			span.shared.SetAttributes(attrToolIsError.Bool(true))
		}
		return
	case span.own == nil:
		return
	}
	switch {
	case err != nil:
		span.own.SetAttributes(attrErrorType.String(kind))
		span.own.SetStatus(codes.Error, "tools/call failed")
	case res != nil && res.IsError:
		// A tool's own failure: MCP semconv's error.type "tool_error".
		span.own.SetAttributes(attrToolIsError.Bool(true), attrErrorType.String("tool_error"))
		span.own.SetStatus(codes.Error, "tool error")
	}
	span.own.End()
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
