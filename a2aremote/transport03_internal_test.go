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
	"github.com/a2aproject/a2a-go/v2/a2aclient"
)

// answer03 is a remote that answers every request with status, content
// type and body, recording the last request's method, path and body.
type answer03 struct {
	status      int
	contentType string
	body        string
	got         string // "METHOD path body" of the last request
}

func (a *answer03) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var b strings.Builder
	_, _ = fmt.Fprintf(&b, "%s %s ", r.Method, r.URL.Path)
	buf := make([]byte, 4096)
	n, _ := r.Body.Read(buf)
	b.Write(buf[:n])
	a.got = b.String()
	w.Header().Set("Content-Type", a.contentType)
	w.WriteHeader(a.status)
	_, _ = w.Write([]byte(a.body))
}

// transport03 is the module's 0.3 transport of binding for srv, over the
// module's HTTP client with max_response_bytes 2048.
func transport03(t *testing.T, binding a2a1.TransportProtocol, srv *httptest.Server) a2aclient.Transport {
	t.Helper()
	hc := newHTTPClient(AgentConfig{Name: "r", URL: srv.URL, MaxResponseBytes: 2048}, srv.Client().Transport, nil)
	tr, err := newTransport03(binding, srv.URL, hc)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// call03 makes one call of kind (send, stream, get, cancel) and returns
// the result's kind and text, or the error.
func call03(tr a2aclient.Transport, kind string) (string, error) {
	ctx := context.Background()
	msg := a2a1.NewMessage(a2a1.MessageRoleUser, a2a1.NewTextPart("hi"), a2a1.NewDataPart(7), a2a1.NewRawPart([]byte{1, 2}))
	req := &a2a1.SendMessageRequest{Message: msg, Config: &a2a1.SendMessageConfig{}}
	describe := func(ev a2a1.Event) string {
		switch e := ev.(type) {
		case *a2a1.Task:
			return fmt.Sprintf("task %s %s", e.ID, e.Status.State)
		case *a2a1.Message:
			var text []string
			for _, p := range e.Parts {
				switch c := p.Content.(type) {
				case a2a1.Text:
					text = append(text, string(c))
				case a2a1.Raw:
					text = append(text, fmt.Sprintf("raw %q %s", []byte(c), p.MediaType))
				case a2a1.URL:
					text = append(text, "url "+string(c))
				case a2a1.Data:
					text = append(text, fmt.Sprintf("data %v", c.Value))
				}
			}
			return fmt.Sprintf("message %s %s", e.Role, strings.Join(text, ", "))
		case *a2a1.TaskStatusUpdateEvent:
			return fmt.Sprintf("status %s %s", e.TaskID, e.Status.State)
		case *a2a1.TaskArtifactUpdateEvent:
			return fmt.Sprintf("artifact %s %s", e.TaskID, e.Artifact.Parts[0].Text())
		}
		return fmt.Sprintf("%T", ev)
	}
	switch kind {
	case "send":
		res, err := tr.SendMessage(ctx, nil, req)
		if err != nil {
			return "", err
		}
		return describe(res), nil
	case "stream":
		var got []string
		for ev, err := range tr.SendStreamingMessage(ctx, nil, req) {
			if err != nil {
				return strings.Join(got, "; "), err
			}
			got = append(got, describe(ev))
		}
		return strings.Join(got, "; "), nil
	case "get":
		task, err := tr.GetTask(ctx, nil, &a2a1.GetTaskRequest{ID: "t1"})
		if err != nil {
			return "", err
		}
		return describe(task), nil
	default:
		task, err := tr.CancelTask(ctx, nil, &a2a1.CancelTaskRequest{ID: "t1"})
		if err != nil {
			return "", err
		}
		return describe(task), nil
	}
}

func rpc03(result string) string { return `{"jsonrpc":"2.0","id":"1","result":` + result + `}` }
func sse03(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		b.WriteString("id: x\ndata: " + e + "\n\n")
	}
	return b.String()
}

// What a 0.3 remote answers, good, broken or too large, over JSON-RPC and
// HTTP+JSON: the 1.0 result a2av0 would give, or a clear error (never a
// panic); the request is the 0.3 method or path with the 0.3 body.
func TestTransports03Answers(t *testing.T) {
	task03 := `{"kind":"task","id":"t1","contextId":"c1","status":{"state":"completed"}}`
	msg03 := `{"kind":"message","messageId":"m1","role":"agent","parts":[{"kind":"text","text":"hello"},{"kind":"file","file":{"bytes":"AQI=","mimeType":"application/x"}},{"kind":"file","file":{"uri":"https://f.example/a"}},{"kind":"data","data":{"value":3},"metadata":{"data_part_compat":true}}]}`
	taskPB := `{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_COMPLETED"}}`
	big := strings.Repeat("x", 4096)
	cases := []struct {
		name    string
		binding a2a1.TransportProtocol
		kind    string // send, stream, get, cancel
		status  int
		ctype   string
		body    string
		want    string // the result, or a part of the error
		wantErr error  // errors.Is the error
		wantReq string // a part of the request
	}{
		{"rpc send task", "JSONRPC", "send", 200, "application/json", rpc03(task03), "task t1 TASK_STATE_COMPLETED", nil, `"method":"message/send"`},
		{"rpc send message parts", "JSONRPC", "send", 200, "application/json", rpc03(msg03), `message ROLE_AGENT hello, raw "\x01\x02" application/x, url https://f.example/a, data 3`, nil, `{"kind":"data","data":{"value":7},"metadata":{"data_part_compat":true}}`},
		{"rpc send request parts", "JSONRPC", "send", 200, "application/json", rpc03(task03), "task t1", nil, `{"kind":"file","file":{"bytes":"AQI="}}`},
		{"rpc send blocking", "JSONRPC", "send", 200, "application/json", rpc03(task03), "task t1", nil, `"configuration":{"blocking":true}`},
		{"rpc send status event", "JSONRPC", "send", 200, "application/json", rpc03(`{"kind":"status-update","taskId":"t1","contextId":"c1","status":{"state":"working"},"final":false}`), "violates A2A", nil, ""},
		{"rpc send unknown kind", "JSONRPC", "send", 200, "application/json", rpc03(`{"kind":"bogus"}`), "not an A2A 0.3 event", nil, ""},
		{"rpc send bad part", "JSONRPC", "send", 200, "application/json", rpc03(`{"kind":"message","messageId":"m","role":"agent","parts":[{"kind":"hologram"}]}`), "not an A2A 0.3 event", nil, ""},
		{"rpc error", "JSONRPC", "send", 200, "application/json", `{"jsonrpc":"2.0","id":"1","error":{"code":-32001,"message":"no task t9"}}`, "no task t9", a2a1.ErrTaskNotFound, ""},
		{"rpc no result", "JSONRPC", "send", 200, "application/json", `{"jsonrpc":"2.0","id":"1","result":null}`, "neither a result nor an error", nil, ""},
		{"rpc not json", "JSONRPC", "send", 200, "text/html", `<html>oops</html>`, "not a JSON-RPC response", nil, ""},
		{"rpc status", "JSONRPC", "send", 502, "text/plain", `bad gateway`, "unexpected HTTP status 502", nil, ""},
		{"rpc too large", "JSONRPC", "send", 200, "application/json", rpc03(`{"kind":"message","messageId":"m1","role":"agent","parts":[{"kind":"text","text":"` + big + `"}]}`), "more than 2048 bytes", ErrResponseTooLarge, ""},
		{"rpc get", "JSONRPC", "get", 200, "application/json", rpc03(task03), "task t1 TASK_STATE_COMPLETED", nil, `"method":"tasks/get","params":{"id":"t1"}`},
		{"rpc get not a task", "JSONRPC", "get", 200, "application/json", rpc03(`[1,2]`), "not an A2A 0.3 task", nil, ""},
		{"rpc cancel", "JSONRPC", "cancel", 200, "application/json", rpc03(`{"kind":"task","id":"t1","contextId":"c1","status":{"state":"canceled"}}`), "task t1 TASK_STATE_CANCELED", nil, `"method":"tasks/cancel"`},
		{"rpc stream", "JSONRPC", "stream", 200, "text/event-stream", sse03(rpc03(task03), rpc03(`{"kind":"artifact-update","taskId":"t1","contextId":"c1","artifact":{"artifactId":"a","parts":[{"kind":"text","text":"done"}]}}`), rpc03(`{"kind":"status-update","taskId":"t1","contextId":"c1","status":{"state":"completed"},"final":true}`)),
			"task t1 TASK_STATE_COMPLETED; artifact t1 done; status t1 TASK_STATE_COMPLETED", nil, `"method":"message/stream"`},
		{"rpc stream error event", "JSONRPC", "stream", 200, "text/event-stream", sse03(rpc03(task03), `{"jsonrpc":"2.0","id":"1","error":{"code":-32603,"message":"boom"}}`), "boom", a2a1.ErrInternalError, ""},
		{"rpc stream not json", "JSONRPC", "stream", 200, "text/event-stream", sse03(`{{{`), "not a JSON-RPC response", nil, ""},
		{"rpc stream long line", "JSONRPC", "stream", 200, "text/event-stream", "data: " + big + "\n\n", "more than 2048 bytes", ErrResponseTooLarge, ""},
		{"rpc stream long event", "JSONRPC", "stream", 200, "text/event-stream", strings.Repeat("data: "+strings.Repeat("y", 100)+"\n", 30), "more than 2048 bytes", ErrResponseTooLarge, ""},

		{"rest send task", "HTTP+JSON", "send", 200, "application/json", `{"task":` + taskPB + `}`, "task t1 TASK_STATE_COMPLETED", nil, `POST /v1/message:send {"message":{"messageId"`},
		{"rest send message", "HTTP+JSON", "send", 200, "application/json", `{"message":{"messageId":"m1","role":"ROLE_AGENT","content":[{"text":"hello"}]}}`, "message ROLE_AGENT hello", nil, ""},
		{"rest send neither", "HTTP+JSON", "send", 200, "application/json", `{}`, "not an A2A 0.3 SendMessageResponse", nil, ""},
		{"rest send not json", "HTTP+JSON", "send", 200, "application/json", `oops`, "not an A2A 0.3 SendMessageResponse", nil, ""},
		{"rest error", "HTTP+JSON", "send", 404, "application/json", `{"error":{"code":404,"status":"NOT_FOUND","message":"no task t9","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TASK_NOT_FOUND","domain":"a2a-protocol.org"}]}}`, "no task t9", a2a1.ErrTaskNotFound, ""},
		{"rest error other domain", "HTTP+JSON", "send", 400, "application/json", `{"error":{"code":400,"message":"odd","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TASK_NOT_FOUND","domain":"else.example"}]}}`, "odd", a2a1.ErrInternalError, ""},
		{"rest error a2a-js", "HTTP+JSON", "get", 404, "application/json; charset=utf-8", `{"code":-32001,"message":"Task not found: t1"}`, "Task not found: t1", a2a1.ErrTaskNotFound, ""},
		{"rest error problem+json", "HTTP+JSON", "cancel", 400, "application/problem+json", `{"error":{"code":400,"status":"FAILED_PRECONDITION","message":"cannot cancel: task t1 is completed","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TASK_NOT_CANCELABLE","domain":"a2a-protocol.org"}]}}`, "cannot cancel: task t1 is completed", a2a1.ErrTaskNotCancelable, ""},
		{"rest send 201", "HTTP+JSON", "send", 201, "application/json", `{"task":` + taskPB + `}`, "task t1 TASK_STATE_COMPLETED", nil, ""},
		{"rest error empty", "HTTP+JSON", "get", 500, "application/json", `{}`, "HTTP status 500", a2a1.ErrServerError, ""},
		{"rest error html", "HTTP+JSON", "send", 502, "text/html", `<html>`, "HTTP status 502", a2a1.ErrServerError, ""},
		{"rest error bad json", "HTTP+JSON", "send", 500, "application/json", `{"error":`, "error body that is not JSON", a2a1.ErrParseError, ""},
		{"rest too large", "HTTP+JSON", "send", 200, "application/json", `{"message":{"messageId":"m1","role":"ROLE_AGENT","content":[{"text":"` + big + `"}]}}`, "more than 2048 bytes", ErrResponseTooLarge, ""},
		{"rest get", "HTTP+JSON", "get", 200, "application/json", taskPB, "task t1 TASK_STATE_COMPLETED", nil, "GET /v1/tasks/t1 "},
		{"rest get not a task", "HTTP+JSON", "get", 200, "application/json", `"t1"`, "not an A2A 0.3 task", nil, ""},
		{"rest cancel", "HTTP+JSON", "cancel", 200, "application/json", `{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_CANCELLED"}}`, "task t1 TASK_STATE_CANCELED", nil, "POST /v1/tasks/t1:cancel "},
		{"rest stream", "HTTP+JSON", "stream", 200, "text/event-stream", sse03(`{"task":`+taskPB+`}`, `{"statusUpdate":{"taskId":"t1","contextId":"c1","status":{"state":"TASK_STATE_COMPLETED"},"final":true}}`), "task t1 TASK_STATE_COMPLETED; status t1 TASK_STATE_COMPLETED", nil, "POST /v1/message:stream "},
		{"rest stream error event", "HTTP+JSON", "stream", 200, "text/event-stream", sse03(`{"error":{"code":400,"message":"gone","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TASK_NOT_CANCELABLE","domain":"a2a-protocol.org"}]}}`), "gone", a2a1.ErrTaskNotCancelable, ""},
		{"rest stream no event", "HTTP+JSON", "stream", 200, "text/event-stream", sse03(`{}`), "not an A2A 0.3 StreamResponse", nil, ""},
		{"rest stream long line", "HTTP+JSON", "stream", 200, "text/event-stream", "data: " + big + "\n\n", "more than 2048 bytes", ErrResponseTooLarge, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := &answer03{status: c.status, contentType: c.ctype, body: c.body}
			srv := httptest.NewServer(a)
			defer srv.Close()
			got, err := call03(transport03(t, c.binding, srv), c.kind)
			if ok := strings.HasPrefix(c.want, "task ") || strings.HasPrefix(c.want, "message "); !ok {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("got %q, error %v; want an error with %q", got, err, c.want)
				}
				if c.wantErr != nil && !errors.Is(err, c.wantErr) {
					t.Fatalf("error %v is not %v", err, c.wantErr)
				}
			} else if err != nil || !strings.HasPrefix(got, c.want) {
				t.Fatalf("got %q, error %v; want %q", got, err, c.want)
			}
			if !strings.Contains(a.got, c.wantReq) {
				t.Fatalf("request %s, want it to contain %s", a.got, c.wantReq)
			}
		})
	}
}

// The 0.3 transports answer a2a1.ErrUnsupportedOperation for what 0.3 has
// no method for (ListTasks, as a2av0's) and for what this module never
// calls on a 0.3 remote.
func TestTransports03Unsupported(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	for _, b := range []a2a1.TransportProtocol{a2a1.TransportProtocolJSONRPC, a2a1.TransportProtocolHTTPJSON} {
		tr := transport03(t, b, srv)
		ctx := context.Background()
		if _, err := tr.ListTasks(ctx, nil, &a2a1.ListTasksRequest{}); !errors.Is(err, a2a1.ErrUnsupportedOperation) {
			t.Errorf("%s ListTasks: %v", b, err)
		}
		for _, err := range tr.SubscribeToTask(ctx, nil, &a2a1.SubscribeToTaskRequest{ID: "t"}) {
			if !errors.Is(err, a2a1.ErrUnsupportedOperation) {
				t.Errorf("%s SubscribeToTask: %v", b, err)
			}
		}
		if _, err := tr.GetExtendedAgentCard(ctx, nil, &a2a1.GetExtendedAgentCardRequest{}); !errors.Is(err, a2a1.ErrUnsupportedOperation) {
			t.Errorf("%s GetExtendedAgentCard: %v", b, err)
		}
	}
}

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
