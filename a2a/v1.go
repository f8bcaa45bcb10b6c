package a2a

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/internal/a2awire"
)

// A2A 1.0 on the JSON-RPC binding. Requests are decoded into a2a-go/v2's
// types, run by the same code and kept in the same store as 0.3 ones, and
// answered with a2a-go/v2's ProtoJSON shapes.

// ListTasks page sizes.
const (
	defaultListPageSize = 50
	maxListPageSize     = 100
)

// serveV1 answers one A2A 1.0 JSON-RPC request.
func (h *Handler) serveV1(w http.ResponseWriter, r *http.Request, req rpcRequest, pathAgent string) {
	ctx := r.Context()
	var result any
	var rerr *rpcError
	switch req.Method {
	case a2awire.Method1Send:
		result, rerr = h.sendMessageV1(r, req.Params, pathAgent)
	case a2awire.Method1Stream:
		var p a2a1.SendMessageRequest
		if rerr := decodeParams(req.Params, &p); rerr != nil {
			h.answer(w, req, nil, rerr)
			return
		}
		sr := sendFromV1(&p, int64(len(req.Params)))
		sr.req = r
		h.stream(r.Context(), sr, pathAgent, func(t *task, rerr *rpcError) *out {
			if rerr != nil {
				h.answer(w, req, nil, rerr)
				return nil
			}
			return &out{s: newSSE(w), g: gen10, id: req.ID}
		})
		return
	case a2awire.Method1GetTask:
		var q a2a1.GetTaskRequest
		if rerr = decodeParams(req.Params, &q); rerr == nil {
			result, rerr = h.getTaskV1(ctx, &q, pathAgent)
		}
	case a2awire.Method1ListTasks:
		var q a2a1.ListTasksRequest
		if len(req.Params) == 0 || string(req.Params) == "null" {
			result, rerr = h.listTasksV1(ctx, &q, pathAgent)
		} else if rerr = decodeParams(req.Params, &q); rerr == nil {
			result, rerr = h.listTasksV1(ctx, &q, pathAgent)
		}
	case a2awire.Method1CancelTask:
		var q a2a1.CancelTaskRequest
		if rerr = decodeParams(req.Params, &q); rerr == nil {
			result, rerr = h.cancelTaskV1(ctx, q.ID, pathAgent)
		}
	case a2awire.Method1Subscribe:
		var q a2a1.SubscribeToTaskRequest
		if rerr := decodeParams(req.Params, &q); rerr != nil {
			h.answer(w, req, nil, rerr)
			return
		}
		t, rerr := h.subscribable(ctx, q.ID, pathAgent)
		if rerr != nil {
			h.answer(w, req, nil, rerr)
			return
		}
		h.follow(r, t, &out{s: newSSE(w), g: gen10, id: req.ID})
		return
	case a2awire.Method1PushGet, a2awire.Method1PushCreate, a2awire.Method1PushList, a2awire.Method1PushDelete:
		result, rerr = h.servePush1(ctx, req.Method, req.Params, pathAgent)
	case a2awire.Method1ExtendedCard:
		rerr = rpcErr(a2awire.CodeExtendedCardNotConfig, "this agent has no extended card")
	default:
		if a2awire.IsMethod03(req.Method) {
			rerr = rpcErr(a2awire.CodeMethodNotFound, "%q is an A2A 0.3 method; in A2A 1.0 (the %s header says 1.0) use %s",
				req.Method, HeaderVersion, v1Name(req.Method))
			break
		}
		rerr = rpcErr(a2awire.CodeMethodNotFound, "unknown method %q", req.Method)
	}
	h.answer(w, req, result, rerr)
}

// subscribable looks up a task for SubscribeToTask, which a2a.proto allows
// only on a task not yet in a terminal state (UnsupportedOperationError
// otherwise; GetTask reads a finished one). 0.3's tasks/resubscribe still
// replays a finished task's end.
func (h *Handler) subscribable(ctx context.Context, id a2a1.TaskID, pathAgent string) (*task, *rpcError) {
	t, rerr := h.lookup(ctx, a2a03.TaskID(id), pathAgent)
	if rerr != nil {
		return nil, rerr
	}
	if st := t.view().state; st.Terminal() {
		return nil, rpcErr(a2awire.CodeUnsupportedOperation, "task %s is already %s: subscribing needs a task still running; read it with GetTask", t.id, a2awire.State1(st))
	}
	return t, nil
}

// v1Name is the 1.0 name of a 0.3 method, for error messages.
func v1Name(m string) string {
	switch m {
	case a2awire.Method03Send:
		return a2awire.Method1Send
	case a2awire.Method03Stream:
		return a2awire.Method1Stream
	case a2awire.Method03GetTask:
		return a2awire.Method1GetTask
	case a2awire.Method03ListTasks:
		return a2awire.Method1ListTasks
	case a2awire.Method03CancelTask:
		return a2awire.Method1CancelTask
	case a2awire.Method03Resubscribe:
		return a2awire.Method1Subscribe
	case a2awire.Method03ExtendedCard:
		return a2awire.Method1ExtendedCard
	}
	return "the *TaskPushNotificationConfig methods"
}

func sendFromV1(p *a2a1.SendMessageRequest, size int64) *sendRequest {
	sr := &sendRequest{msg10: p.Message, reqMeta: p.Metadata, blocking: true, history: -1, size: size}
	if c := p.Config; c != nil {
		sr.blocking = !c.ReturnImmediately
		if c.HistoryLength != nil {
			sr.history = max(*c.HistoryLength, 0)
		}
		sr.modes = c.AcceptedOutputModes
		sr.push, sr.push10 = c.PushConfig != nil, c.PushConfig
	}
	return sr
}

// sendMessageV1 answers SendMessage: a SendMessageResponse with the task.
func (h *Handler) sendMessageV1(r *http.Request, raw json.RawMessage, pathAgent string) (any, *rpcError) {
	var p a2a1.SendMessageRequest
	if rerr := decodeParams(raw, &p); rerr != nil {
		return nil, rerr
	}
	sr := sendFromV1(&p, int64(len(raw)))
	sr.req = r
	t, rerr := h.send(r.Context(), sr, pathAgent)
	if rerr != nil {
		return nil, rerr
	}
	return a2a1.StreamResponse{Event: t.snapshotV1(sr.history, true)}, nil
}

func (h *Handler) getTaskV1(ctx context.Context, q *a2a1.GetTaskRequest, pathAgent string) (*a2a1.Task, *rpcError) {
	t, rerr := h.lookup(ctx, a2a03.TaskID(q.ID), pathAgent)
	if rerr != nil {
		return nil, rerr
	}
	history := -1
	if q.HistoryLength != nil {
		history = max(*q.HistoryLength, 0)
	}
	return t.snapshotV1(history, true), nil
}

func (h *Handler) cancelTaskV1(ctx context.Context, id a2a1.TaskID, pathAgent string) (*a2a1.Task, *rpcError) {
	// The JSON-RPC endpoint asks for read only (REST's :cancel route asks
	// for execute itself).
	if rerr := needScope(ctx, axocoatl.ScopeExecute, "cancel tasks"); rerr != nil {
		return nil, rerr
	}
	t, rerr := h.lookup(ctx, a2a03.TaskID(id), pathAgent)
	if rerr != nil {
		return nil, rerr
	}
	if !t.finish(a2a03.TaskStateCanceled, "", "canceled by the client") {
		return nil, rpcErr(a2awire.CodeTaskNotCancelable, "task %s is already %s", t.id, a2awire.State1(t.view().state))
	}
	t.cancelRun()
	return t.snapshotV1(-1, true), nil
}

// listTasksV1 answers ListTasks: the stored tasks newest first, filtered,
// in pages of at most 100 (default 50). The page token is the opaque
// position after the last task of the previous page.
func (h *Handler) listTasksV1(ctx context.Context, q *a2a1.ListTasksRequest, pathAgent string) (*a2a1.ListTasksResponse, *rpcError) {
	if q.Status != a2a1.TaskStateUnspecified && a2awire.State03(q.Status) == a2a03.TaskStateUnspecified {
		return nil, rpcErr(a2awire.CodeInvalidParams, "status %q is not a task state", cut(string(q.Status), 64))
	}
	history := -1
	if q.HistoryLength != nil {
		history = max(*q.HistoryLength, 0)
	}
	tasks, total, size, next, rerr := h.listTasks(listQuery{who: axocoatl.IdentityFrom(ctx),
		pathAgent: pathAgent, contextID: q.ContextID, status: a2awire.State03(q.Status),
		pageSize: q.PageSize, pageToken: q.PageToken, after: q.StatusTimestampAfter,
	})
	if rerr != nil {
		return nil, rerr
	}
	resp := &a2a1.ListTasksResponse{Tasks: make([]*a2a1.Task, 0, len(tasks)), TotalSize: total, PageSize: size, NextPageToken: next}
	for _, t := range tasks {
		resp.Tasks = append(resp.Tasks, t.snapshotV1(history, q.IncludeArtifacts))
	}
	return resp, nil
}

// listQuery is a ListTasks (1.0) or tasks/list (0.3) filter.
type listQuery struct {
	pathAgent, contextID string
	who                  *axocoatl.Identity // the caller: only tasks of agents it sees
	status               a2a03.TaskState    // unspecified: any
	pageSize             int                // 0: the default
	pageToken            string
	after                *time.Time
}

// listTasks is one page of the stored tasks q selects, newest first, with
// the page size used and the token of the next page ("" on the last).
func (h *Handler) listTasks(q listQuery) (tasks []*task, total, size int, next string, rerr *rpcError) {
	size = q.pageSize
	switch {
	case size == 0:
		size = defaultListPageSize
	case size < 0 || size > maxListPageSize:
		return nil, 0, 0, "", rpcErr(a2awire.CodeInvalidParams, "pageSize %d is out of range 1..%d", size, maxListPageSize)
	}
	var before uint64
	if q.pageToken != "" {
		n, err := strconv.ParseUint(q.pageToken, 10, 64)
		if err != nil || n == 0 {
			return nil, 0, 0, "", rpcErr(a2awire.CodeInvalidParams, "pageToken %q is not one this server issued", cut(q.pageToken, 64))
		}
		before = n
	}
	keep := func(t *task) bool {
		if q.pathAgent != "" && t.agentID != q.pathAgent || !q.who.SeesAgent(t.agentID) {
			return false
		}
		if q.contextID != "" && t.contextID != q.contextID {
			return false
		}
		if q.status == a2a03.TaskStateUnspecified && q.after == nil {
			return true
		}
		v := t.view()
		if q.status != a2a03.TaskStateUnspecified && v.state != q.status {
			return false
		}
		return q.after == nil || v.updated.After(*q.after)
	}
	tasks, total, seq := h.store.page(before, size, keep)
	if seq != 0 {
		next = strconv.FormatUint(seq, 10)
	}
	return tasks, total, size, next, nil
}

// snapshotV1 is snapshot in the 1.0 shape.
func (t *task) snapshotV1(history int, artifacts bool) *a2a1.Task {
	v := t.view()
	out := &a2a1.Task{
		ID:        a2a1.TaskID(t.id),
		ContextID: t.contextID,
		Status:    t.statusV1(v),
		Metadata:  v.metadata(),
	}
	if history != 0 {
		out.History = []*a2a1.Message{t.msg.asV10()}
	}
	if artifacts && v.state == a2a03.TaskStateCompleted {
		out.Artifacts = []*a2a1.Artifact{{
			ID:    a2a1.ArtifactID(outputArtifactID),
			Name:  "output",
			Parts: a2a1.ContentParts{a2a1.NewTextPart(v.output)},
		}}
	}
	return out
}

func (t *task) statusV1(v view) a2a1.TaskStatus {
	ts := v.updated
	st := a2a1.TaskStatus{State: a2awire.State1(v.state), Timestamp: &ts}
	if v.prompt != nil {
		st.Message = t.promptMessageV1(v.prompt)
	}
	if v.errText != "" {
		st.Message = &a2a1.Message{
			ID:        string(t.id) + "-status",
			ContextID: t.contextID,
			TaskID:    a2a1.TaskID(t.id),
			Role:      a2a1.MessageRoleAgent,
			Parts:     a2a1.ContentParts{a2a1.NewTextPart(cut(v.errText, maxErrorText))},
		}
	}
	return st
}

func (t *task) statusEventV1() *a2a1.TaskStatusUpdateEvent {
	v := t.view()
	return &a2a1.TaskStatusUpdateEvent{
		TaskID:    a2a1.TaskID(t.id),
		ContextID: t.contextID,
		Status:    t.statusV1(v),
		Metadata:  v.metadata(),
	}
}

// renderPartsV1 is renderParts for 1.0 parts.
func renderPartsV1(parts a2a1.ContentParts) (string, error) {
	var b strings.Builder
	for i, p := range parts {
		if p == nil {
			return "", fmt.Errorf("parts[%d]: empty part", i)
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		switch c := p.Content.(type) {
		case a2a1.Text:
			b.WriteString(string(c))
		case a2a1.Data:
			d, err := json.Marshal(c.Value)
			if err != nil {
				return "", fmt.Errorf("parts[%d]: data: %w", i, err)
			}
			b.Write(d)
		case a2a1.URL:
			fmt.Fprintf(&b, "[file %q (%s) at %s]", p.Filename, orUnknown(p.MediaType), string(c))
		case a2a1.Raw:
			if strings.HasPrefix(p.MediaType, "text/") {
				fmt.Fprintf(&b, "[file %q (%s)]\n%s", p.Filename, p.MediaType, []byte(c))
				continue
			}
			fmt.Fprintf(&b, "[file %q (%s), %d bytes, not shown]", p.Filename, orUnknown(p.MediaType), len(c))
		default:
			return "", fmt.Errorf("parts[%d]: a part needs one of text, raw, data or url", i)
		}
	}
	return b.String(), nil
}
