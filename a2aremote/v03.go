package a2aremote

// A2A 0.3 transports: JSON-RPC and HTTP+JSON, as a2a-go/v2's
// a2acompat/a2av0 speaks them (its client half, ported: the package itself
// would bring the 0.3 SDK's servers, gRPC and protobuf into every binary
// that uses this module; bench/README.md, Build). The 0.3 JSON-RPC wire
// types are the 0.3 SDK's a2a package, the 0.3 HTTP+JSON ones a2a-go/v2's
// a2apb/v0/pbjson (plain structs, the ones a2av0 uses); neither pulls gRPC.
// The conversions to the 1.0 types are a2av0's (conversions.go of v2.4.0,
// Copyright 2026 The A2A Authors, Apache License 2.0).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2apb/v0/pbjson"
)

// version03 is the protocol version of A2A 0.3 interfaces (a2av0.Version).
const version03 a2a1.ProtocolVersion = "0.3"

// restPrefix03 is the path prefix of every 0.3 HTTP+JSON endpoint
// (a2av0.RESTPathPrefix).
const restPrefix03 = "/v1"

// withTransports03 registers the 0.3 JSON-RPC and HTTP+JSON transports
// over hc with a2aclient's factory.
func withTransports03(hc *http.Client) []a2aclient.FactoryOption {
	var opts []a2aclient.FactoryOption
	for _, b := range []a2a1.TransportProtocol{a2a1.TransportProtocolJSONRPC, a2a1.TransportProtocolHTTPJSON} {
		opts = append(opts, a2aclient.WithCompatTransport(version03, b, a2aclient.TransportFactoryFn(
			func(_ context.Context, _ *a2a1.AgentCard, iface *a2a1.AgentInterface) (a2aclient.Transport, error) {
				return newTransport03(b, iface.URL, hc)
			})))
	}
	return opts
}

// newTransport03 is the 0.3 transport of binding at u over hc. An SSE
// line may be as long as hc's response bound (max_response_bytes).
func newTransport03(binding a2a1.TransportProtocol, u string, hc *http.Client) (a2aclient.Transport, error) {
	limit := int64(DefaultMaxResponseBytes)
	if rt, ok := hc.Transport.(*roundTripper); ok {
		limit = rt.limit
	}
	if binding == a2a1.TransportProtocolJSONRPC {
		return &jsonrpc03{url: u, hc: hc, lineLimit: limit}, nil
	}
	base, err := url.Parse(u)
	if err != nil {
		return nil, fmt.Errorf("0.3 HTTP+JSON interface URL: %w", err)
	}
	return &rest03{base: base, hc: hc, lineLimit: limit}, nil
}

// unsupported03 is the part of a2aclient.Transport this module never
// calls on a 0.3 remote (push configs, resubscription, the extended
// card): each answers a2a1.ErrUnsupportedOperation.
type unsupported03 struct{}

func (unsupported03) ListTasks(context.Context, a2aclient.ServiceParams, *a2a1.ListTasksRequest) (*a2a1.ListTasksResponse, error) {
	return nil, a2a1.ErrUnsupportedOperation // 0.3 has no tasks/list (a2av0 answers the same)
}

func (unsupported03) SubscribeToTask(context.Context, a2aclient.ServiceParams, *a2a1.SubscribeToTaskRequest) iter.Seq2[a2a1.Event, error] {
	return errorStream(a2a1.ErrUnsupportedOperation)
}

func (unsupported03) GetTaskPushConfig(context.Context, a2aclient.ServiceParams, *a2a1.GetTaskPushConfigRequest) (*a2a1.PushConfig, error) {
	return nil, a2a1.ErrUnsupportedOperation
}

func (unsupported03) ListTaskPushConfigs(context.Context, a2aclient.ServiceParams, *a2a1.ListTaskPushConfigRequest) ([]*a2a1.PushConfig, error) {
	return nil, a2a1.ErrUnsupportedOperation
}

func (unsupported03) CreateTaskPushConfig(context.Context, a2aclient.ServiceParams, *a2a1.PushConfig) (*a2a1.PushConfig, error) {
	return nil, a2a1.ErrUnsupportedOperation
}

func (unsupported03) DeleteTaskPushConfig(context.Context, a2aclient.ServiceParams, *a2a1.DeleteTaskPushConfigRequest) error {
	return a2a1.ErrUnsupportedOperation
}

func (unsupported03) GetExtendedAgentCard(context.Context, a2aclient.ServiceParams, *a2a1.GetExtendedAgentCardRequest) (*a2a1.AgentCard, error) {
	return nil, a2a1.ErrUnsupportedOperation
}

func (unsupported03) Destroy() error { return nil }

func errorStream(err error) iter.Seq2[a2a1.Event, error] {
	return func(yield func(a2a1.Event, error) bool) { yield(nil, err) }
}

// addHeaders03 adds the call's service parameters as 0.3 servers expect
// them: lower-case names, A2A-Extensions as X-A2A-Extensions
// (a2av0.FromServiceParams).
func addHeaders03(h http.Header, params a2aclient.ServiceParams) {
	ext := strings.ToLower(a2a1.SvcParamExtensions)
	for k, vs := range params {
		lk := strings.ToLower(k)
		if lk == ext {
			lk = "x-" + lk
		}
		for _, v := range vs {
			h.Add(lk, v)
		}
	}
}

// sseData yields the data of each event of an SSE stream (its data:
// lines joined by newlines), as a2a-go's internal/sse does. A line longer
// than limit bytes ends the stream with ErrResponseTooLarge (the body as
// a whole is bounded by max_response_bytes too).
func sseData(body io.Reader, limit int64) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		sc := bufio.NewScanner(body)
		// The buffer's capacity is a bound too (Scanner takes the larger).
		sc.Buffer(make([]byte, 0, min(4096, limit)), int(min(limit, int64(1<<31-1))))
		var event bytes.Buffer
		flush := func() bool {
			if event.Len() == 0 {
				return true
			}
			data := bytes.Clone(event.Bytes())
			event.Reset()
			return yield(data, nil)
		}
		for sc.Scan() {
			line := sc.Bytes()
			if len(line) == 0 {
				if !flush() {
					return
				}
				continue
			}
			data, ok := bytes.CutPrefix(line, []byte("data:"))
			if !ok {
				continue // id:, event:, retry: and comments
			}
			data = bytes.TrimPrefix(data, []byte(" "))
			if event.Len() > 0 {
				event.WriteByte('\n')
			}
			if int64(event.Len()+len(data)) > limit {
				yield(nil, fmt.Errorf("%w: an SSE event of more than %d bytes", ErrResponseTooLarge, limit))
				return
			}
			event.Write(data)
		}
		if err := sc.Err(); err != nil {
			if errors.Is(err, bufio.ErrTooLong) {
				err = fmt.Errorf("%w: an SSE line of more than %d bytes", ErrResponseTooLarge, limit)
			}
			yield(nil, fmt.Errorf("reading the event stream: %w", err))
			return
		}
		flush()
	}
}

// jsonrpc03 is the A2A 0.3 JSON-RPC transport: message/send,
// message/stream (SSE), tasks/get and tasks/cancel.
type jsonrpc03 struct {
	unsupported03
	url       string
	hc        *http.Client
	lineLimit int64
	ids       atomic.Uint64
}

// post sends the JSON-RPC request of method with params and returns the
// HTTP response (status 200), whose body the caller closes.
func (t *jsonrpc03) post(ctx context.Context, method string, sp a2aclient.ServiceParams, params any, stream bool) (*http.Response, error) {
	body, err := json.Marshal(rpcRequest{JSONRPC: "2.0", ID: strconv.FormatUint(t.ids.Add(1), 10), Method: method, Params: params})
	if err != nil {
		return nil, fmt.Errorf("encoding the request: %w", err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	if stream {
		hr.Header.Set("Accept", "text/event-stream")
	}
	addHeaders03(hr.Header, sp)
	resp, err := t.hc.Do(hr)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, rpcStatusError03(resp)
	}
	return resp, nil
}

// rpcStatusError03 is the error of a JSON-RPC answer whose status is not
// 200: the A2A error of the JSON-RPC response in its body (@a2a-js/sdk
// answers an internal error so, with status 500), else the status alone.
func rpcStatusError03(resp *http.Response) error {
	statusErr := fmt.Errorf("unexpected HTTP status %s", resp.Status)
	if !jsonBody(resp) {
		return statusErr
	}
	var answer rpcAnswer03
	if json.NewDecoder(resp.Body).Decode(&answer) != nil || answer.Error == nil { // bounded by max_response_bytes
		return statusErr
	}
	return fmt.Errorf("%w: %w", statusErr, answer.Error.a2aError())
}

// rpcAnswer03 is a JSON-RPC response of A2A 0.3.
type rpcAnswer03 struct {
	Result json.RawMessage `json:"result"`
	Error  *rpcError       `json:"error"`
}

func (a *rpcAnswer03) result() (json.RawMessage, error) {
	switch {
	case a.Error != nil:
		return nil, a.Error.a2aError()
	case len(a.Result) == 0 || string(a.Result) == "null":
		return nil, errors.New("the answer has neither a result nor an error")
	}
	return a.Result, nil
}

// call sends a request and returns its result.
func (t *jsonrpc03) call(ctx context.Context, method string, sp a2aclient.ServiceParams, params any) (json.RawMessage, error) {
	resp, err := t.post(ctx, method, sp, params, false)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body) // bounded by max_response_bytes (limitedBody)
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	var answer rpcAnswer03
	if err := json.Unmarshal(data, &answer); err != nil {
		return nil, fmt.Errorf("the answer is not a JSON-RPC response: %w", err)
	}
	return answer.result()
}

// event03 reads a 0.3 event (its kind names it) as the 1.0 event.
func event03(data json.RawMessage) (a2a1.Event, error) {
	ev, err := a2a03.UnmarshalEventJSON(data)
	if err != nil {
		return nil, fmt.Errorf("the result is not an A2A 0.3 event: %w", err)
	}
	return toV1Event(ev)
}

// task03 reads a 0.3 task as the 1.0 task.
func task03(data json.RawMessage) (*a2a1.Task, error) {
	var t a2a03.Task
	if err := json.Unmarshal(data, &t); err != nil {
		return nil, fmt.Errorf("the result is not an A2A 0.3 task: %w", err)
	}
	return toV1Task(&t)
}

// SendMessage implements a2aclient.Transport (message/send).
func (t *jsonrpc03) SendMessage(ctx context.Context, sp a2aclient.ServiceParams, req *a2a1.SendMessageRequest) (a2a1.SendMessageResult, error) {
	result, err := t.call(ctx, "message/send", sp, fromV1SendMessageRequest(req))
	if err != nil {
		return nil, err
	}
	ev, err := event03(result)
	if err != nil {
		return nil, err
	}
	switch e := ev.(type) {
	case *a2a1.Task:
		return e, nil
	case *a2a1.Message:
		return e, nil
	default:
		return nil, fmt.Errorf("the result violates A2A: want a task or a message, got %T", ev)
	}
}

// SendStreamingMessage implements a2aclient.Transport (message/stream).
func (t *jsonrpc03) SendStreamingMessage(ctx context.Context, sp a2aclient.ServiceParams, req *a2a1.SendMessageRequest) iter.Seq2[a2a1.Event, error] {
	return func(yield func(a2a1.Event, error) bool) {
		resp, err := t.post(ctx, "message/stream", sp, fromV1SendMessageRequest(req), true)
		if err != nil {
			yield(nil, err)
			return
		}
		defer resp.Body.Close()
		if jsonBody(resp) {
			// Not a stream but one JSON-RPC response: @a2a-js/sdk answers
			// so (as application/a2a+json) when the call fails before the
			// first event (its "pre-stream error", status 200).
			data, err := io.ReadAll(resp.Body) // bounded by max_response_bytes (limitedBody)
			if err != nil {
				yield(nil, fmt.Errorf("reading the answer: %w", err))
				return
			}
			yield(streamEvent03(data, "the answer"))
			return
		}
		for data, err := range sseData(resp.Body, t.lineLimit) {
			if err != nil {
				yield(nil, err)
				return
			}
			ev, err := streamEvent03(data, "an event of the stream")
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// streamEvent03 reads what, a JSON-RPC response of message/stream, as
// the 1.0 event of its result or the A2A error of its error.
func streamEvent03(data []byte, what string) (a2a1.Event, error) {
	var answer rpcAnswer03
	if err := json.Unmarshal(data, &answer); err != nil {
		return nil, fmt.Errorf("%s is not a JSON-RPC response: %w", what, err)
	}
	result, err := answer.result()
	if err != nil {
		return nil, err
	}
	return event03(result)
}

// GetTask implements a2aclient.Transport (tasks/get).
func (t *jsonrpc03) GetTask(ctx context.Context, sp a2aclient.ServiceParams, req *a2a1.GetTaskRequest) (*a2a1.Task, error) {
	result, err := t.call(ctx, "tasks/get", sp, &a2a03.TaskQueryParams{ID: a2a03.TaskID(req.ID), HistoryLength: req.HistoryLength})
	if err != nil {
		return nil, err
	}
	return task03(result)
}

// CancelTask implements a2aclient.Transport (tasks/cancel).
func (t *jsonrpc03) CancelTask(ctx context.Context, sp a2aclient.ServiceParams, req *a2a1.CancelTaskRequest) (*a2a1.Task, error) {
	result, err := t.call(ctx, "tasks/cancel", sp, &a2a03.TaskIDParams{ID: a2a03.TaskID(req.ID), Metadata: req.Metadata})
	if err != nil {
		return nil, err
	}
	return task03(result)
}

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
	data, err := io.ReadAll(resp.Body) // bounded by max_response_bytes (limitedBody)
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	return data, nil
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
		for data, err := range sseData(resp.Body, t.lineLimit) {
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

// a2aError is the A2A error the body names by the reason of its
// ErrorInfo detail of domain a2a1.ProtocolDomain (a2a1.ErrInternalError
// without one), with the remote's message, as a2a-go's internal/rest
// reads it. Other details are not read.
func (b *restErrorBody03) a2aError() error {
	kind := a2a1.ErrInternalError
	for _, raw := range b.Details {
		var info struct {
			Type   string `json:"@type"`
			Reason string `json:"reason"`
			Domain string `json:"domain"`
		}
		if json.Unmarshal(raw, &info) != nil || info.Type != "type.googleapis.com/google.rpc.ErrorInfo" || info.Domain != a2a1.ProtocolDomain {
			continue
		}
		for _, e := range rpcErrorKinds {
			if a2a1.ErrorReason(e) == info.Reason {
				kind = e
				break
			}
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
		return body.Error.a2aError()
	case body.Code != 0 || body.Message != "":
		return (&rpcError{Code: body.Code, Message: body.Message}).a2aError()
	}
	return fmt.Errorf("%w: HTTP status %s", a2a1.ErrServerError, resp.Status)
}

// jsonBody reports whether resp's body is JSON by its media type:
// application/json or any +json (@a2a-js/sdk sends application/a2a+json,
// a2av0's server application/problem+json).
func jsonBody(resp *http.Response) bool {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
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
		var e rpcError
		if err := json.Unmarshal(data, &e); err != nil {
			return fmt.Errorf("the stream's error event is malformed: %w: %w", err, a2a1.ErrInternalError)
		}
		return e.a2aError()
	}
	var body restErrorBody03
	if err := json.Unmarshal(raw.Error, &body); err != nil {
		return fmt.Errorf("the stream's error event is malformed: %w: %w", err, a2a1.ErrInternalError)
	}
	return body.a2aError()
}

// Conversions between the 0.3 types (the 0.3 SDK's a2a package) and the
// 1.0 ones, as a2av0 converts them.

var v1ToTaskState03 = map[a2a1.TaskState]a2a03.TaskState{
	a2a1.TaskStateAuthRequired:  a2a03.TaskStateAuthRequired,
	a2a1.TaskStateCanceled:      a2a03.TaskStateCanceled,
	a2a1.TaskStateCompleted:     a2a03.TaskStateCompleted,
	a2a1.TaskStateFailed:        a2a03.TaskStateFailed,
	a2a1.TaskStateInputRequired: a2a03.TaskStateInputRequired,
	a2a1.TaskStateRejected:      a2a03.TaskStateRejected,
	a2a1.TaskStateSubmitted:     a2a03.TaskStateSubmitted,
	a2a1.TaskStateWorking:       a2a03.TaskStateWorking,
}

func toV1TaskState(s a2a03.TaskState) a2a1.TaskState {
	for v1, v03 := range v1ToTaskState03 {
		if v03 == s {
			return v1
		}
	}
	return a2a1.TaskStateUnspecified
}

func toV1Role(r a2a03.MessageRole) a2a1.MessageRole {
	switch r {
	case a2a03.MessageRoleAgent:
		return a2a1.MessageRoleAgent
	case a2a03.MessageRoleUser:
		return a2a1.MessageRoleUser
	}
	return a2a1.MessageRoleUnspecified
}

func fromV1Role(r a2a1.MessageRole) a2a03.MessageRole {
	switch r {
	case a2a1.MessageRoleAgent:
		return a2a03.MessageRoleAgent
	case a2a1.MessageRoleUser:
		return a2a03.MessageRoleUser
	}
	return a2a03.MessageRoleUnspecified
}

func toV1Event(ev a2a03.Event) (a2a1.Event, error) {
	switch v := ev.(type) {
	case *a2a03.Message:
		return toV1Message(v), nil
	case *a2a03.Task:
		return toV1Task(v)
	case *a2a03.TaskStatusUpdateEvent:
		return &a2a1.TaskStatusUpdateEvent{
			ContextID: v.ContextID,
			Status:    toV1Status(v.Status),
			TaskID:    a2a1.TaskID(v.TaskID),
			Metadata:  v.Metadata,
		}, nil
	case *a2a03.TaskArtifactUpdateEvent:
		return &a2a1.TaskArtifactUpdateEvent{
			Append:    v.Append,
			Artifact:  toV1Artifact(v.Artifact),
			ContextID: v.ContextID,
			LastChunk: v.LastChunk,
			TaskID:    a2a1.TaskID(v.TaskID),
			Metadata:  v.Metadata,
		}, nil
	default:
		return nil, fmt.Errorf("unknown A2A 0.3 event %T", ev)
	}
}

func toV1Status(s a2a03.TaskStatus) a2a1.TaskStatus {
	return a2a1.TaskStatus{Message: toV1Message(s.Message), State: toV1TaskState(s.State), Timestamp: s.Timestamp}
}

func toV1Task(t *a2a03.Task) (*a2a1.Task, error) {
	if t == nil {
		return nil, errors.New("the result is a null task")
	}
	res := &a2a1.Task{
		ID:        a2a1.TaskID(t.ID),
		ContextID: t.ContextID,
		Metadata:  t.Metadata,
		Status:    toV1Status(t.Status),
	}
	if len(t.Artifacts) > 0 {
		res.Artifacts = make([]*a2a1.Artifact, len(t.Artifacts))
		for i, a := range t.Artifacts {
			res.Artifacts[i] = toV1Artifact(a)
		}
	}
	if len(t.History) > 0 {
		res.History = make([]*a2a1.Message, len(t.History))
		for i, m := range t.History {
			res.History[i] = toV1Message(m)
		}
	}
	return res, nil
}

func toV1Message(m *a2a03.Message) *a2a1.Message {
	if m == nil {
		return nil
	}
	var refs []a2a1.TaskID
	if m.ReferenceTasks != nil {
		refs = make([]a2a1.TaskID, len(m.ReferenceTasks))
		for i, id := range m.ReferenceTasks {
			refs[i] = a2a1.TaskID(id)
		}
	}
	return &a2a1.Message{
		ID:             m.ID,
		ContextID:      m.ContextID,
		Extensions:     m.Extensions,
		Metadata:       m.Metadata,
		Parts:          toV1Parts(m.Parts),
		ReferenceTasks: refs,
		Role:           toV1Role(m.Role),
		TaskID:         a2a1.TaskID(m.TaskID),
	}
}

func toV1Artifact(a *a2a03.Artifact) *a2a1.Artifact {
	if a == nil {
		return nil
	}
	return &a2a1.Artifact{
		ID:          a2a1.ArtifactID(a.ID),
		Description: a.Description,
		Extensions:  a.Extensions,
		Metadata:    a.Metadata,
		Name:        a.Name,
		Parts:       toV1Parts(a.Parts),
	}
}

func toV1Parts(parts a2a03.ContentParts) a2a1.ContentParts {
	if len(parts) == 0 {
		return nil
	}
	res := make(a2a1.ContentParts, len(parts))
	for i, p := range parts {
		res[i] = toV1Part(p)
	}
	return res
}

// toV1Part is a2av0.ToV1Part: file bytes that are not base64 are kept as
// they are (a2av0 logs a warning), a part of an unknown kind becomes data.
func toV1Part(p a2a03.Part) *a2a1.Part {
	switch c := p.(type) {
	case a2a03.TextPart:
		return &a2a1.Part{Content: a2a1.Text(c.Text), Metadata: c.Metadata}
	case a2a03.DataPart:
		var val any = c.Data
		metadata := maps.Clone(c.Metadata)
		if compat, ok := metadata["data_part_compat"].(bool); ok && compat {
			val = c.Data["value"]
			delete(metadata, "data_part_compat")
		}
		return &a2a1.Part{Content: a2a1.Data{Value: val}, Metadata: metadata}
	case a2a03.FilePart:
		switch f := c.File.(type) {
		case a2a03.FileBytes:
			b, err := base64.StdEncoding.DecodeString(f.Bytes)
			if err != nil {
				b = []byte(f.Bytes)
			}
			return &a2a1.Part{Content: a2a1.Raw(b), Metadata: c.Metadata, MediaType: f.MimeType, Filename: f.Name}
		case a2a03.FileURI:
			return &a2a1.Part{Content: a2a1.URL(f.URI), Metadata: c.Metadata, MediaType: f.MimeType, Filename: f.Name}
		default:
			return &a2a1.Part{Content: a2a1.Data{Value: f}, Metadata: c.Metadata}
		}
	case nil:
		return nil
	default:
		return &a2a1.Part{Content: a2a1.Data{Value: c}, Metadata: p.Meta()}
	}
}

func fromV1Message(m *a2a1.Message) *a2a03.Message {
	if m == nil {
		return nil
	}
	var refs []a2a03.TaskID
	if m.ReferenceTasks != nil {
		refs = make([]a2a03.TaskID, len(m.ReferenceTasks))
		for i, id := range m.ReferenceTasks {
			refs[i] = a2a03.TaskID(id)
		}
	}
	var parts a2a03.ContentParts
	if len(m.Parts) > 0 {
		parts = make(a2a03.ContentParts, len(m.Parts))
		for i, p := range m.Parts {
			parts[i] = fromV1Part(p)
		}
	}
	return &a2a03.Message{
		ID:             m.ID,
		ContextID:      m.ContextID,
		Extensions:     m.Extensions,
		Metadata:       m.Metadata,
		Parts:          parts,
		ReferenceTasks: refs,
		Role:           fromV1Role(m.Role),
		TaskID:         a2a03.TaskID(m.TaskID),
	}
}

// fromV1Part is a2av0.FromV1Part: data that is not an object travels
// wrapped as {"value": …} with metadata data_part_compat, which
// toV1Part unwraps.
func fromV1Part(p *a2a1.Part) a2a03.Part {
	switch c := p.Content.(type) {
	case a2a1.Text:
		return a2a03.TextPart{Text: string(c), Metadata: p.Metadata}
	case a2a1.Data:
		val := c.Value
		metadata := maps.Clone(p.Metadata)
		obj, ok := val.(map[string]any)
		if !ok {
			obj = map[string]any{"value": val}
			if metadata == nil {
				metadata = make(map[string]any)
			}
			metadata["data_part_compat"] = true
		}
		return a2a03.DataPart{Data: obj, Metadata: metadata}
	case a2a1.Raw:
		return a2a03.FilePart{
			File:     a2a03.FileBytes{FileMeta: a2a03.FileMeta{MimeType: p.MediaType, Name: p.Filename}, Bytes: base64.StdEncoding.EncodeToString(c)},
			Metadata: p.Metadata,
		}
	case a2a1.URL:
		return a2a03.FilePart{
			File:     a2a03.FileURI{FileMeta: a2a03.FileMeta{MimeType: p.MediaType, Name: p.Filename}, URI: string(c)},
			Metadata: p.Metadata,
		}
	default:
		return a2a03.DataPart{Data: map[string]any{"value": p}, Metadata: p.Metadata}
	}
}

func fromV1SendMessageRequest(req *a2a1.SendMessageRequest) *a2a03.MessageSendParams {
	res := &a2a03.MessageSendParams{Message: fromV1Message(req.Message), Metadata: req.Metadata}
	if c := req.Config; c != nil {
		blocking := !c.ReturnImmediately
		res.Config = &a2a03.MessageSendConfig{
			AcceptedOutputModes: c.AcceptedOutputModes,
			HistoryLength:       c.HistoryLength,
			Blocking:            &blocking,
		}
		if pc := c.PushConfig; pc != nil {
			res.Config.PushConfig = &a2a03.PushConfig{ID: pc.ID, Token: pc.Token, URL: pc.URL}
			if pc.Auth != nil {
				res.Config.PushConfig.Auth = &a2a03.PushAuthInfo{Credentials: pc.Auth.Credentials, Schemes: []string{pc.Auth.Scheme}}
			}
		}
	}
	return res
}
