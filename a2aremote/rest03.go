package a2aremote

// The A2A 0.3 HTTP+JSON transport (transport03.go has what both 0.3
// bindings share).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"

	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2apb/v0/pbjson"

	"github.com/axocoatl/axocoatl-go/internal/a2awire"
)

// restPrefix03 is the path prefix of every 0.3 HTTP+JSON endpoint
// (a2av0.RESTPathPrefix).
const restPrefix03 = "/v1"

// rest03 is the A2A 0.3 HTTP+JSON transport: POST /v1/message:send,
// /v1/message:stream (SSE), GET /v1/tasks/{id}, POST
// /v1/tasks/{id}:cancel, with the proto-JSON bodies of A2A 0.3.
type rest03 struct {
	unsupported03
	base      *url.URL
	hc        *http.Client
	lineLimit int64
}

// do sends a request to path (under /v1) and returns the response (a 2xx
// status), whose body the caller closes.
func (t *rest03) do(ctx context.Context, method, path string, query url.Values, sp a2aclient.ServiceParams, body []byte, stream bool) (*http.Response, error) {
	u := t.base.JoinPath(restPrefix03 + path)
	if len(query) > 0 {
		u.RawQuery = query.Encode()
	}
	var br io.Reader
	if len(body) > 0 {
		br = bytes.NewReader(body)
	}
	hr, err := http.NewRequestWithContext(ctx, method, u.String(), br)
	if err != nil {
		return nil, err
	}
	if len(body) > 0 {
		hr.Header.Set("Content-Type", "application/json")
	}
	if stream {
		hr.Header.Set("Accept", "text/event-stream")
	} else {
		hr.Header.Set("Accept", "application/json")
	}
	addHeaders03(hr.Header, sp)
	resp, err := t.hc.Do(hr)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// Any 2xx: @a2a-js/sdk answers message:send with 201 Created
		// (a2av0 takes only 200 and 204, and fails on it).
		defer resp.Body.Close()
		return nil, restError03(resp)
	}
	return resp, nil
}

// read sends a request and returns the answer's body.
func (t *rest03) read(ctx context.Context, method, path string, query url.Values, sp a2aclient.ServiceParams, body []byte) ([]byte, error) {
	resp, err := t.do(ctx, method, path, query, sp, body, false)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return readBody(resp)
}

// SendMessage implements a2aclient.Transport.
func (t *rest03) SendMessage(ctx context.Context, sp a2aclient.ServiceParams, req *a2a1.SendMessageRequest) (a2a1.SendMessageResult, error) {
	body, err := pbjson.ToProtoSendMessageRequest(req)
	if err != nil {
		return nil, fmt.Errorf("encoding the request: %w", err)
	}
	data, err := t.read(ctx, http.MethodPost, "/message:send", nil, sp, body)
	if err != nil {
		return nil, err
	}
	res, err := pbjson.FromProtoSendMessageResponse(data)
	if err != nil {
		return nil, fmt.Errorf("the answer is not an A2A 0.3 SendMessageResponse: %w", err)
	}
	return res, nil
}

// SendStreamingMessage implements a2aclient.Transport.
func (t *rest03) SendStreamingMessage(ctx context.Context, sp a2aclient.ServiceParams, req *a2a1.SendMessageRequest) iter.Seq2[a2a1.Event, error] {
	body, err := pbjson.ToProtoSendMessageRequest(req)
	if err != nil {
		return errorStream(fmt.Errorf("encoding the request: %w", err))
	}
	return func(yield func(a2a1.Event, error) bool) {
		resp, err := t.do(ctx, http.MethodPost, "/message:stream", nil, sp, body, true)
		if err != nil {
			yield(nil, err)
			return
		}
		defer resp.Body.Close()
		for data, err := range a2awire.Events(resp.Body, t.lineLimit, ErrResponseTooLarge) {
			if err != nil {
				yield(nil, err)
				return
			}
			if err := streamError03(data); err != nil {
				yield(nil, err)
				return
			}
			ev, err := pbjson.FromProtoStreamEvent(data)
			if err != nil {
				yield(nil, fmt.Errorf("an event of the stream is not an A2A 0.3 StreamResponse: %w", err))
				return
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// GetTask implements a2aclient.Transport.
func (t *rest03) GetTask(ctx context.Context, sp a2aclient.ServiceParams, req *a2a1.GetTaskRequest) (*a2a1.Task, error) {
	q := url.Values{}
	if req.HistoryLength != nil {
		q.Set("historyLength", strconv.Itoa(*req.HistoryLength))
	}
	path, err := taskPath03(req.ID)
	if err != nil {
		return nil, err
	}
	data, err := t.read(ctx, http.MethodGet, path, q, sp, nil)
	if err != nil {
		return nil, err
	}
	return restTask03(data)
}

// CancelTask implements a2aclient.Transport.
func (t *rest03) CancelTask(ctx context.Context, sp a2aclient.ServiceParams, req *a2a1.CancelTaskRequest) (*a2a1.Task, error) {
	path, err := taskPath03(req.ID)
	if err != nil {
		return nil, err
	}
	data, err := t.read(ctx, http.MethodPost, path+":cancel", nil, sp, nil)
	if err != nil {
		return nil, err
	}
	return restTask03(data)
}

// taskPath03 is the path of task id (under /v1): the id, which the remote
// chose, escaped as one path segment. Unescaped (a2av0 joins it as it is),
// "../../x" named another path of the host, which the module's headers
// went to, and "%zz" the interface's base URL; "", "." and ".." cannot be
// a segment of their own.
func taskPath03(id a2a1.TaskID) (string, error) {
	switch id {
	case "", ".", "..":
		return "", fmt.Errorf("task id %q cannot name a task in an HTTP+JSON path: %w", id, a2a1.ErrInvalidParams)
	}
	// JoinPath (rest03.do) takes it as escaped and keeps the escapes.
	return "/tasks/" + url.PathEscape(string(id)), nil
}

func restTask03(data []byte) (*a2a1.Task, error) {
	task, err := pbjson.FromProtoTask(data)
	if err != nil {
		return nil, fmt.Errorf("the answer is not an A2A 0.3 task: %w", err)
	}
	return task, nil
}

// restErrorBody03 is a google.rpc.Status, the error of 0.3 HTTP+JSON.
type restErrorBody03 struct {
	Code    int               `json:"code"`
	Status  string            `json:"status"`
	Message string            `json:"message"`
	Details []json.RawMessage `json:"details"`
}

// err1 is the A2A 1.0 error the body names by the reason of its
// ErrorInfo detail of domain a2a1.ProtocolDomain (a2a1.ErrInternalError
// without one), with the remote's message, as a2a-go's internal/rest
// reads it. Other details are not read.
func (b *restErrorBody03) err1() error {
	kind := a2a1.ErrInternalError
	for _, raw := range b.Details {
		var info struct {
			Type   string `json:"@type"`
			Reason string `json:"reason"`
			Domain string `json:"domain"`
		}
		if json.Unmarshal(raw, &info) != nil || info.Type != a2awire.ErrorInfoType || info.Domain != a2a1.ProtocolDomain {
			continue
		}
		if k, ok := a2awire.KindOfReason1(info.Reason); ok {
			kind = k
		}
	}
	msg := b.Message
	if msg == "" {
		msg = kind.Error()
	}
	return a2a1.NewError(kind, msg)
}

// restError03 is the error of a 0.3 HTTP+JSON answer whose status is not
// 200: the A2A error its JSON body names, else a2a1.ErrServerError with
// the status. The body is a google.rpc.Status under "error" (a2a-go's
// servers, read as a2av0 reads it) or, from @a2a-js/sdk's 0.3 layer, a
// JSON-RPC error object {"code": -32001, "message": …} (which a2av0 reads
// as an internal error without its message).
func restError03(resp *http.Response) error {
	// a2av0's own server sends application/problem+json (which a2av0's
	// client, reading only application/json, takes for a bare server error).
	if !jsonBody(resp) {
		return fmt.Errorf("%w: HTTP status %s", a2a1.ErrServerError, resp.Status)
	}
	var body struct {
		Error   *restErrorBody03 `json:"error"`
		Code    int              `json:"code"`
		Message string           `json:"message"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil { // bounded by max_response_bytes
		return fmt.Errorf("HTTP status %s with an error body that is not JSON: %w: %w", resp.Status, err, a2a1.ErrParseError)
	}
	switch {
	case body.Error != nil:
		return body.Error.err1()
	case body.Code != 0 || body.Message != "":
		return (&a2awire.Error{Code: body.Code, Message: body.Message}).Err1()
	}
	return fmt.Errorf("%w: HTTP status %s", a2a1.ErrServerError, resp.Status)
}

// streamError03 is the error an event of a 0.3 HTTP+JSON stream carries,
// nil when it carries none: a google.rpc.Status under "error" (a2a-go's
// servers) or, from @a2a-js/sdk's 0.3 layer (its "event: error"), a bare
// JSON-RPC error object {"code": -32001, "message": …}. A StreamResponse
// has neither "error" nor "code".
func streamError03(data []byte) error {
	var raw struct {
		Error   json.RawMessage `json:"error"`
		Code    json.RawMessage `json:"code"` // raw: a StreamResponse's "message" is an object
		Message json.RawMessage `json:"message"`
	}
	if json.Unmarshal(data, &raw) != nil {
		return nil
	}
	if len(raw.Error) == 0 || string(raw.Error) == "null" {
		if len(raw.Code) == 0 {
			return nil
		}
		var e a2awire.Error
		if err := json.Unmarshal(data, &e); err != nil {
			return fmt.Errorf("the stream's error event is malformed: %w: %w", err, a2a1.ErrInternalError)
		}
		return e.Err1()
	}
	var body restErrorBody03
	if err := json.Unmarshal(raw.Error, &body); err != nil {
		return fmt.Errorf("the stream's error event is malformed: %w: %w", err, a2a1.ErrInternalError)
	}
	return body.err1()
}
