package a2aremote

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
)

// A task id is the remote's word (call.go takes it from the answer) and
// reaches the 0.3 HTTP+JSON path of GetTask and CancelTask: it must stay
// one path segment. Unescaped, "../../admin" was resolved by JoinPath to
// another path of the host (the module's headers go with it), '?' and '#'
// cut the path, and "%zz" made JoinPath drop the whole path (the request
// went to the interface's base URL).
func TestREST03TaskIDIsOnePathSegment(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.RequestURI)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_COMPLETED"}}`))
	}))
	defer srv.Close()
	tr := transport03(t, a2a1.TransportProtocolHTTPJSON, srv)
	ctx := context.Background()
	cases := map[string]string{
		"../../admin": "..%2F..%2Fadmin",
		"a/b":         "a%2Fb",
		"x?y=1#z":     "x%3Fy=1%23z",
		"a b":         "a%20b",
		"%zz":         "%25zz",
		"t1":          "t1",
		"ünï":         "%C3%BCn%C3%AF",
	}
	for id, esc := range cases {
		mu.Lock()
		got = got[:0]
		mu.Unlock()
		if _, err := tr.GetTask(ctx, nil, &a2a1.GetTaskRequest{ID: a2a1.TaskID(id)}); err != nil {
			t.Errorf("GetTask %q: %v", id, err)
		}
		if _, err := tr.CancelTask(ctx, nil, &a2a1.CancelTaskRequest{ID: a2a1.TaskID(id)}); err != nil {
			t.Errorf("CancelTask %q: %v", id, err)
		}
		mu.Lock()
		want := []string{"GET /v1/tasks/" + esc, "POST /v1/tasks/" + esc + ":cancel"}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("task id %q: requests %q, want %q", id, got, want)
		}
		mu.Unlock()
	}
	mu.Lock()
	got = got[:0]
	mu.Unlock()
	for _, id := range []string{"", ".", ".."} {
		if _, err := tr.GetTask(ctx, nil, &a2a1.GetTaskRequest{ID: a2a1.TaskID(id)}); err == nil || !strings.Contains(err.Error(), "task id") {
			t.Errorf("GetTask %q: %v, want an error naming the task id", id, err)
		}
		if _, err := tr.CancelTask(ctx, nil, &a2a1.CancelTaskRequest{ID: a2a1.TaskID(id)}); err == nil || !strings.Contains(err.Error(), "task id") {
			t.Errorf("CancelTask %q: %v, want an error naming the task id", id, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 0 {
		t.Errorf("requests for an id that is no path segment: %q", got)
	}
}

// @a2a-js/sdk's JSON-RPC handler (0.3 and 1.0, dist/server/express
// index.js: "Pre-stream error") answers a message/stream that fails
// before its first event with one JSON-RPC response, status 200,
// application/a2a+json, not SSE. The stream read no data: line from it and
// ended empty: the remote's error was lost and the call said only that
// the answer ended before the task did.
func TestJSONRPC03StreamAnsweredWithJSON(t *testing.T) {
	for _, c := range []struct {
		body, want string
		kind       error
	}{
		{`{"jsonrpc":"2.0","id":"1","error":{"code":-32001,"message":"Task not found: t9"}}`, "Task not found: t9", a2a1.ErrTaskNotFound},
		{`{"jsonrpc":"2.0","id":"1","result":{"kind":"task","id":"t1","contextId":"c1","status":{"state":"completed"}}}`, "task t1 TASK_STATE_COMPLETED", nil},
	} {
		srv := httptest.NewServer(&answer03{status: http.StatusOK, contentType: "application/a2a+json; charset=utf-8", body: c.body})
		got, err := call03(transport03(t, a2a1.TransportProtocolJSONRPC, srv), "stream")
		srv.Close()
		if c.kind != nil {
			if !errors.Is(err, c.kind) || !strings.Contains(fmt.Sprint(err), c.want) {
				t.Errorf("%s: got %q, %v; want an error %v with %q", c.body, got, err, c.kind, c.want)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: got %q, %v; want %q", c.body, got, err, c.want)
		}
	}
}

// @a2a-js/sdk's 0.3 HTTP+JSON layer ends a stream that fails after its
// first event with "event: error" and a JSON-RPC error object as data
// ({"code": -32001, "message": …}, its toLegacyHTTPError), not a
// google.rpc.Status under "error": it was read as a malformed
// StreamResponse, losing the error's kind and message.
func TestREST03StreamErrorEventOfA2AJS(t *testing.T) {
	body := "data: {\"task\":{\"id\":\"t1\",\"contextId\":\"c1\",\"status\":{\"state\":\"TASK_STATE_WORKING\"}}}\n\n" +
		"event: error\ndata: {\"code\":-32001,\"message\":\"Task not found: t1\"}\n\n"
	srv := httptest.NewServer(&answer03{status: http.StatusOK, contentType: "text/event-stream", body: body})
	defer srv.Close()
	got, err := call03(transport03(t, a2a1.TransportProtocolHTTPJSON, srv), "stream")
	if got != "task t1 TASK_STATE_WORKING" || !errors.Is(err, a2a1.ErrTaskNotFound) || !strings.Contains(fmt.Sprint(err), "Task not found: t1") {
		t.Fatalf("got %q, %v; want the task, then a2a1.ErrTaskNotFound with the remote's message", got, err)
	}
}

// @a2a-js/sdk's JSON-RPC handler answers an internal error with status
// 500 and the JSON-RPC response ({"error": {"code": -32603, "message":
// …}}): the 0.3 transport said only "unexpected HTTP status 500",
// dropping the remote's message, on every method including message/stream.
func TestJSONRPC03ErrorStatusWithJSONRPCBody(t *testing.T) {
	body := `{"jsonrpc":"2.0","id":"1","error":{"code":-32603,"message":"executor exploded"}}`
	for _, kind := range []string{"send", "stream", "get", "cancel"} {
		srv := httptest.NewServer(&answer03{status: http.StatusInternalServerError, contentType: "application/json", body: body})
		_, err := call03(transport03(t, a2a1.TransportProtocolJSONRPC, srv), kind)
		srv.Close()
		if !errors.Is(err, a2a1.ErrInternalError) || !strings.Contains(fmt.Sprint(err), "executor exploded") || !strings.Contains(fmt.Sprint(err), "500") {
			t.Errorf("%s: %v; want a2a1.ErrInternalError with the status and the remote's message", kind, err)
		}
	}
	// A body that is no JSON-RPC error keeps the status error.
	srv := httptest.NewServer(&answer03{status: http.StatusBadGateway, contentType: "application/json", body: `{"oops":1}`})
	defer srv.Close()
	if _, err := call03(transport03(t, a2a1.TransportProtocolJSONRPC, srv), "send"); err == nil || !strings.Contains(err.Error(), "unexpected HTTP status 502") {
		t.Errorf("502 with other JSON: %v", err)
	}
}

// A card is the remote's word, read by the module's own goroutine (no
// tool call's recover around it): a null where an interface, a skill or a
// security scheme goes must be a precise error or skipped, never a nil
// dereference, which ended the process ("supportedInterfaces":[null]).
func TestHostileCardNulls(t *testing.T) {
	for body, want := range map[string]string{
		`{"name":"n","supportedInterfaces":[null]}`: "agent card names a null interface",
		`{"name":"n","supportedInterfaces":[{"url":"http://h/a2a","protocolBinding":"JSONRPC","protocolVersion":"1.0"},null]}`:        "agent card names a null interface",
		`{"name":"n","url":"http://h/a2a","preferredTransport":"JSONRPC","additionalInterfaces":[null]}`:                              `interface URL "" is not an absolute http or https URL`,
		`{"name":"n","url":"http://h/a2a","skills":[null,{"id":"s","name":"s","security":[null]}],"security":[null],"provider":null}`: "",
	} {
		srv := httptest.NewServer(&answer03{status: http.StatusOK, contentType: "application/json", body: body})
		card, err := fetchCard(context.Background(), srv.Client(), srv.URL)
		srv.Close()
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", body, err)
		case want == "":
			_ = Generation(card)
			_ = describeCard(card)
		case err == nil || !strings.Contains(err.Error(), want):
			t.Errorf("%s: %v, want an error with %q", body, err, want)
		}
	}
}

// sseData's line bound holds below 4 KiB too: bufio.Scanner takes the
// larger of its buffer's capacity (4096) and the limit as its bound, so a
// 4,000-byte comment line passed a limit of 100.
func TestSSEDataLineBoundBelowBuffer(t *testing.T) {
	body := ": " + strings.Repeat("c", 4000) + "\n\ndata: x\n\n"
	var got []string
	var err error
	for data, e := range sseData(strings.NewReader(body), 100) {
		if e != nil {
			err = e
			break
		}
		got = append(got, string(data))
	}
	if !errors.Is(err, ErrResponseTooLarge) || len(got) != 0 {
		t.Fatalf("events %q, error %v; want ErrResponseTooLarge at the 4,002-byte line", got, err)
	}
}

// A stream that never ends is ended by the caller's context: the
// iteration returns promptly with the context's error and the remote sees
// the request end (the body is closed), over both 0.3 bindings.
func TestStream03EndsWithContext(t *testing.T) {
	for _, c := range []struct {
		binding a2a1.TransportProtocol
		event   string
	}{
		{a2a1.TransportProtocolJSONRPC, `{"jsonrpc":"2.0","id":"1","result":{"kind":"status-update","taskId":"t1","contextId":"c1","status":{"state":"working"},"final":false}}`},
		{a2a1.TransportProtocolHTTPJSON, `{"statusUpdate":{"taskId":"t1","contextId":"c1","status":{"state":"TASK_STATE_WORKING"}}}`},
	} {
		ended := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer close(ended)
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = fmt.Fprintf(w, "data: %s\n\n", c.event)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}))
		tr := transport03(t, c.binding, srv)
		ctx, cancel := context.WithCancel(context.Background())
		var events int
		var err error
		done := make(chan struct{})
		go func() {
			defer close(done)
			for ev, e := range tr.SendStreamingMessage(ctx, nil, &a2a1.SendMessageRequest{Message: a2a1.NewMessage(a2a1.MessageRoleUser, a2a1.NewTextPart("x"))}) {
				if e != nil {
					err = e
					continue
				}
				if ev != nil {
					events++
					cancel()
				}
			}
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the stream did not end 5 s after its context", c.binding)
		}
		select {
		case <-ended:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the remote did not see the request end", c.binding)
		}
		srv.Close()
		cancel()
		if events != 1 || !errors.Is(err, context.Canceled) {
			t.Errorf("%s: %d events, error %v; want 1, then context.Canceled", c.binding, events, err)
		}
	}
}
