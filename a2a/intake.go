package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
)

// TaskRequest is the body of POST /a2a/tasks ([PathTasks]).
type TaskRequest struct {
	// ID names the task (it becomes the task id on the lattice). Zero: a new id.
	ID string `json:"id,omitempty"`
	// SenderID is the agent or system sending the task, for the logs.
	SenderID string `json:"sender_id,omitempty"`
	// ReceiverID is the agent that runs the task. Required.
	ReceiverID string `json:"receiver_id"`
	// Input is a string, or a JSON object rendered to indented JSON text for
	// the model.
	Input json.RawMessage `json:"input"`
	// TimeoutSecs bounds the run (on top of the agent's own timeout). Zero:
	// the agent's timeout.
	TimeoutSecs float64 `json:"timeout_secs,omitempty"`
}

// TaskResponse is the answer of POST /a2a/tasks to a [TaskRequest].
type TaskResponse struct {
	TaskID     string      `json:"task_id"`
	ReceiverID string      `json:"receiver_id"`
	Status     string      `json:"status"` // "completed" or "failed"
	Output     *TaskOutput `json:"output"` // null when failed
	Error      *string     `json:"error"`  // null when completed
}

// TaskOutput is a completed task's output ([TaskResponse].Output).
type TaskOutput struct {
	Content string `json:"content"`
}

// maxTaskID bounds a client-chosen task id.
const maxTaskID = 128

// decodeTaskRequest parses and checks a /a2a/tasks body and renders its
// input to text. Errors are client errors (400).
func decodeTaskRequest(body []byte) (TaskRequest, string, error) {
	var req TaskRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return req, "", fmt.Errorf("body is not a valid task request: %w", err)
	}
	if req.ReceiverID == "" {
		return req, "", errors.New("receiver_id is required")
	}
	if len(req.ID) > maxTaskID {
		return req, "", fmt.Errorf("id is longer than %d bytes", maxTaskID)
	}
	if req.TimeoutSecs < 0 || math.IsNaN(req.TimeoutSecs) || req.TimeoutSecs > math.MaxInt64/float64(time.Second) {
		return req, "", errors.New("timeout_secs must be a positive number of seconds")
	}
	input, err := renderInput(req.Input)
	if err != nil {
		return req, "", err
	}
	return req, input, nil
}

// renderInput accepts a JSON string or object.
func renderInput(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", errors.New("input is required: a string or a JSON object")
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("input: %w", err)
		}
		return s, nil
	case '{':
		return indentBounded(raw)
	}
	return "", errors.New("input must be a string or a JSON object")
}

// indentBounded renders a JSON object indented for the model, refusing
// one whose indentation would make it a large multiple of itself: two
// spaces per level makes a deeply nested object grow with the square of
// its depth (20 KB nested 10,000 deep is 190 MB indented).
func indentBounded(raw json.RawMessage) (string, error) {
	limit := maxRendered(len(raw))
	if indentedSizeBound(raw) > limit {
		return "", fmt.Errorf("input: indented for the model it would exceed %d bytes (4× its size + 64 KiB): send a flatter object, or a string", limit)
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return "", fmt.Errorf("input: %w", err)
	}
	return buf.String(), nil
}

// maxRendered bounds the indented rendering of an input of n bytes.
func maxRendered(n int) int { return 4*n + 64<<10 }

// indentedSizeBound is an upper bound of [json.Indent]'s output for raw with
// a two-space indent: every structural character may start a new line
// indented to the deepest level, every colon gains a space. One pass, no
// allocation; strings are skipped.
func indentedSizeBound(raw []byte) int {
	depth, maxDepth, breaks, colons := 0, 0, 0, 0
	inString, escaped := false, false
	for _, c := range raw {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			maxDepth = max(maxDepth, depth)
			breaks++
		case c == '}' || c == ']':
			depth--
			breaks++
		case c == ',':
			breaks++
		case c == ':':
			colons++
		}
	}
	return len(raw) + colons + breaks*(1+2*maxDepth)
}

// serveTasks answers POST /a2a/tasks: 400 for a bad request, 404 for an
// unknown receiver, 413 for a body over the limit, else 200 with the task's
// result, completed or failed. The Engine's guard has checked the caller.
func (h *Handler) serveTasks(w http.ResponseWriter, r *http.Request) {
	body, err := h.readBody(w, r)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeHTTPError(w, http.StatusRequestEntityTooLarge, "payload_too_large", fmt.Sprintf("request body exceeds %d bytes", tooBig.Limit))
			return
		}
		writeHTTPError(w, http.StatusBadRequest, "bad_request", "reading body: "+err.Error())
		return
	}
	req, input, err := decodeTaskRequest(body)
	if err != nil {
		writeHTTPError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	if _, err := h.eng.AgentFor(r.Context(), req.ReceiverID); err != nil {
		writeHTTPError(w, http.StatusNotFound, "agent_not_found", "no agent "+quote(req.ReceiverID))
		return
	}
	if err := h.join(); err != nil {
		writeHTTPError(w, http.StatusServiceUnavailable, "unavailable", err.Error())
		return
	}
	defer h.runs.Done()

	// The run ends with the client's request, the timeout or Close.
	ctx := r.Context()
	if req.TimeoutSecs > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutSecs*float64(time.Second)))
		defer cancel()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(h.ctx, cancel)
	defer stop()

	h.log.Debug("a2a task", "receiver", req.ReceiverID, "sender", req.SenderID)
	res, err := h.eng.ExecuteRequest(ctx, axocoatl.Request{
		AgentID: req.ReceiverID,
		Input:   input,
		Source:  axocoatl.SourceA2A,
		TaskID:  req.ID,
	})
	out := TaskResponse{TaskID: res.TaskID, ReceiverID: req.ReceiverID}
	switch {
	case err == nil:
		out.Status = "completed"
		out.Output = &TaskOutput{Content: res.Output}
	case errors.Is(err, axocoatl.ErrAgentNotFound): // removed since the check above
		writeHTTPError(w, http.StatusNotFound, "agent_not_found", "no agent "+quote(req.ReceiverID))
		return
	case errors.Is(err, axocoatl.ErrClosed) && res.TaskID == "":
		writeHTTPError(w, http.StatusServiceUnavailable, "unavailable", err.Error())
		return
	case errors.Is(err, axocoatl.ErrUnavailable): // another daemon's agent, out of reach now
		writeHTTPError(w, http.StatusServiceUnavailable, "cluster_unavailable", err.Error())
		return
	case errors.Is(err, axocoatl.ErrBusy):
		w.Header().Set("Retry-After", "1")
		writeHTTPError(w, http.StatusServiceUnavailable, "busy", err.Error())
		return
	case errors.Is(err, axocoatl.ErrTaskExists): // the client chose the id of a running task
		writeHTTPError(w, http.StatusConflict, "task_exists", "task "+quote(req.ID)+" is running: choose another id, or none")
		return
	default:
		out.Status = "failed"
		msg := err.Error()
		out.Error = &msg
		if out.TaskID == "" {
			out.TaskID = req.ID
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		writeHTTPError(w, http.StatusInternalServerError, "internal", "encoding the result failed")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(b, '\n'))
}
