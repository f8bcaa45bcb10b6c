package a2a_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
	v1card "github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/a2a"
	"github.com/axocoatl/axocoatl-go/secret"
)

// do sends a request with any method and returns the status and body.
func do(t testing.TB, f *fixture, method, path, body string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	must(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := f.client.Do(req)
	must(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(t, err)
	return resp.StatusCode, string(b)
}

const v1SendBody = `{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"ping"}]}}`

// Bad 1.0 input gets a precise error, on JSON-RPC (code, the detail in the
// message, the reason in data) and on REST (status, reason, message).
//
// Guards: bound "`ListTasks` page" (a2a server) (docs/bounds.md).
func TestV1WireErrors(t *testing.T) {
	f := newFixture(t, a2a.Config{MaxBodyBytes: 64 << 10})
	rpcCases := []struct {
		name, body string
		code       int
		reason     string
		msg        string
	}{
		{"0.3 role", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"user","parts":[{"text":"x"}]}}}`,
			-32602, "INVALID_PARAMS", `"user" is not an A2A 1.0 role: use ROLE_USER`},
		{"0.3 part", `{"jsonrpc":"2.0","id":2,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"kind":"file"}]}}}`,
			-32602, "INVALID_PARAMS", "unknown part content type"},
		{"two contents", `{"jsonrpc":"2.0","id":3,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x","url":"http://e"}]}}}`,
			-32602, "INVALID_PARAMS", "exactly one of text, raw, data, or url"},
		{"no message", `{"jsonrpc":"2.0","id":4,"method":"SendMessage","params":{}}`, -32602, "INVALID_PARAMS", "message is required"},
		{"no parts", `{"jsonrpc":"2.0","id":5,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[]}}}`,
			-32602, "INVALID_PARAMS", "parts must not be empty"},
		{"push config", `{"jsonrpc":"2.0","id":6,"method":"SendMessage","params":{"configuration":{"taskPushNotificationConfig":{"url":"http://e"}},"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]}}}`,
			-32003, "PUSH_NOTIFICATION_NOT_SUPPORTED", "push notification not supported"},
		{"image only", `{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"configuration":{"acceptedOutputModes":["image/png"]},"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]}}}`,
			-32005, "CONTENT_TYPE_NOT_SUPPORTED", "excludes it"},
		{"page too big", `{"jsonrpc":"2.0","id":8,"method":"ListTasks","params":{"pageSize":500}}`, -32602, "INVALID_PARAMS", "pageSize 500 is out of range 1..100"},
		{"bad page token", `{"jsonrpc":"2.0","id":9,"method":"ListTasks","params":{"pageToken":"zz"}}`, -32602, "INVALID_PARAMS", `pageToken "zz"`},
		{"bad status", `{"jsonrpc":"2.0","id":10,"method":"ListTasks","params":{"status":"done"}}`, -32602, "INVALID_PARAMS", `status "done"`},
		{"unknown task", `{"jsonrpc":"2.0","id":11,"method":"GetTask","params":{"id":"nope"}}`, -32001, "TASK_NOT_FOUND", `task not found: task "nope"`},
		{"push method", `{"jsonrpc":"2.0","id":12,"method":"CreateTaskPushNotificationConfig","params":{}}`, -32003, "PUSH_NOTIFICATION_NOT_SUPPORTED", "no push notifications"},
		{"extended card", `{"jsonrpc":"2.0","id":13,"method":"GetExtendedAgentCard"}`, -32007, "EXTENDED_AGENT_CARD_NOT_CONFIGURED", "no extended card"},
		{"params not an object", `{"jsonrpc":"2.0","id":14,"method":"GetTask","params":[1]}`, -32602, "INVALID_PARAMS", "cannot unmarshal array"},
		{"oversized", `{"jsonrpc":"2.0","id":15,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"` +
			strings.Repeat("a", 70<<10) + `"}]}}}`, -32600, "INVALID_REQUEST", "request body exceeds 65536 bytes"},
	}
	for _, tc := range rpcCases {
		t.Run("jsonrpc/"+tc.name, func(t *testing.T) {
			status, out := post(t, f, "/a2a", tc.body, "A2A-Version", "1.0")
			if status != http.StatusOK {
				t.Fatalf("HTTP %d: %s", status, out)
			}
			r := decodeReply(t, out)
			if r.Error == nil || r.Error.Code != tc.code || !strings.Contains(r.Error.Message, tc.msg) ||
				!strings.Contains(string(r.Error.Data), `"reason":"`+tc.reason+`","domain":"a2a-protocol.org"`) {
				t.Fatalf("want %d %s %q, got %s", tc.code, tc.reason, tc.msg, cutOut(out))
			}
		})
	}

	restCases := []struct {
		name, method, path, body string
		header                   []string
		status                   int
		reason, msg              string
	}{
		{"version 9.9", "POST", "/a2a/message:send", v1SendBody, []string{"A2A-Version", "9.9"}, 400, "VERSION_NOT_SUPPORTED", `"9.9"; supported versions: 1.0, 0.3`},
		{"version 0.3", "GET", "/a2a/tasks", "", []string{"A2A-Version", "0.3"}, 400, "VERSION_NOT_SUPPORTED", "exists only in A2A 1.0"},
		{"not JSON", "POST", "/a2a/message:send", `{"message":`, nil, 400, "PARSE_ERROR", "not valid JSON"},
		{"empty body", "POST", "/a2a/message:send", ``, nil, 400, "INVALID_REQUEST", "must be a SendMessageRequest"},
		{"0.3 role", "POST", "/a2a/message:send", `{"message":{"messageId":"m","role":"user","parts":[{"text":"x"}]}}`, nil, 400, "INVALID_PARAMS", "use ROLE_USER"},
		{"unknown task", "GET", "/a2a/tasks/nope", "", nil, 404, "TASK_NOT_FOUND", `task "nope"`},
		{"cancel unknown", "POST", "/a2a/tasks/nope:cancel", "", nil, 404, "TASK_NOT_FOUND", `task "nope"`},
		{"unknown action", "POST", "/a2a/tasks/nope:frob", "", nil, 501, "METHOD_NOT_FOUND", "use GET tasks/{id}"},
		{"bad historyLength", "GET", "/a2a/tasks/nope?historyLength=x", "", nil, 400, "INVALID_PARAMS", `historyLength "x" is not an integer`},
		{"bad pageSize", "GET", "/a2a/tasks?pageSize=0", "", nil, 400, "INVALID_PARAMS", "pageSize 0 is out of range"},
		{"bad timestamp", "GET", "/a2a/tasks?statusTimestampAfter=yesterday", "", nil, 400, "INVALID_PARAMS", "not an RFC 3339 time"},
		{"push configs", "POST", "/a2a/tasks/x/pushNotificationConfigs", "{}", nil, 400, "PUSH_NOTIFICATION_NOT_SUPPORTED", "no push notifications"},
		{"extended card", "GET", "/a2a/extendedAgentCard", "", nil, 400, "EXTENDED_AGENT_CARD_NOT_CONFIGURED", "no extended card"},
		{"unknown agent", "POST", "/a2a/agents/nobody/message:send", v1SendBody, nil, 400, "INVALID_PARAMS", `no agent "nobody"`},
		{"oversized", "POST", "/a2a/message:send", `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"` + strings.Repeat("a", 70<<10) + `"}]}}`,
			nil, 413, "INVALID_REQUEST", "request body exceeds 65536 bytes"},
	}
	for _, tc := range restCases {
		t.Run("rest/"+tc.name, func(t *testing.T) {
			status, out := do(t, f, tc.method, tc.path, tc.body, tc.header...)
			var e struct {
				Error struct {
					Code    int    `json:"code"`
					Status  string `json:"status"`
					Message string `json:"message"`
					Details []struct {
						Type   string `json:"@type"`
						Reason string `json:"reason"`
						Domain string `json:"domain"`
					} `json:"details"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(out), &e); err != nil {
				t.Fatalf("HTTP %d, body not JSON: %s", status, cutOut(out))
			}
			d := e.Error.Details
			if status != tc.status || len(d) != 1 || d[0].Reason != tc.reason || d[0].Domain != "a2a-protocol.org" ||
				d[0].Type != "type.googleapis.com/google.rpc.ErrorInfo" || !strings.Contains(e.Error.Message, tc.msg) {
				t.Fatalf("want %d %s %q, got %d %s", tc.status, tc.reason, tc.msg, status, cutOut(out))
			}
		})
	}
}

func cutOut(s string) string {
	if len(s) > 600 {
		return s[:600] + "…"
	}
	return s
}

// The 1.0 stream is ProtoJSON: every event exactly one of task,
// statusUpdate, artifactUpdate, states TASK_STATE_*, no kind; over
// JSON-RPC each is a response's result, over REST the bare object.
func TestV1StreamShape(t *testing.T) {
	f := newFixture(t, a2a.Config{})
	check := func(t *testing.T, body string, rest bool) {
		var got []string
		sc := bufio.NewScanner(strings.NewReader(body))
		for sc.Scan() {
			line := sc.Text()
			if line == "" {
				continue
			}
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				t.Fatalf("unexpected SSE line %q", line)
			}
			raw := json.RawMessage(data)
			if !rest {
				raw = decodeReply(t, data).Result
			}
			if strings.Contains(string(raw), `"kind"`) {
				t.Fatalf("1.0 event with kind: %s", raw)
			}
			var ev map[string]json.RawMessage
			must(t, json.Unmarshal(raw, &ev))
			if len(ev) != 1 {
				t.Fatalf("event with %d members: %s", len(ev), raw)
			}
			var sr a2a1.StreamResponse
			must(t, json.Unmarshal(raw, &sr))
			for k, v := range ev {
				var st struct {
					Status struct{ State string }
				}
				_ = json.Unmarshal(v, &st)
				if k == "artifactUpdate" && len(got) > 0 && got[len(got)-1] == "artifactUpdate:" {
					continue // the output's chunks (its text and a closing chunk) as one
				}
				got = append(got, k+":"+st.Status.State)
			}
		}
		want := "task:TASK_STATE_SUBMITTED statusUpdate:TASK_STATE_WORKING artifactUpdate: statusUpdate:TASK_STATE_COMPLETED"
		if strings.Join(got, " ") != want {
			t.Fatalf("events %v, want %s", got, want)
		}
	}
	t.Run("jsonrpc", func(t *testing.T) {
		status, body := post(t, f, "/a2a", `{"jsonrpc":"2.0","id":"s","method":"SendStreamingMessage","params":`+v1SendBody+`}`, "A2A-Version", "1.0")
		if status != http.StatusOK {
			t.Fatalf("HTTP %d", status)
		}
		check(t, body, false)
	})
	t.Run("rest", func(t *testing.T) {
		status, body := do(t, f, "POST", "/a2a/message:stream", v1SendBody, "A2A-Version", "1.0")
		if status != http.StatusOK {
			t.Fatalf("HTTP %d: %s", status, body)
		}
		check(t, body, true)
	})
}

// With a token the card's security schemes read in both generations'
// shapes, and the REST binding is guarded like JSON-RPC.
func TestV1CardWithToken(t *testing.T) {
	f := newFixture(t, a2a.Config{}, axocoatl.HTTPOptions{APIToken: secret.Secret("s3cret")})
	ctx := context.Background()
	c1, err := v1card.NewResolver(f.client).Resolve(ctx, f.srv.URL)
	must(t, err)
	bearer, ok := c1.SecuritySchemes["bearer"].(a2a1.HTTPAuthSecurityScheme)
	key, ok2 := c1.SecuritySchemes["apiKey"].(a2a1.APIKeySecurityScheme)
	if !ok || !ok2 || bearer.Scheme != "bearer" || key.Name != "X-API-Key" || len(c1.SecurityRequirements) != 2 {
		t.Fatalf("a2a-go/v2 reads the schemes as %#v, requirements %v", c1.SecuritySchemes, c1.SecurityRequirements)
	}
	c03, err := agentcard.DefaultResolver.Resolve(ctx, f.srv.URL)
	must(t, err)
	if len(c03.SecuritySchemes) != 2 || len(c03.Security) != 2 {
		t.Fatalf("a2a-go v0.3 reads the schemes as %#v", c03.SecuritySchemes)
	}
	if status, out := do(t, f, "POST", "/a2a/message:send", v1SendBody); status != http.StatusUnauthorized || strings.Contains(out, "s3cret") {
		t.Fatalf("REST without token: %d %s", status, out)
	}
	if status, out := do(t, f, "POST", "/a2a/message:send", v1SendBody, "Authorization", "Bearer s3cret"); status != http.StatusOK ||
		!strings.Contains(out, `"TASK_STATE_COMPLETED"`) {
		t.Fatalf("REST with token: %d %s", status, out)
	}
}

// The REST binding's writes refuse a foreign browser Origin like JSON-RPC
// does (a text/plain POST is a simple request: no preflight protects it).
func TestRESTCrossOriginWritesRefused(t *testing.T) {
	f := newFixture(t, a2a.Config{}, axocoatl.HTTPOptions{AllowedOrigins: []string{"https://app.example.com"}})
	for _, path := range []string{"/a2a/message:send", "/a2a/message:stream", "/a2a/agents/assistant/message:send", "/a2a/tasks/x:cancel"} {
		status, out := do(t, f, "POST", path, v1SendBody, "Content-Type", "text/plain", "Origin", "http://evil.example")
		if status != http.StatusForbidden {
			t.Fatalf("%s from a foreign origin: %d %s", path, status, out)
		}
	}
	if status, out := do(t, f, "POST", "/a2a/message:send", v1SendBody, "Content-Type", "text/plain", "Origin", "https://app.example.com"); status != http.StatusOK {
		t.Fatalf("allowed origin: %d %s", status, out)
	}
}
