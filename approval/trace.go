package approval

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	axocoatl "github.com/axocoatl/axocoatl-go"
)

// Attribute keys of an approval wait's span ("approval {tool}", a child
// of the call's execute_tool span; its duration is the wait).
const (
	AttrApprovalID = attribute.Key("axocoatl.approval.id")
	// AttrStatus is how it ended: approved, denied, expired, withdrawn,
	// unanswerable.
	AttrStatus = attribute.Key("axocoatl.approval.status")
	// AttrDecision is the verdict: allow or deny.
	AttrDecision = attribute.Key("axocoatl.approval.decision")
	// AttrResolvedBy is who resolved it and how ([Resolution].ResolvedBy:
	// "http:<token name>", an answer's By, "timeout", ...).
	AttrResolvedBy = attribute.Key("axocoatl.approval.resolved_by")
)

// startWait starts the span of one approval wait; ctx's span (the tool
// call's) is its parent.
func (m *Module) startWait(ctx context.Context, p *PendingApproval) (context.Context, trace.Span) {
	e := m.eng.Load()
	if e == nil {
		return ctx, trace.SpanFromContext(context.Background())
	}
	ctx, span := e.Tracer().Start(ctx, "approval "+p.Tool, trace.WithSpanKind(trace.SpanKindInternal))
	if span.IsRecording() {
		span.SetAttributes(AttrApprovalID.String(p.ApprovalID), semconv.GenAIToolName(p.Tool),
			semconv.GenAIAgentID(p.AgentID), axocoatl.AttrTaskID.String(p.TaskID))
		if p.Server != "" {
			span.SetAttributes(axocoatl.AttrToolServer.String(p.Server))
		}
	}
	return ctx, span
}

// endWait ends the span with the resolution; a call not approved is not
// an error of the wait (a human said no), so the status stays unset.
func endWait(span trace.Span, r *Resolution) {
	if span.IsRecording() {
		span.SetAttributes(AttrStatus.String(r.Status), AttrDecision.String(r.Decision), AttrResolvedBy.String(r.ResolvedBy))
		if r.Status == StatusUnanswerable {
			span.SetStatus(codes.Error, "the approval could not be asked")
		}
	}
	span.End()
}
