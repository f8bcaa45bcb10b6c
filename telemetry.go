package axocoatl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/internal/toolspan"
)

// TracerName is the instrumentation scope of every span the Engine and its
// modules make ([Engine.Tracer]).
const TracerName = "github.com/axocoatl/axocoatl-go"

// Attribute keys of the Engine's spans that no OpenTelemetry convention
// defines (the gen_ai.* and http.* keys are semconv's).
const (
	// AttrTaskID is the task's id ([Request.TaskID]) on an invoke_agent
	// and an execute_tool span.
	AttrTaskID = attribute.Key("axocoatl.task.id")
	// AttrSource is the door a run came through ([Request.Source]).
	AttrSource = attribute.Key("axocoatl.source")
	// AttrToolServer is the MCP server or remote agent behind a tool
	// ([Tool.Server]) on an execute_tool span.
	AttrToolServer = attribute.Key("axocoatl.tool.server")
)

// MaxSpanContentBytes bounds each content attribute (gen_ai.input.messages,
// gen_ai.output.messages, gen_ai.tool.call.arguments and
// gen_ai.tool.call.result) recorded when [Options.CaptureContent] is set:
// the oldest messages are left out first, a single text longer than the
// bound is cut.
const MaxSpanContentBytes = 16 << 10

// maxSpanNameBytes bounds a name a peer chose (a response's model, a
// finish reason) in a span.
const maxSpanNameBytes = 256

// traceContext is W3C Trace Context (traceparent, tracestate): the one
// propagation format every door and every outbound call speaks. A fixed
// value rather than otel's global propagator, so a host's choice of
// propagator for its own traffic does not change what we send to peers.
//
// Extract ignores a value over [lattice.MaxTraceHeaderBytes].
var traceContext propagation.TextMapPropagator = boundedTraceContext{}

// tracing holds the Engine's tracer and whether spans are made at all.
type tracing struct {
	tracer trace.Tracer
	// given: Options.TracerProvider was set; off: it was a no-op one.
	given, off bool
	capture    bool
	// internal starts a span of kind internal: one slice for every span,
	// not one per call.
	internal []trace.SpanStartOption
}

func newTracing(tp trace.TracerProvider, capture bool) tracing {
	t := tracing{given: tp != nil, capture: capture, internal: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)}}
	if tp == nil {
		// The global provider delegates to whatever the host sets later.
		tp = otel.GetTracerProvider()
	}
	if _, ok := tp.(noop.TracerProvider); ok {
		t.off = true
	}
	t.tracer = tp.Tracer(TracerName)
	return t
}

// globalPkg is the package of otel's global provider before a host sets
// one: it records nothing.
const globalPkg = "go.opentelemetry.io/otel/internal/global"

// on reports whether spans are worth starting: the Engine was given a
// provider that is not a no-op, or the host has set otel's global. With
// neither, a span would record nothing and still cost allocations (a
// context and a span per call), which the hot paths do not pay.
func (t *tracing) on() bool {
	if t.given {
		return !t.off
	}
	typ := reflect.TypeOf(otel.GetTracerProvider())
	if typ != nil && typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	return typ == nil || typ.PkgPath() != globalPkg
}

// TracingOn reports whether the Engine's spans record: its
// [Options.TracerProvider] is not a no-op, or, with none given, the host
// has set OpenTelemetry's global provider. A module asks it before
// building a span of its own, so that with tracing off its span site
// costs nothing; a caller's trace context is still propagated
// ([Engine.Propagator]).
func (e *Engine) TracingOn() bool { return e.tracing.on() }

// Tracer returns the tracer of the Engine's spans, from
// [Options.TracerProvider]. Modules make their spans with it so one
// provider governs the whole process.
func (e *Engine) Tracer() trace.Tracer { return e.tracing.tracer }

// Propagator returns the propagation format of trace context in and out of
// the process: W3C Trace Context. Doors extract a caller's traceparent with
// it (HTTP headers: propagation.HeaderCarrier; MCP _meta:
// propagation.MapCarrier) and outbound calls inject the current span's.
func (e *Engine) Propagator() propagation.TextMapPropagator { return traceContext }

// CaptureContent reports whether spans may carry prompts, answers and tool
// arguments and results ([Options.CaptureContent]); a module that records
// content in its spans asks it first.
func (e *Engine) CaptureContent() bool { return e.tracing.capture }

// startRun starts the invoke_agent span of a local run, a child of ctx's
// span. It returns ctx unchanged and a nil span when tracing is off.
func (e *Engine) startRun(ctx context.Context, spec *agent.Spec, req *Request) (context.Context, trace.Span) {
	if !e.tracing.on() {
		return ctx, nil
	}
	ctx, span := e.tracing.tracer.Start(ctx, "invoke_agent "+spec.Name, trace.WithSpanKind(trace.SpanKindInternal))
	if span.IsRecording() {
		span.SetAttributes(
			semconv.GenAIOperationNameInvokeAgent,
			semconv.GenAIAgentID(spec.ID),
			semconv.GenAIAgentName(spec.Name),
			AttrTaskID.String(req.TaskID),
			AttrSource.String(string(req.Source)),
		)
		if spec.Provider != "" {
			span.SetAttributes(semconv.GenAIProviderNameKey.String(spec.Provider))
		}
		if spec.Model != "" {
			span.SetAttributes(semconv.GenAIRequestModel(spec.Model))
		}
		if spec.Description != "" {
			span.SetAttributes(semconv.GenAIAgentDescription(spec.Description))
		}
	}
	return ctx, span
}

// endRun ends a run's span with its conversation, usage and outcome.
func endRun(span trace.Span, res *Result, err error) {
	if span == nil {
		return
	}
	if span.IsRecording() {
		if res.ConversationID != "" {
			span.SetAttributes(semconv.GenAIConversationID(res.ConversationID))
		}
		span.SetAttributes(
			semconv.GenAIUsageInputTokens(int(res.Usage.InputTokens)),
			semconv.GenAIUsageOutputTokens(int(res.Usage.OutputTokens)),
		)
		if res.Usage.CachedInputTokens > 0 {
			span.SetAttributes(semconv.GenAIUsageCacheReadInputTokens(int(res.Usage.CachedInputTokens)))
		}
		spanError(span, err)
	}
	span.End()
}

// spanError records err on span: status Error with the message, and
// error.type a low-cardinality class of it.
func spanError(span trace.Span, err error) {
	if err == nil {
		return
	}
	span.SetStatus(codes.Error, err.Error())
	span.SetAttributes(semconv.ErrorTypeKey.String(errorType(err)))
}

// errorType classes err for error.type: a sentinel's short name, or
// "_OTHER" (the convention's fallback).
func errorType(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, ErrClosed):
		return "closed"
	case errors.Is(err, ErrModelPanicked):
		return "model_panicked"
	case errors.Is(err, ErrToolPanicked):
		return "tool_panicked"
	case errors.Is(err, agent.ErrMaxIterations):
		return "max_iterations"
	case errors.Is(err, agent.ErrMaxTokensPerRun):
		return "max_tokens_per_run"
	case errors.Is(err, agent.ErrTooManyTools):
		return "too_many_tools"
	case errors.Is(err, agent.ErrTooManyToolCalls):
		return "too_many_tool_calls"
	}
	return "_OTHER"
}

// tracedModel makes a chat span of each model call of a run.
type tracedModel struct {
	agent.Model
	spec *agent.Spec
	t    *tracing
	// defaultModel is the provider's model for a request naming none.
	defaultModel string
}

// tracedStreamer is a tracedModel over a model that streams.
type tracedStreamer struct {
	tracedModel
	stream agent.Streamer
}

// defaultModeler is a provider's model that names its default model.
type defaultModeler interface{ DefaultModel() string }

// traced wraps m (the agent's model, behind the run's wrappers) in chat
// spans when tracing is on (m itself when off).
func (e *Engine) traced(m, agentModel agent.Model, spec *agent.Spec) agent.Model {
	if !e.tracing.on() {
		return m
	}
	tm := tracedModel{Model: m, spec: spec, t: &e.tracing}
	if d, ok := agentModel.(defaultModeler); ok {
		tm.defaultModel = d.DefaultModel()
	}
	if s, ok := m.(agent.Streamer); ok {
		return &tracedStreamer{tracedModel: tm, stream: s}
	}
	return &tm
}

// Generate implements [agent.Model].
func (m *tracedModel) Generate(ctx context.Context, req *agent.Request) (*agent.Response, error) {
	ctx, span := m.start(ctx, req)
	resp, err := m.Model.Generate(ctx, req)
	m.end(span, resp, err)
	return resp, err
}

// GenerateStream implements [agent.Streamer].
func (m *tracedStreamer) GenerateStream(ctx context.Context, req *agent.Request, emit func(agent.Delta)) (*agent.Response, error) {
	ctx, span := m.start(ctx, req)
	resp, err := m.stream.GenerateStream(ctx, req, emit)
	m.end(span, resp, err)
	return resp, err
}

// Offline passes the model's [agent.Offline] on.
func (m *tracedModel) Offline() bool { return agent.IsOffline(m.Model) }

// MaxToolDefinitions passes the model's [agent.ToolLimiter] on (0: none).
func (m *tracedModel) MaxToolDefinitions() int {
	if l, ok := m.Model.(agent.ToolLimiter); ok {
		return l.MaxToolDefinitions()
	}
	return 0
}

func (m *tracedModel) start(ctx context.Context, req *agent.Request) (context.Context, trace.Span) {
	model := req.Model
	if model == "" {
		model = m.defaultModel
	}
	name := "chat"
	if model != "" {
		name = "chat " + model
	}
	ctx, span := m.t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(semconv.GenAIOperationNameChat)
		if m.spec.Provider != "" {
			span.SetAttributes(semconv.GenAIProviderNameKey.String(m.spec.Provider))
		}
		if model != "" {
			span.SetAttributes(semconv.GenAIRequestModel(model))
		}
		if m.t.capture {
			span.SetAttributes(semconv.GenAIInputMessagesKey.String(inputMessages(req.Messages, MaxSpanContentBytes)))
			if req.System != "" {
				span.SetAttributes(semconv.GenAISystemInstructionsKey.String(textParts(req.System, MaxSpanContentBytes)))
			}
		}
	}
	return ctx, span
}

func (m *tracedModel) end(span trace.Span, resp *agent.Response, err error) {
	if span.IsRecording() {
		if resp != nil {
			if resp.Model != "" {
				span.SetAttributes(semconv.GenAIResponseModel(clipText(resp.Model, maxSpanNameBytes)))
			}
			span.SetAttributes(
				semconv.GenAIUsageInputTokens(int(resp.Usage.InputTokens)),
				semconv.GenAIUsageOutputTokens(int(resp.Usage.OutputTokens)),
				semconv.GenAIResponseFinishReasons(finishReason(resp)),
			)
			if resp.Usage.CachedInputTokens > 0 {
				span.SetAttributes(semconv.GenAIUsageCacheReadInputTokens(int(resp.Usage.CachedInputTokens)))
			}
			if m.t.capture {
				msg := agent.Message{Role: agent.RoleAssistant, Content: resp.Content, ToolCalls: resp.ToolCalls}
				span.SetAttributes(semconv.GenAIOutputMessagesKey.String(outputMessage(msg, finishReason(resp), MaxSpanContentBytes)))
			}
		}
		spanError(span, err)
	}
	span.End()
}

// finishReason is the provider's, or what the answer shows: tool_calls
// when it asks for tools, else stop.
func finishReason(r *agent.Response) string {
	switch {
	case r.FinishReason != "":
		return clipText(r.FinishReason, maxSpanNameBytes)
	case len(r.ToolCalls) > 0:
		return "tool_calls"
	}
	return "stop"
}

// startTool starts the execute_tool span of one call. Its attributes are
// set by endTool, in one SetAttributes: the SDK copies what it is given
// and grows its slice on every call, and the tool's server is known only
// once the tool was looked up. (A sampler sees the start options only,
// which never held them.) The span goes in the returned context as a
// toolspan too: the module that runs the call adds its protocol's
// attributes to it rather than nesting a client span of its own.
func (e *Engine) startTool(ctx context.Context, call *ToolCall) (context.Context, *toolspan.Span) {
	if !e.tracing.on() {
		return ctx, nil
	}
	ctx, span := e.tracing.tracer.Start(ctx, "execute_tool "+call.Tool, e.tracing.internal...)
	ts := &toolspan.Span{Span: span, Tool: call.Tool}
	return toolspan.With(ctx, ts), ts
}

// endTool ends a call's span with its attributes (callID: the model's id
// of the call, "" outside a run); a failed call (an error, or a result
// with IsError) has status Error.
func (e *Engine) endTool(span *toolspan.Span, call *ToolCall, callID string, res *ToolResult, err error) {
	if span == nil {
		return
	}
	if span.IsRecording() {
		// Sized to what is set: a slice of attributes over 512 bytes (8)
		// takes the allocator's slower path, and the SDK copies it anyway.
		n := 3 + count(callID != "", call.AgentID != "", call.TaskID != "", call.Server != "", err != nil || res.IsError)
		if e.tracing.capture {
			n += 2
		}
		kvs := make([]attribute.KeyValue, 0, n)
		kvs = append(kvs, semconv.GenAIOperationNameExecuteTool, semconv.GenAIToolName(call.Tool), semconv.GenAIToolTypeKey.String("function"))
		if callID != "" {
			kvs = append(kvs, semconv.GenAIToolCallID(callID))
		}
		if call.AgentID != "" {
			kvs = append(kvs, semconv.GenAIAgentID(call.AgentID))
		}
		if call.TaskID != "" {
			kvs = append(kvs, AttrTaskID.String(call.TaskID))
		}
		if call.Server != "" {
			// Known once the tool was looked up.
			kvs = append(kvs, AttrToolServer.String(call.Server))
		}
		switch {
		case err != nil:
			kind := span.ErrorType(err) // the module's own word for it, if it has one
			if kind == "" {
				kind = errorType(err)
			}
			kvs = append(kvs, semconv.ErrorTypeKey.String(kind))
			span.SetStatus(codes.Error, err.Error())
		case res.IsError:
			kvs = append(kvs, semconv.ErrorTypeKey.String("tool_error"))
			span.SetStatus(codes.Error, "the tool call failed")
		}
		if e.tracing.capture {
			if len(call.Arguments) > 0 {
				kvs = append(kvs, semconv.GenAIToolCallArgumentsKey.String(clipText(string(call.Arguments), MaxSpanContentBytes)))
			}
			if res.Content != "" {
				kvs = append(kvs, semconv.GenAIToolCallResultKey.String(clipText(res.Content, MaxSpanContentBytes)))
			}
		}
		span.SetAttributes(kvs...)
	}
	span.End()
}

// count is how many of bs hold.
func count(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// The shapes of gen_ai.input.messages and gen_ai.output.messages.
type (
	spanMessage struct {
		Role         string     `json:"role"`
		Parts        []spanPart `json:"parts"`
		FinishReason string     `json:"finish_reason,omitempty"`
	}
	spanPart struct {
		Type      string          `json:"type"`
		Content   string          `json:"content,omitempty"`
		ID        string          `json:"id,omitempty"`
		Name      string          `json:"name,omitempty"`
		Arguments json.RawMessage `json:"arguments,omitempty"`
		Response  string          `json:"response,omitempty"`
	}
)

func toSpanMessage(m agent.Message, limit int) spanMessage {
	sm := spanMessage{Role: string(m.Role)}
	switch {
	case m.Role == agent.RoleTool:
		sm.Parts = append(sm.Parts, spanPart{Type: "tool_call_response", ID: m.ToolCallID, Response: clipText(m.Content, limit)})
	case m.Content != "":
		sm.Parts = append(sm.Parts, spanPart{Type: "text", Content: clipText(m.Content, limit)})
	}
	for _, c := range m.ToolCalls {
		p := spanPart{Type: "tool_call", ID: c.ID, Name: c.Name}
		if len(c.Arguments) <= limit && json.Valid(c.Arguments) {
			p.Arguments = c.Arguments
		}
		sm.Parts = append(sm.Parts, p)
	}
	if sm.Parts == nil {
		sm.Parts = []spanPart{}
	}
	return sm
}

// inputMessages is msgs as gen_ai.input.messages JSON of at most limit
// bytes: the newest messages that fit (the newest one cut to fit).
func inputMessages(msgs []agent.Message, limit int) string {
	var kept [][]byte
	size := 2 // []
	for i := len(msgs) - 1; i >= 0; i-- {
		b := marshalContent(toSpanMessage(msgs[i], limit/2))
		if size+len(b)+1 > limit {
			if len(kept) == 0 {
				b = marshalContent(toSpanMessage(msgs[i], limit/4))
				if size+len(b) > limit {
					break
				}
			} else {
				break
			}
		}
		kept = append(kept, b)
		size += len(b) + 1
	}
	var sb strings.Builder
	sb.WriteByte('[')
	for i := len(kept) - 1; i >= 0; i-- {
		sb.Write(kept[i])
		if i > 0 {
			sb.WriteByte(',')
		}
	}
	sb.WriteByte(']')
	return sb.String()
}

func outputMessage(m agent.Message, finish string, limit int) string {
	sm := toSpanMessage(m, limit/2)
	sm.FinishReason = finish
	b := marshalContent([]spanMessage{sm})
	if len(b) > limit {
		sm = toSpanMessage(agent.Message{Role: m.Role, Content: m.Content}, limit/4)
		sm.FinishReason = finish
		b = marshalContent([]spanMessage{sm})
	}
	return string(b)
}

// textParts is gen_ai.system_instructions: one text part.
func textParts(s string, limit int) string {
	b := marshalContent([]spanPart{{Type: "text", Content: clipText(s, limit/2)}})
	return string(b)
}

// marshalContent is JSON without HTML escaping: text full of < and &
// would grow six times and no longer fit its bound.
func marshalContent(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// clipText cuts s to at most limit bytes on a rune boundary, saying so.
func clipText(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	const note = "…[cut]"
	n := max(limit-len(note), 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + note
}
