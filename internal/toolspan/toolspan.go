// Package toolspan hands the Engine's execute_tool span of one tool call
// to the module that runs the call.
//
// OpenTelemetry's MCP conventions: an MCP instrumentation that can tell
// that a GenAI execute_tool span already traces the tool's execution
// SHOULD NOT create a separate span, and SHOULD add its MCP attributes to
// that span instead. The Engine starts execute_tool for every call it
// traces; with this package the MCP client knows, rather than guesses,
// that the span it would nest is that one (an interceptor that starts a
// span of its own in between makes it nest again).
package toolspan

import (
	"context"
	"errors"
	"sync/atomic"

	"go.opentelemetry.io/otel/trace"
)

// Span is the execute_tool span of one call, as the Engine started it.
type Span struct {
	trace.Span
	// Tool is the name of the tool called (as the Engine has it): the
	// span is that tool's only, not that of another tool whose code runs
	// under it.
	Tool string
	// failure is what the module that ran the call says of how it
	// failed: set and read on different goroutines when an interceptor
	// gives up on a call that is still running.
	failure atomic.Pointer[failure]
}

// failure is an error.type and the error it names.
type failure struct {
	kind string
	err  error
}

type key struct{}

// With returns ctx carrying s, the span ctx's call is traced by.
func With(ctx context.Context, s *Span) context.Context {
	return context.WithValue(ctx, key{}, s)
}

// From returns the execute_tool span of ctx's call of tool when it is
// ctx's current span (recording or not); nil outside a traced call, when
// another span was started since, or when the call is of another tool (a
// tool's code that runs another's Call itself, under its own span).
func From(ctx context.Context, tool string) *Span {
	s, _ := ctx.Value(key{}).(*Span)
	if s == nil || s.Tool != tool {
		return nil
	}
	// By span id, not by comparing the spans: a span may be a value of a
	// type == cannot compare (the SDK's unsampled spans hold a
	// TraceState, a slice), and comparing would panic.
	if trace.SpanFromContext(ctx).SpanContext().SpanID() != s.SpanContext().SpanID() {
		return nil
	}
	return s
}

// SetErrorType records kind, the error.type of the call's failure as the
// module that ran it knows it (an MCP session that closed mid-call), more
// precise than the Engine can tell from err, the error it returned.
func (s *Span) SetErrorType(kind string, err error) { s.failure.Store(&failure{kind, err}) }

// ErrorType is the kind SetErrorType recorded for err (the call's error,
// or one wrapping it); "" when nothing was recorded or it was for another
// error (an interceptor's own, a panic's, a retry's that failed
// elsewhere).
func (s *Span) ErrorType(err error) string {
	if p := s.failure.Load(); p != nil && errors.Is(err, p.err) {
		return p.kind
	}
	return ""
}
