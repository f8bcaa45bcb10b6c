package a2a

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/conversation"
	"github.com/axocoatl/axocoatl-go/internal/a2awire"
	"github.com/axocoatl/axocoatl-go/lattice"
)

// ReceiverKey is the message metadata key that names the agent a message is
// for. Without it the per-agent URL decides, else the agent of the
// message's contextId (a conversation), else the first agent.
const ReceiverKey = "receiver_id"

// sendRequest is a message/send (0.3) or SendMessage (1.0) reduced to what
// running it needs; exactly one of msg03 and msg10 is set.
type sendRequest struct {
	msg03    *a2a03.Message
	msg10    *a2a1.Message
	reqMeta  map[string]any // the request's metadata (receiver_id may be there)
	blocking bool
	history  int // < 0: all
	modes    []string
	push     bool // a push config was given: push03 or push10
	push03   *a2a03.PushConfig
	push10   *a2a1.PushConfig
	size     int64 // bytes of the request, for the store's bound
	// req is the HTTP request: who sent it (callerOf) and, for a stream
	// answering an input-required task, when its client left.
	req *http.Request
}

func sendFromV03(p *a2a03.MessageSendParams, size int64) *sendRequest {
	sr := &sendRequest{msg03: p.Message, reqMeta: p.Metadata, blocking: true, history: -1, size: size}
	if c := p.Config; c != nil {
		sr.blocking = c.Blocking == nil || *c.Blocking
		if c.HistoryLength != nil {
			sr.history = max(*c.HistoryLength, 0)
		}
		sr.modes = c.AcceptedOutputModes
		sr.push, sr.push03 = c.PushConfig != nil, c.PushConfig
	}
	return sr
}

// messageSend answers message/send: the task runs to its end in this
// goroutine unless the client asked for configuration.blocking false.
func (h *Handler) messageSend(r *http.Request, raw json.RawMessage, pathAgent string) (any, *rpcError) {
	var p a2a03.MessageSendParams
	if rerr := decodeParams(raw, &p); rerr != nil {
		return nil, rerr
	}
	sr := sendFromV03(&p, int64(len(raw)))
	sr.req = r
	t, rerr := h.send(r.Context(), sr, pathAgent)
	if rerr != nil {
		return nil, rerr
	}
	return t.snapshot(sr.history, true), nil
}

// send starts the task of sr; a blocking one has ended or is
// input-required when send returns, a non-blocking one runs on, detached
// and bounded. A message answering an input-required task returns it once
// it has ended or asks again.
func (h *Handler) send(ctx context.Context, sr *sendRequest, pathAgent string) (*task, *rpcError) {
	if err := h.join(); err != nil {
		return nil, rpcErr(a2awire.CodeInternalError, "%v", err)
	}
	defer h.runs.Done()
	if !sr.blocking {
		select {
		case h.background <- struct{}{}:
		default:
			return nil, rpcErr(a2awire.CodeServerError, "too many background tasks (%d); retry later or send blocking", cap(h.background))
		}
	}
	t, ctx, rerr := h.startTask(ctx, sr, pathAgent)
	if rerr != nil {
		if !sr.blocking {
			<-h.background
		}
		return nil, rerr
	}
	if ctx == nil { // an answer: the task's run goes on
		if !sr.blocking {
			<-h.background
			return t, nil
		}
		t.settled(reqContext(sr))
		return t, nil
	}
	if sr.blocking {
		// The run has its own goroutine: the answer goes back when the
		// task ends or waits for input, whichever comes first.
		rerr, _, _ := awaitRun(reqContext(sr), t, h.runDetached(ctx, t, nil))
		if rerr != nil {
			// Answered as the error: the task that never ran is not kept.
			h.store.remove(t)
			return nil, rerr
		}
		return t, nil
	}
	if err := h.join(); err != nil { // Close began: the run would be orphaned
		<-h.background
		t.cancelRun()
		t.finish(a2a03.TaskStateCanceled, "", "server shutting down")
		h.store.endTurn(t)
		return t, nil
	}
	go func() {
		defer h.runs.Done()
		defer func() { <-h.background }()
		_ = h.execute(ctx, t, nil) // a refused turn ends rejected, saying why
	}()
	return t, nil
}

// startTask validates a message, picks its agent and stores a new submitted
// task. ctx is the run's context, ended by tasks/cancel or Close.
func (h *Handler) startTask(ctx context.Context, sr *sendRequest, pathAgent string) (*task, context.Context, *rpcError) {
	var (
		taskID, contextID, msgID string
		msgMeta                  map[string]any
		nParts                   int
	)
	switch {
	case sr.msg03 != nil:
		m := sr.msg03
		taskID, contextID, msgID, msgMeta, nParts = string(m.TaskID), m.ContextID, m.ID, m.Metadata, len(m.Parts)
	case sr.msg10 != nil:
		m := sr.msg10
		taskID, contextID, msgID, msgMeta, nParts = string(m.TaskID), m.ContextID, m.ID, m.Metadata, len(m.Parts)
		if m.Role != a2a1.MessageRoleUser && m.Role != a2a1.MessageRoleAgent && m.Role != a2a1.MessageRoleUnspecified {
			return nil, nil, rpcErr(a2awire.CodeInvalidParams, "message.role %q is not an A2A 1.0 role: use ROLE_USER or ROLE_AGENT", cut(string(m.Role), 32))
		}
	default:
		return nil, nil, rpcErr(a2awire.CodeInvalidParams, "message is required")
	}
	if nParts == 0 {
		return nil, nil, rpcErr(a2awire.CodeInvalidParams, "message.parts must not be empty")
	}
	var push *pushConfig
	if sr.push {
		var rerr *rpcError
		if push, rerr = h.inlinePush(sr); rerr != nil {
			return nil, nil, rerr
		}
		push.owner = pushOwner(ctx)
	}
	if rerr := needScope(ctx, axocoatl.ScopeExecute, "send messages"); rerr != nil {
		return nil, nil, rerr
	}
	if !acceptsText(sr.modes) {
		return nil, nil, rpcErr(a2awire.CodeUnsupportedContentType, "agents answer text/plain; acceptedOutputModes %v excludes it", sr.modes)
	}
	if taskID != "" {
		// A nil ctx: the message answered the task's question.
		t, rerr := h.resume(ctx, sr, taskID, contextID, pathAgent)
		return t, nil, rerr
	}
	conv, rerr := h.conversationOf(contextID)
	if rerr != nil {
		return nil, nil, rerr
	}
	agentID, rerr := h.selectAgent(ctx, msgMeta, sr.reqMeta, pathAgent, conv)
	if rerr != nil {
		return nil, nil, rerr
	}
	var input string
	var err error
	if sr.msg03 != nil {
		input, err = renderParts(sr.msg03.Parts)
	} else {
		input, err = renderPartsV1(sr.msg10.Parts)
	}
	if err != nil {
		return nil, nil, rpcErr(a2awire.CodeInvalidParams, "%v", err)
	}
	if conv != nil {
		// The Engine checks this too, but by then the task exists: a
		// stream would show it failing rather than the client an error.
		user := conversation.Size(conversation.Message{Role: agent.RoleUser, Content: input})
		if err := conversation.CheckAppend(h.eng.Conversations().Limits(), *conv, 2, int64(user)); err != nil {
			return nil, nil, conversationError(err)
		}
	}

	now := time.Now()
	id := a2a03.TaskID(lattice.NewID(now))
	if contextID == "" {
		// Minted here, not by the Engine, because the task carries it from
		// its first event on, before the run (and the conversation) exist.
		contextID = lattice.NewID(now)
	}
	if msgID == "" {
		msgID = string(id) + "-input"
	}
	var stored storedMessage
	if sr.msg03 != nil {
		m := *sr.msg03
		m.TaskID, m.ContextID, m.ID = id, contextID, msgID
		if m.Role == a2a03.MessageRoleUnspecified {
			m.Role = a2a03.MessageRoleUser
		}
		stored.v03 = &m
	} else {
		m := *sr.msg10
		m.TaskID, m.ContextID, m.ID = a2a1.TaskID(id), contextID, msgID
		if m.Role == a2a1.MessageRoleUnspecified {
			m.Role = a2a1.MessageRoleUser
		}
		stored.v10 = &m
	}
	// The run outlives the request: it carries the caller's identity over,
	// so the Engine checks what it may run and the gates see who asked.
	ctx, cancel := context.WithCancel(axocoatl.WithIdentity(h.ctx, axocoatl.IdentityFrom(ctx)))
	t := newTask(id, contextID, agentID, stored, input, cancel)
	t.caller = callerOf(sr.req)
	if running := h.store.addTurn(t, sr.size+int64(len(input))); running != nil {
		cancel()
		return nil, nil, busyError(contextID, running)
	}
	if push != nil {
		push.taskID = id
		if rerr := h.register(t, push); rerr != nil {
			cancel()
			h.store.endTurn(t)
			h.store.remove(t)
			return nil, nil, rerr
		}
	}
	return t, ctx, nil
}

// selectAgent: message.metadata.receiver_id (or the request's), else the
// agent of the per-agent URL, else the agent of the conversation conv (the
// message's contextId, nil for a new one), else the first agent. An agent
// named explicitly must be conv's.
func (h *Handler) selectAgent(ctx context.Context, msgMeta, reqMeta map[string]any, pathAgent string, conv *conversation.Info) (string, *rpcError) {
	id, rerr := receiverOf(msgMeta)
	if rerr == nil && id == "" {
		id, rerr = receiverOf(reqMeta)
	}
	if rerr != nil {
		return "", rerr
	}
	if conv != nil && !axocoatl.IdentityFrom(ctx).SeesAgent(conv.AgentID) {
		return "", rpcErr(a2awire.CodeInvalidParams, "contextId %q is taken: omit it to start a conversation", conv.ID)
	}
	if id != "" {
		if _, err := h.eng.AgentFor(ctx, id); err != nil {
			return "", rpcErr(a2awire.CodeInvalidParams, "%s %q: no such agent", ReceiverKey, id)
		}
	} else {
		id = pathAgent
	}
	switch {
	case conv != nil && id != "" && id != conv.AgentID:
		return "", otherAgentError(conv.ID, id)
	case id != "":
		return id, nil
	case conv != nil:
		if _, err := h.eng.AgentFor(ctx, conv.AgentID); err != nil {
			return "", rpcErr(a2awire.CodeInvalidParams, "contextId %q: the agent of this conversation is no longer served here", conv.ID)
		}
		return conv.AgentID, nil
	}
	agents := h.eng.AgentsFor(ctx)
	if len(agents) == 0 {
		return "", rpcErr(a2awire.CodeInternalError, "no agents are registered")
	}
	return agents[0].ID, nil
}

func receiverOf(meta map[string]any) (string, *rpcError) {
	v, ok := meta[ReceiverKey]
	if !ok || v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", rpcErr(a2awire.CodeInvalidParams, "metadata.%s must be a string", ReceiverKey)
	}
	return s, nil
}

// acceptsText reports whether the client takes text output; an empty list
// accepts anything.
func acceptsText(modes []string) bool {
	if len(modes) == 0 {
		return true
	}
	for _, m := range modes {
		mt, _, err := mime.ParseMediaType(m)
		if err != nil {
			mt = strings.ToLower(strings.TrimSpace(m))
		}
		switch mt {
		case "text/plain", "text/*", "*/*", "*", "text":
			return true
		}
	}
	return false
}

// renderParts turns a message into the text a model reads: text as is, data
// as JSON, files as a line naming them (text files inline).
func renderParts(parts a2a03.ContentParts) (string, error) {
	var b strings.Builder
	for i, part := range parts {
		if i > 0 {
			b.WriteByte('\n')
		}
		switch p := part.(type) {
		case a2a03.TextPart:
			b.WriteString(p.Text)
		case a2a03.DataPart:
			d, err := json.Marshal(p.Data)
			if err != nil {
				return "", fmt.Errorf("parts[%d]: data: %w", i, err)
			}
			b.Write(d)
		case a2a03.FilePart:
			renderFile(&b, p.File)
		default:
			return "", fmt.Errorf("parts[%d]: unsupported part %T", i, part)
		}
	}
	return b.String(), nil
}

func renderFile(b *strings.Builder, f a2a03.FilePartContent) {
	switch f := f.(type) {
	case a2a03.FileURI:
		fmt.Fprintf(b, "[file %q (%s) at %s]", f.Name, orUnknown(f.MimeType), f.URI)
	case a2a03.FileBytes:
		data, err := base64.StdEncoding.DecodeString(f.Bytes)
		if err == nil && strings.HasPrefix(f.MimeType, "text/") {
			fmt.Fprintf(b, "[file %q (%s)]\n%s", f.Name, f.MimeType, data)
			return
		}
		fmt.Fprintf(b, "[file %q (%s), %d bytes, not shown]", f.Name, orUnknown(f.MimeType), len(data))
	default:
		b.WriteString("[file]")
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown type"
	}
	return s
}

// execute runs the task through the Engine, so it publishes the lattice
// events of every door, as a turn of the conversation its contextId names,
// and records how it ended. A task canceled (or a handler closed) mid-run
// ends as canceled. A turn the Engine refused before running it (the
// conversation busy through another door or daemon, full, another agent's)
// ends rejected, and execute returns the error a blocking send answers
// with instead of the task.
// onEvent, when set, is the run's [axocoatl.Request].OnEvent (a stream's).
func (h *Handler) execute(ctx context.Context, t *task, onEvent func(agent.RunEvent)) *rpcError {
	defer h.store.endTurn(t)
	defer t.cancelRun()
	t.setWorking()
	// A gate of the run (approval) asks the caller through the task
	// (input.go).
	ctx = axocoatl.WithUserPrompter(ctx, t)
	res, err := h.eng.ExecuteRequest(ctx, axocoatl.Request{
		AgentID:        t.agentID,
		Input:          t.input,
		Source:         axocoatl.SourceA2A,
		TaskID:         string(t.id),
		ConversationID: t.contextID,
		// A context this handler has not seen starts a conversation of
		// that id: the one minted for a message without contextId, or a
		// client's own (A2A 1.0 §3.4.1: agents MAY accept and preserve it).
		CreateConversation: true,
		OnEvent:            onEvent,
	})
	t.setUsage(res.Usage)
	switch {
	case err == nil:
		if t.finish(a2a03.TaskStateCompleted, res.Output, "") {
			h.store.grow(t, int64(len(res.Output)))
		}
	case res.ConversationID == "" && isConversationRefusal(err):
		// The turn never began: no conversation id came back.
		rerr := conversationError(err)
		t.finish(a2a03.TaskStateRejected, "", rerr.Detail)
		return rerr
	case h.ctx.Err() != nil || errors.Is(err, axocoatl.ErrClosed):
		t.finish(a2a03.TaskStateCanceled, "", "server shutting down")
	case ctx.Err() != nil && !errors.Is(err, context.DeadlineExceeded):
		t.finish(a2a03.TaskStateCanceled, "", "canceled")
	default:
		t.finish(a2a03.TaskStateFailed, "", err.Error())
	}
	return nil
}

// tasksGet answers tasks/get.
func (h *Handler) tasksGet(ctx context.Context, raw json.RawMessage, pathAgent string) (any, *rpcError) {
	var q a2a03.TaskQueryParams
	if rerr := decodeParams(raw, &q); rerr != nil {
		return nil, rerr
	}
	t, rerr := h.lookup(ctx, q.ID, pathAgent)
	if rerr != nil {
		return nil, rerr
	}
	history := -1
	if q.HistoryLength != nil {
		history = max(*q.HistoryLength, 0)
	}
	return t.snapshot(history, true), nil
}

// tasksList answers tasks/list, the ListTasks a2a-go v0.3 serves and its
// client sends (no method of the 0.3.0 specification): the stored tasks
// newest first, filtered (context_id: the turns of a conversation), paged
// as ListTasks is. history_length 0 (absent) keeps the history.
func (h *Handler) tasksList(ctx context.Context, raw json.RawMessage, pathAgent string) (any, *rpcError) {
	var q a2a03.ListTasksRequest
	if len(raw) > 0 && string(raw) != "null" {
		if rerr := decodeParams(raw, &q); rerr != nil {
			return nil, rerr
		}
	}
	if q.Status != a2a03.TaskStateUnspecified && a2awire.State1(q.Status) == a2a1.TaskStateUnspecified {
		return nil, rpcErr(a2awire.CodeInvalidParams, "status %q is not a task state", cut(string(q.Status), 64))
	}
	history := -1
	if q.HistoryLength > 0 {
		history = q.HistoryLength
	}
	tasks, total, size, next, rerr := h.listTasks(listQuery{who: axocoatl.IdentityFrom(ctx),
		pathAgent: pathAgent, contextID: q.ContextID, status: q.Status,
		pageSize: q.PageSize, pageToken: q.PageToken, after: q.LastUpdatedAfter,
	})
	if rerr != nil {
		return nil, rerr
	}
	resp := &a2a03.ListTasksResponse{Tasks: make([]*a2a03.Task, 0, len(tasks)), TotalSize: total, PageSize: size, NextPageToken: next}
	for _, t := range tasks {
		resp.Tasks = append(resp.Tasks, t.snapshot(history, q.IncludeArtifacts))
	}
	return resp, nil
}

// tasksCancel answers tasks/cancel: the task is canceled at once and its
// run's context ends; the run unwinds on its own.
func (h *Handler) tasksCancel(ctx context.Context, raw json.RawMessage, pathAgent string) (any, *rpcError) {
	if rerr := needScope(ctx, axocoatl.ScopeExecute, "cancel tasks"); rerr != nil {
		return nil, rerr
	}
	var p a2a03.TaskIDParams
	if rerr := decodeParams(raw, &p); rerr != nil {
		return nil, rerr
	}
	t, rerr := h.lookup(ctx, p.ID, pathAgent)
	if rerr != nil {
		return nil, rerr
	}
	if !t.finish(a2a03.TaskStateCanceled, "", "canceled by the client") {
		return nil, rpcErr(a2awire.CodeTaskNotCancelable, "task %s is already %s", t.id, t.view().state)
	}
	t.cancelRun()
	return t.snapshot(-1, true), nil
}

func (h *Handler) lookup(ctx context.Context, id a2a03.TaskID, pathAgent string) (*task, *rpcError) {
	if id == "" {
		return nil, rpcErr(a2awire.CodeInvalidParams, "id is required")
	}
	t := h.store.get(id)
	if t == nil || (pathAgent != "" && t.agentID != pathAgent) || !axocoatl.IdentityFrom(ctx).SeesAgent(t.agentID) {
		return nil, rpcErr(a2awire.CodeTaskNotFound, "task %q", id)
	}
	return t, nil
}

// reqContext is the context of sr's HTTP request (Background without one).
func reqContext(sr *sendRequest) context.Context {
	if sr.req == nil {
		return context.Background()
	}
	return sr.req.Context()
}

// needScope refuses a caller whose [axocoatl.Identity] lacks
// [axocoatl.Scope] s for what it asks ([axocoatl.Identity.Can]) (what: "send messages").
func needScope(ctx context.Context, s axocoatl.Scope, what string) *rpcError {
	if who := axocoatl.IdentityFrom(ctx); !who.Can(s) {
		return rpcErr(a2awire.CodeInvalidRequest, "%s may not %s: it needs scope %s", quote(who.Name), what, s)
	}
	return nil
}
