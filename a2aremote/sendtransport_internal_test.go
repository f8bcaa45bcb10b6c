package a2aremote

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
)

// What a hostile or broken remote answers to SendMessage is a clear error,
// never a panic or a half result; the request carries the service
// parameters (A2A-Version) and is a JSON-RPC SendMessage.
func TestSendTransportBadAnswers(t *testing.T) {
	task := `{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_COMPLETED"}}`
	msg := `{"messageId":"m1","role":"ROLE_AGENT","parts":[{"text":"hello"}]}`
	cases := []struct {
		name, body string
		status     int
		want       string // in the error; "" = success
		kind       error  // the A2A error kind, for JSON-RPC errors
	}{
		{"task", `{"jsonrpc":"2.0","id":"1","result":{"task":` + task + `}}`, 200, "", nil},
		{"message", `{"jsonrpc":"2.0","id":"1","result":{"message":` + msg + `}}`, 200, "", nil},
		{"rpc error", `{"jsonrpc":"2.0","id":"1","error":{"code":-32001,"message":"no task t9"}}`, 200, "no task t9", a2a1.ErrTaskNotFound},
		{"rpc error version", `{"jsonrpc":"2.0","id":"1","error":{"code":-32009,"message":"1.0 only","data":{"not":"a list"}}}`, 200, "1.0 only", a2a1.ErrVersionNotSupported},
		{"rpc error no message", `{"jsonrpc":"2.0","id":"1","error":{"code":-32004}}`, 200, a2a1.ErrUnsupportedOperation.Error(), a2a1.ErrUnsupportedOperation},
		{"rpc error other code", `{"jsonrpc":"2.0","id":"1","error":{"code":12,"message":"odd"}}`, 200, "odd", a2a1.ErrInternalError},
		{"both", `{"jsonrpc":"2.0","id":"1","result":{"task":` + task + `,"message":` + msg + `}}`, 200, "exactly one of task and message", nil},
		{"neither", `{"jsonrpc":"2.0","id":"1","result":{}}`, 200, "exactly one of task and message", nil},
		{"no result", `{"jsonrpc":"2.0","id":"1"}`, 200, "neither a result nor an error", nil},
		{"not json", `<html>oops</html>`, 200, "not a JSON-RPC response", nil},
		{"truncated", `{"jsonrpc":"2.0","id":"1","result":{"task":{"id":"t1"`, 200, "not a JSON-RPC response", nil},
		{"status", `{}`, http.StatusBadGateway, "unexpected HTTP status 502", nil},
		{"too large", `{"jsonrpc":"2.0","id":"1","result":{"message":` + strings.Replace(msg, "hello", strings.Repeat("x", 2048), 1) + `}}`, 200, ErrResponseTooLarge.Error(), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var version, method string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				version = r.Header.Get("A2A-Version")
				var req struct{ JSONRPC, Method string }
				if json.NewDecoder(r.Body).Decode(&req) == nil && req.JSONRPC == "2.0" {
					method = req.Method
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(c.status)
				_, _ = w.Write([]byte(c.body))
			}))
			defer srv.Close()
			hc := newHTTPClient(AgentConfig{Name: "x", URL: srv.URL, MaxResponseBytes: 1024}, http.DefaultTransport, nil)
			tr := newSendTransport(srv.URL, hc)
			res, err := tr.SendMessage(context.Background(), a2aclient.ServiceParams{"A2A-Version": {"1.0"}},
				&a2a1.SendMessageRequest{Message: a2a1.NewMessage(a2a1.MessageRoleUser, a2a1.NewTextPart("hi"))})
			if version != "1.0" || method != "SendMessage" {
				t.Errorf("request: A2A-Version %q, method %q", version, method)
			}
			if c.want == "" {
				if err != nil || res == nil {
					t.Fatalf("got %v, %v", res, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, %v; want an error with %q", res, err, c.want)
			}
			if c.kind != nil {
				var ae *a2a1.Error
				if !errors.Is(err, c.kind) || !errors.As(err, &ae) || err.Error() != c.want {
					t.Errorf("%v (%T): want an *a2a1.Error %q of kind %v, as a2aclient answers", err, err, c.want, c.kind)
				}
			}
			if c.name == "too large" && !errors.Is(err, ErrResponseTooLarge) {
				t.Errorf("%v is not ErrResponseTooLarge", err)
			}
		})
	}
}
