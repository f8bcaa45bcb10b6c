package a2aremote

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
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
	}{
		{"task", `{"jsonrpc":"2.0","id":"1","result":{"task":` + task + `}}`, 200, ""},
		{"message", `{"jsonrpc":"2.0","id":"1","result":{"message":` + msg + `}}`, 200, ""},
		{"rpc error", `{"jsonrpc":"2.0","id":"1","error":{"code":-32001,"message":"Task not found"}}`, 200, "JSON-RPC error -32001: Task not found"},
		{"both", `{"jsonrpc":"2.0","id":"1","result":{"task":` + task + `,"message":` + msg + `}}`, 200, "exactly one of task and message"},
		{"neither", `{"jsonrpc":"2.0","id":"1","result":{}}`, 200, "exactly one of task and message"},
		{"no result", `{"jsonrpc":"2.0","id":"1"}`, 200, "neither a result nor an error"},
		{"not json", `<html>oops</html>`, 200, "not a JSON-RPC response"},
		{"truncated", `{"jsonrpc":"2.0","id":"1","result":{"task":{"id":"t1"`, 200, "not a JSON-RPC response"},
		{"status", `{}`, http.StatusBadGateway, "unexpected HTTP status 502"},
		{"too large", `{"jsonrpc":"2.0","id":"1","result":{"message":` + strings.Replace(msg, "hello", strings.Repeat("x", 2048), 1) + `}}`, 200, ErrResponseTooLarge.Error()},
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
			hc := newHTTPClient(AgentConfig{Name: "x", URL: srv.URL, MaxResponseBytes: 1024}, http.DefaultTransport)
			tr := newSendTransport(srv.URL, hc)
			res, err := tr.SendMessage(context.Background(), a2aclient.ServiceParams{"A2A-Version": {"1.0"}},
				&a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))})
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
			if c.name == "too large" && !errors.Is(err, ErrResponseTooLarge) {
				t.Errorf("%v is not ErrResponseTooLarge", err)
			}
		})
	}
}
