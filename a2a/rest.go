package a2a

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/axocoatl/axocoatl-go/internal/a2awire"
)

// The A2A 1.0 HTTP+JSON (REST) binding, on the same base URLs as JSON-RPC
// (/a2a and /a2a/agents/{id}), with the paths of a2a.proto:
//
//	POST {base}/message:send             SendMessage
//	POST {base}/message:stream           SendStreamingMessage (SSE)
//	GET  {base}/tasks                    ListTasks
//	GET  {base}/tasks/{id}               GetTask
//	POST {base}/tasks/{id}:cancel        CancelTask
//	GET|POST {base}/tasks/{id}:subscribe SubscribeToTask (SSE)
//
// The binding exists only in A2A 1.0, so a request without A2A-Version is
// answered as 1.0; any other version than 1.0 gets VERSION_NOT_SUPPORTED.
// Errors are {"error":{"code","status","message","details":[ErrorInfo]}}
// with the HTTP status of the a2a.proto mapping; clients type them by the
// ErrorInfo reason.

// restDoors are the REST binding's routes under base ("/a2a", or the
// per-agent pattern with {id}); route makes each a door.
func (h *Handler) restDoors(base string, route func(method, pattern string, fn func(http.ResponseWriter, *http.Request, string)) door) []door {
	get, post, del := http.MethodGet, http.MethodPost, http.MethodDelete
	push := h.restPush
	return []door{
		route(post, base+"/message:send", h.restSend),
		route(post, base+"/message:stream", h.restStream),
		route(get, base+"/tasks", h.restList),
		route(get, base+"/tasks/{task}", h.restTask),
		route(post, base+"/tasks/{task}", h.restTask),
		route(get, base+"/tasks/{task}/pushNotificationConfigs", push),
		route(post, base+"/tasks/{task}/pushNotificationConfigs", push),
		route(get, base+"/tasks/{task}/pushNotificationConfigs/{config}", push),
		route(del, base+"/tasks/{task}/pushNotificationConfigs/{config}", push),
		route(get, base+"/extendedAgentCard", func(w http.ResponseWriter, r *http.Request, _ string) {
			writeRESTError(w, rpcErr(a2awire.CodeExtendedCardNotConfig, "this agent has no extended card"))
		}),
	}
}

// restVersion accepts no header or 1.0.
func restVersion(r *http.Request) *rpcError {
	hv := r.Header.Get(HeaderVersion)
	if strings.TrimSpace(hv) == "" {
		return nil
	}
	g, rerr := negotiate(hv)
	if rerr != nil {
		return rerr
	}
	if g != gen10 {
		return rpcErr(a2awire.CodeVersionNotSupported, "%s %q on the HTTP+JSON binding, which exists only in A2A 1.0; supported versions here: 1.0 (A2A 0.3 is served over JSON-RPC)",
			HeaderVersion, cut(strings.TrimSpace(hv), 32))
	}
	return nil
}

// restSend answers POST {base}/message:send with {"task": …}.
func (h *Handler) restSend(w http.ResponseWriter, r *http.Request, pathAgent string) {
	ctx := r.Context()
	p, size, rerr := h.restMessage(w, r)
	if rerr != nil {
		writeRESTError(w, rerr)
		return
	}
	sr := sendFromV1(p, size)
	sr.req = r
	t, rerr := h.send(ctx, sr, pathAgent)
	if rerr != nil {
		writeRESTError(w, rerr)
		return
	}
	writeRESTJSON(w, a2a1.StreamResponse{Event: t.snapshotV1(sr.history, true)})
}

// restStream answers POST {base}/message:stream: SSE whose data lines are
// StreamResponse objects.
func (h *Handler) restStream(w http.ResponseWriter, r *http.Request, pathAgent string) {
	ctx := r.Context()
	p, size, rerr := h.restMessage(w, r)
	if rerr != nil {
		writeRESTError(w, rerr)
		return
	}
	sr := sendFromV1(p, size)
	sr.req = r
	h.stream(ctx, sr, pathAgent, func(t *task, rerr *rpcError) *out {
		if rerr != nil {
			writeRESTError(w, rerr)
			return nil
		}
		return &out{s: newSSE(w), g: gen10, rest: true}
	})
}

// restMessage reads and decodes a SendMessageRequest body.
func (h *Handler) restMessage(w http.ResponseWriter, r *http.Request) (*a2a1.SendMessageRequest, int64, *rpcError) {
	body, err := h.readBody(w, r)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, 0, rpcErr(a2awire.CodeInvalidRequest, "request body exceeds %d bytes", tooBig.Limit)
		}
		return nil, 0, rpcErr(a2awire.CodeParseError, "reading body: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, 0, rpcErr(a2awire.CodeInvalidRequest, "the body must be a SendMessageRequest object")
	}
	var p a2a1.SendMessageRequest
	if err := json.Unmarshal(body, &p); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return nil, 0, rpcErr(a2awire.CodeParseError, "body is not valid JSON: %v", err)
		}
		return nil, 0, rpcErr(a2awire.CodeInvalidParams, "%v", err)
	}
	return &p, int64(len(body)), nil
}

// restTask answers {base}/tasks/{id}, {id}:cancel and {id}:subscribe.
func (h *Handler) restTask(w http.ResponseWriter, r *http.Request, pathAgent string) {
	ctx := r.Context()
	seg := r.PathValue("task")
	id, action, _ := strings.Cut(seg, ":")
	if id == "" {
		writeRESTError(w, rpcErr(a2awire.CodeInvalidParams, "the task id is empty"))
		return
	}
	switch {
	case action == "" && r.Method == http.MethodGet:
		q := &a2a1.GetTaskRequest{ID: a2a1.TaskID(id)}
		if rerr := queryInt(r, "historyLength", &q.HistoryLength); rerr != nil {
			writeRESTError(w, rerr)
			return
		}
		task, rerr := h.getTaskV1(ctx, q, pathAgent)
		if rerr != nil {
			writeRESTError(w, rerr)
			return
		}
		writeRESTJSON(w, task)
	case action == "cancel" && r.Method == http.MethodPost:
		task, rerr := h.cancelTaskV1(ctx, a2a1.TaskID(id), pathAgent)
		if rerr != nil {
			writeRESTError(w, rerr)
			return
		}
		writeRESTJSON(w, task)
	case action == "subscribe":
		t, rerr := h.subscribable(ctx, a2a1.TaskID(id), pathAgent)
		if rerr != nil {
			writeRESTError(w, rerr)
			return
		}
		h.follow(r, t, &out{s: newSSE(w), g: gen10, rest: true})
	default:
		writeRESTError(w, rpcErr(a2awire.CodeMethodNotFound, "%s on tasks/{id}%s: use GET tasks/{id}, POST tasks/{id}:cancel or tasks/{id}:subscribe",
			r.Method, cut(strings.TrimPrefix(seg, id), 32)))
	}
}

// restList answers GET {base}/tasks with the query parameters of
// ListTasksRequest.
func (h *Handler) restList(w http.ResponseWriter, r *http.Request, pathAgent string) {
	ctx := r.Context()
	qv := r.URL.Query()
	q := &a2a1.ListTasksRequest{
		ContextID: qv.Get("contextId"),
		Status:    a2a1.TaskState(qv.Get("status")),
		PageToken: qv.Get("pageToken"),
	}
	var size *int
	rerr := queryInt(r, "pageSize", &size)
	if rerr == nil {
		rerr = queryInt(r, "historyLength", &q.HistoryLength)
	}
	if rerr != nil {
		writeRESTError(w, rerr)
		return
	}
	if size != nil {
		if *size == 0 {
			writeRESTError(w, rpcErr(a2awire.CodeInvalidParams, "pageSize 0 is out of range 1..%d", maxListPageSize))
			return
		}
		q.PageSize = *size
	}
	if s := qv.Get("includeArtifacts"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			writeRESTError(w, rpcErr(a2awire.CodeInvalidParams, "includeArtifacts %q is not a boolean", cut(s, 32)))
			return
		}
		q.IncludeArtifacts = b
	}
	// a2a.proto names the filter statusTimestampAfter; a2a-go/v2's REST
	// client sends it as lastUpdatedAfter (the 0.3 name): both are read.
	tsName := "statusTimestampAfter"
	if qv.Get(tsName) == "" && qv.Get("lastUpdatedAfter") != "" {
		tsName = "lastUpdatedAfter"
	}
	if s := qv.Get(tsName); s != "" {
		ts, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			writeRESTError(w, rpcErr(a2awire.CodeInvalidParams, "%s %q is not an RFC 3339 time", tsName, cut(s, 64)))
			return
		}
		q.StatusTimestampAfter = &ts
	}
	resp, rerr := h.listTasksV1(ctx, q, pathAgent)
	if rerr != nil {
		writeRESTError(w, rerr)
		return
	}
	writeRESTJSON(w, resp)
}

func queryInt(r *http.Request, name string, dst **int) *rpcError {
	s := r.URL.Query().Get(name)
	if s == "" {
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return rpcErr(a2awire.CodeInvalidParams, "%s %q is not an integer", name, cut(s, 32))
	}
	*dst = &n
	return nil
}

func writeRESTJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeRESTError(w, rpcErr(a2awire.CodeInternalError, "encoding the result failed"))
		return
	}
	writeJSON(w, b)
}

// restStatus maps an error code to the HTTP status and the google.rpc
// status name of the A2A 1.0 REST binding.
func restStatus(code int) (int, string) {
	switch code {
	case a2awire.CodeParseError, a2awire.CodeInvalidRequest, a2awire.CodeInvalidParams, a2awire.CodeUnsupportedContentType:
		return http.StatusBadRequest, "INVALID_ARGUMENT"
	case a2awire.CodeMethodNotFound:
		return http.StatusNotImplemented, "UNIMPLEMENTED"
	case a2awire.CodeTaskNotFound:
		return http.StatusNotFound, "NOT_FOUND"
	case a2awire.CodeTaskNotCancelable, a2awire.CodePushNotSupported, a2awire.CodeUnsupportedOperation, a2awire.CodeExtendedCardNotConfig,
		a2awire.CodeExtensionRequired, a2awire.CodeVersionNotSupported:
		return http.StatusBadRequest, "FAILED_PRECONDITION"
	case a2awire.CodeServerError:
		return http.StatusServiceUnavailable, "UNAVAILABLE"
	}
	return http.StatusInternalServerError, "INTERNAL"
}

// restErrorJSON is e as a REST error body (also a stream's error event).
func restErrorJSON(e *rpcError) []byte {
	status, name := restStatus(e.Code)
	b := make([]byte, 0, 256)
	b = append(b, `{"error":{"code":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, `,"status":"`...)
	b = append(b, name...)
	b = append(b, `","message":`...)
	b = a2awire.AppendString(b, e.Text1())
	b = append(b, `,"details":[`...)
	b = a2awire.AppendErrorInfo(b, e.Code)
	return append(b, "]}}"...)
}

func writeRESTError(w http.ResponseWriter, e *rpcError) {
	status, _ := restStatus(e.Code)
	if e.Code == a2awire.CodeInvalidRequest && strings.HasPrefix(e.Detail, "request body exceeds") {
		status = http.StatusRequestEntityTooLarge
	}
	b := restErrorJSON(e)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
