package a2a

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"strings"
	"time"

	a2a "github.com/a2aproject/a2a-go/a2a"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/lattice"
)

// ReceiverKey is the message metadata key that names the agent a message is
// for. Without it the per-agent URL decides, else the first agent.
const ReceiverKey = "receiver_id"

// messageSend answers message/send: the task runs to its end in this
// goroutine unless the client asked for configuration.blocking false.
func (h *Handler) messageSend(raw json.RawMessage, pathAgent string) (any, *rpcError) {
	var p a2a.MessageSendParams
	if rerr := decodeParams(raw, &p); rerr != nil {
		return nil, rerr
	}
	blocking := p.Config == nil || p.Config.Blocking == nil || *p.Config.Blocking
	if err := h.join(); err != nil {
		return nil, rpcErr(codeInternalError, "%v", err)
	}
	defer h.runs.Done()
	if !blocking {
		select {
		case h.background <- struct{}{}:
		default:
			return nil, rpcErr(codeServerError, "too many background tasks (%d); retry later or send blocking", cap(h.background))
		}
	}
	t, ctx, rerr := h.startTask(&p, pathAgent, int64(len(raw)))
	if rerr != nil {
		if !blocking {
			<-h.background
		}
		return nil, rerr
	}
	if blocking {
		h.execute(ctx, t)
		return t.snapshot(historyLength(p.Config), true), nil
	}
	if err := h.join(); err != nil { // Close began: the run would be orphaned
		<-h.background
		t.cancelRun()
		t.finish(a2a.TaskStateCanceled, "", "server shutting down")
		return t.snapshot(historyLength(p.Config), true), nil
	}
	go func() {
		defer h.runs.Done()
		defer func() { <-h.background }()
		h.execute(ctx, t)
	}()
	return t.snapshot(historyLength(p.Config), true), nil
}

func historyLength(c *a2a.MessageSendConfig) int {
	if c == nil || c.HistoryLength == nil {
		return -1
	}
	return max(*c.HistoryLength, 0)
}

// startTask validates a message, picks its agent and stores a new submitted
// task. ctx is the run's context, ended by tasks/cancel or Close.
func (h *Handler) startTask(p *a2a.MessageSendParams, pathAgent string, size int64) (*task, context.Context, *rpcError) {
	msg := p.Message
	if msg == nil {
		return nil, nil, rpcErr(codeInvalidParams, "message is required")
	}
	if len(msg.Parts) == 0 {
		return nil, nil, rpcErr(codeInvalidParams, "message.parts must not be empty")
	}
	if p.Config != nil {
		if p.Config.PushConfig != nil {
			return nil, nil, rpcErr(codePushNotSupported, "")
		}
		if !acceptsText(p.Config.AcceptedOutputModes) {
			return nil, nil, rpcErr(codeUnsupportedContentType, "agents answer text/plain; acceptedOutputModes %v excludes it", p.Config.AcceptedOutputModes)
		}
	}
	if msg.TaskID != "" {
		prev := h.store.get(msg.TaskID)
		if prev == nil || (pathAgent != "" && prev.agentID != pathAgent) {
			return nil, nil, rpcErr(codeTaskNotFound, "task %q", msg.TaskID)
		}
		if st := prev.view().state; st.Terminal() {
			return nil, nil, rpcErr(codeInvalidParams, "task %s is %s and takes no more messages; omit taskId to start a new task", msg.TaskID, st)
		}
		return nil, nil, rpcErr(codeUnsupportedOperation, "task %s is still working; its agent does not take further input", msg.TaskID)
	}
	agentID, rerr := h.selectAgent(msg, p.Metadata, pathAgent)
	if rerr != nil {
		return nil, nil, rerr
	}
	input, err := renderParts(msg.Parts)
	if err != nil {
		return nil, nil, rpcErr(codeInvalidParams, "%v", err)
	}

	now := time.Now()
	id := a2a.TaskID(lattice.NewID(now))
	contextID := msg.ContextID
	if contextID == "" {
		contextID = lattice.NewID(now)
	}
	stored := *msg
	stored.TaskID, stored.ContextID = id, contextID
	if stored.ID == "" {
		stored.ID = string(id) + "-input"
	}
	if stored.Role == a2a.MessageRoleUnspecified {
		stored.Role = a2a.MessageRoleUser
	}
	ctx, cancel := context.WithCancel(h.ctx)
	t := newTask(id, contextID, agentID, &stored, input, cancel)
	h.store.add(t, size+int64(len(input)))
	return t, ctx, nil
}

// selectAgent: message.metadata.receiver_id (or the request's), else the
// agent of the per-agent URL, else the first agent.
func (h *Handler) selectAgent(msg *a2a.Message, reqMeta map[string]any, pathAgent string) (string, *rpcError) {
	id, rerr := receiverOf(msg.Metadata)
	if rerr == nil && id == "" {
		id, rerr = receiverOf(reqMeta)
	}
	if rerr != nil {
		return "", rerr
	}
	if id != "" {
		if _, err := h.eng.Agent(id); err != nil {
			return "", rpcErr(codeInvalidParams, "%s %q: no such agent", ReceiverKey, id)
		}
		return id, nil
	}
	if pathAgent != "" {
		return pathAgent, nil
	}
	agents := h.eng.Agents()
	if len(agents) == 0 {
		return "", rpcErr(codeInternalError, "no agents are registered")
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
		return "", rpcErr(codeInvalidParams, "metadata.%s must be a string", ReceiverKey)
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
func renderParts(parts a2a.ContentParts) (string, error) {
	var b strings.Builder
	for i, part := range parts {
		if i > 0 {
			b.WriteByte('\n')
		}
		switch p := part.(type) {
		case a2a.TextPart:
			b.WriteString(p.Text)
		case a2a.DataPart:
			d, err := json.Marshal(p.Data)
			if err != nil {
				return "", fmt.Errorf("parts[%d]: data: %w", i, err)
			}
			b.Write(d)
		case a2a.FilePart:
			renderFile(&b, p.File)
		default:
			return "", fmt.Errorf("parts[%d]: unsupported part %T", i, part)
		}
	}
	return b.String(), nil
}

func renderFile(b *strings.Builder, f a2a.FilePartContent) {
	switch f := f.(type) {
	case a2a.FileURI:
		fmt.Fprintf(b, "[file %q (%s) at %s]", f.Name, orUnknown(f.MimeType), f.URI)
	case a2a.FileBytes:
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
// events of every door, and records how it ended. A task canceled (or a
// handler closed) mid-run ends as canceled.
func (h *Handler) execute(ctx context.Context, t *task) {
	defer t.cancelRun()
	t.setWorking()
	res, err := h.eng.ExecuteRequest(ctx, axocoatl.Request{
		AgentID: t.agentID,
		Input:   t.input,
		Source:  axocoatl.SourceA2A,
		TaskID:  string(t.id),
	})
	switch {
	case err == nil:
		if t.finish(a2a.TaskStateCompleted, res.Output, "") {
			h.store.grow(t, int64(len(res.Output)))
		}
	case h.ctx.Err() != nil || errors.Is(err, axocoatl.ErrClosed):
		t.finish(a2a.TaskStateCanceled, "", "server shutting down")
	case ctx.Err() != nil && !errors.Is(err, context.DeadlineExceeded):
		t.finish(a2a.TaskStateCanceled, "", "canceled")
	default:
		t.finish(a2a.TaskStateFailed, "", err.Error())
	}
}

// tasksGet answers tasks/get.
func (h *Handler) tasksGet(raw json.RawMessage, pathAgent string) (any, *rpcError) {
	var q a2a.TaskQueryParams
	if rerr := decodeParams(raw, &q); rerr != nil {
		return nil, rerr
	}
	t, rerr := h.lookup(q.ID, pathAgent)
	if rerr != nil {
		return nil, rerr
	}
	history := -1
	if q.HistoryLength != nil {
		history = max(*q.HistoryLength, 0)
	}
	return t.snapshot(history, true), nil
}

// tasksCancel answers tasks/cancel: the task is canceled at once and its
// run's context ends; the run unwinds on its own.
func (h *Handler) tasksCancel(raw json.RawMessage, pathAgent string) (any, *rpcError) {
	var p a2a.TaskIDParams
	if rerr := decodeParams(raw, &p); rerr != nil {
		return nil, rerr
	}
	t, rerr := h.lookup(p.ID, pathAgent)
	if rerr != nil {
		return nil, rerr
	}
	if !t.finish(a2a.TaskStateCanceled, "", "canceled by the client") {
		return nil, rpcErr(codeTaskNotCancelable, "task %s is already %s", t.id, t.view().state)
	}
	t.cancelRun()
	return t.snapshot(-1, true), nil
}

func (h *Handler) lookup(id a2a.TaskID, pathAgent string) (*task, *rpcError) {
	if id == "" {
		return nil, rpcErr(codeInvalidParams, "id is required")
	}
	t := h.store.get(id)
	if t == nil || (pathAgent != "" && t.agentID != pathAgent) {
		return nil, rpcErr(codeTaskNotFound, "task %q", id)
	}
	return t, nil
}
