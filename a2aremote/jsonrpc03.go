package a2aremote

// The A2A 0.3 JSON-RPC transport (transport03.go has what both 0.3
// bindings share).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"sync/atomic"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/axocoatl/axocoatl-go/internal/a2awire"
)

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
	hr, err := newRPCRequest(ctx, t.url, &t.ids, method, params)
	if err != nil {
		return nil, err
	}
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
	return fmt.Errorf("%w: %w", statusErr, answer.Error.Err1())
}

// rpcAnswer03 is a JSON-RPC response of A2A 0.3.
type rpcAnswer03 struct {
	Result json.RawMessage `json:"result"`
	Error  *a2awire.Error  `json:"error"`
}

func (a *rpcAnswer03) result() (json.RawMessage, error) {
	switch {
	case a.Error != nil:
		return nil, a.Error.Err1()
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
	data, err := readBody(resp)
	if err != nil {
		return nil, err
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
	return a2awire.Event1(ev)
}

// task03 reads a 0.3 task as the 1.0 task.
func task03(data json.RawMessage) (*a2a1.Task, error) {
	var t a2a03.Task
	if err := json.Unmarshal(data, &t); err != nil {
		return nil, fmt.Errorf("the result is not an A2A 0.3 task: %w", err)
	}
	return a2awire.Task1(&t)
}

// SendMessage implements a2aclient.Transport (message/send).
func (t *jsonrpc03) SendMessage(ctx context.Context, sp a2aclient.ServiceParams, req *a2a1.SendMessageRequest) (a2a1.SendMessageResult, error) {
	result, err := t.call(ctx, a2awire.Method03Send, sp, a2awire.SendParams03(req))
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
		resp, err := t.post(ctx, a2awire.Method03Stream, sp, a2awire.SendParams03(req), true)
		if err != nil {
			yield(nil, err)
			return
		}
		defer resp.Body.Close()
		if jsonBody(resp) {
			// Not a stream but one JSON-RPC response: @a2a-js/sdk answers
			// so (as application/a2a+json) when the call fails before the
			// first event (its "pre-stream error", status 200).
			data, err := readBody(resp)
			if err != nil {
				yield(nil, err)
				return
			}
			yield(streamEvent03(data, "the answer"))
			return
		}
		for data, err := range a2awire.Events(resp.Body, t.lineLimit, ErrResponseTooLarge) {
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
	result, err := t.call(ctx, a2awire.Method03GetTask, sp, &a2a03.TaskQueryParams{ID: a2a03.TaskID(req.ID), HistoryLength: req.HistoryLength})
	if err != nil {
		return nil, err
	}
	return task03(result)
}

// CancelTask implements a2aclient.Transport (tasks/cancel).
func (t *jsonrpc03) CancelTask(ctx context.Context, sp a2aclient.ServiceParams, req *a2a1.CancelTaskRequest) (*a2a1.Task, error) {
	result, err := t.call(ctx, a2awire.Method03CancelTask, sp, &a2a03.TaskIDParams{ID: a2a03.TaskID(req.ID), Metadata: req.Metadata})
	if err != nil {
		return nil, err
	}
	return task03(result)
}
