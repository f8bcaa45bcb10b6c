package a2aremote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
)

// parseCard gives the card a2av0's parser gives, for 0.3 cards as the 0.3
// SDK writes them (additionalInterfaces incl. HTTP+JSON and gRPC, every
// kind of security scheme, security on the card and on skills, the
// extended card flag), for hand-written 0.3 cards and for a 1.0 card; and
// the error a2av0's gives for what is not a card.
func TestCardParserMatchesA2AV0(t *testing.T) {
	full, err := json.Marshal(&a2a03.AgentCard{
		Name: "Planner", Description: "Plans trips.", Version: "2.1", ProtocolVersion: "0.3.0",
		URL: "https://a.example/a2a", PreferredTransport: a2a03.TransportProtocolJSONRPC,
		AdditionalInterfaces: []a2a03.AgentInterface{
			{Transport: a2a03.TransportProtocolJSONRPC, URL: "https://a.example/a2a"},
			{Transport: a2a03.TransportProtocolHTTPJSON, URL: "https://a.example/rest"},
			{Transport: a2a03.TransportProtocolGRPC, URL: "https://a.example:9090"},
		},
		Capabilities: a2a03.AgentCapabilities{Streaming: true, PushNotifications: true,
			Extensions: []a2a03.AgentExtension{{URI: "https://ext.example/x", Required: true, Params: map[string]any{"k": "v"}}}},
		DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain", "application/json"},
		DocumentationURL: "https://a.example/doc", IconURL: "https://a.example/icon.png",
		Provider:                          &a2a03.AgentProvider{Org: "Example", URL: "https://example.org"},
		SupportsAuthenticatedExtendedCard: true,
		SecuritySchemes: a2a03.NamedSecuritySchemes{
			"key":    a2a03.APIKeySecurityScheme{In: a2a03.APIKeySecuritySchemeInHeader, Name: "X-Key", Description: "a key"},
			"bearer": a2a03.HTTPAuthSecurityScheme{Scheme: "Bearer", BearerFormat: "JWT"},
			"oidc":   a2a03.OpenIDConnectSecurityScheme{OpenIDConnectURL: "https://id.example/.well-known/openid-configuration"},
			"mtls":   a2a03.MutualTLSSecurityScheme{Description: "client certs"},
			"oauth": a2a03.OAuth2SecurityScheme{Flows: a2a03.OAuthFlows{AuthorizationCode: &a2a03.AuthorizationCodeOAuthFlow{
				AuthorizationURL: "https://id.example/auth", TokenURL: "https://id.example/token", Scopes: map[string]string{"plan": "make plans"}}}},
		},
		Security: []a2a03.SecurityRequirements{{"bearer": {}}, {"oauth": {"plan"}}},
		Skills: []a2a03.AgentSkill{
			{ID: "plan", Name: "plan", Description: "makes a plan", Tags: []string{"plan"}, Examples: []string{"a trip"},
				InputModes: []string{"text/plain"}, Security: []a2a03.SecurityRequirements{{"key": {}}}},
			{ID: "book", Name: "book", Description: "books it", Tags: []string{"book"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	v1, err := json.Marshal(&a2a1.AgentCard{
		Name: "Planner", Description: "1.0", Version: "1",
		SupportedInterfaces: []*a2a1.AgentInterface{
			a2a1.NewAgentInterface("https://b.example/a2a", a2a1.TransportProtocolJSONRPC),
			a2a1.NewAgentInterface("https://b.example/rest", a2a1.TransportProtocolHTTPJSON),
		},
		Capabilities: a2a1.AgentCapabilities{Streaming: true},
		Skills:       []a2a1.AgentSkill{{ID: "s", Name: "s", Description: "d", Tags: []string{"t"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	cards := []struct {
		name, body string
		ifaces     int // interfaces the card names, a check that the parse read them
	}{
		{"0.3 full", string(full), 3},
		{"0.3 http+json preferred", `{"name":"n","description":"d","version":"1","protocolVersion":"0.3.0","url":"http://h/rest","preferredTransport":"HTTP+JSON","additionalInterfaces":[{"transport":"JSONRPC","url":"http://h/rpc"}],"capabilities":{"streaming":false},"skills":[]}`, 2},
		{"0.3 no protocolVersion", `{"name":"n","url":"http://h/rpc","preferredTransport":"JSONRPC"}`, 1},
		{"0.3 security scheme in 1.0 shape", `{"name":"n","url":"http://h/rpc","preferredTransport":"JSONRPC","securitySchemes":{"k":{"apiKeySecurityScheme":{"location":"header","name":"K"}}}}`, 1},
		{"1.0", string(v1), 2},
		{"no interface", `{"name":"x","description":"y","version":"1"}`, 0},
	}
	for _, c := range cards {
		t.Run(c.name, func(t *testing.T) {
			ours, err := parseCard([]byte(c.body))
			if err != nil {
				t.Fatal(err)
			}
			theirs, err := a2av0.NewAgentCardParser()([]byte(c.body))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(ours, theirs) {
				o, _ := json.Marshal(ours)
				th, _ := json.Marshal(theirs)
				t.Fatalf("parseCard = %s\na2av0     = %s", o, th)
			}
			if len(ours.SupportedInterfaces) != c.ifaces {
				t.Fatalf("interfaces = %+v, want %d", ours.SupportedInterfaces, c.ifaces)
			}
		})
	}
	// Where parseCard differs from a2av0 on purpose: a 0.3 card's
	// preferredTransport "defaults to 'JSONRPC'" when absent (the 0.3
	// spec, a2a-go v0.3's AgentCard.PreferredTransport); a2av0 drops the
	// url's interface, which left a card of only a url (as 0.2-era agents
	// write them) with no interface at all, so the agent could not be called.
	for body, want := range map[string]string{
		`{"name":"n","url":"http://h/rpc"}`: "JSONRPC http://h/rpc 0.3",
		`{"name":"n","url":"http://h/rpc","protocolVersion":"0.2.5","additionalInterfaces":[{"transport":"HTTP+JSON","url":"http://h/rest"}]}`: "JSONRPC http://h/rpc 0.2.5, HTTP+JSON http://h/rest 0.2.5",
		`{"name":"n","url":"http://h/rpc","additionalInterfaces":[{"transport":"JSONRPC","url":"http://h/rpc"}]}`:                              "JSONRPC http://h/rpc 0.3",
	} {
		card, err := parseCard([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, i := range card.SupportedInterfaces {
			got = append(got, fmt.Sprintf("%s %s %s", i.ProtocolBinding, i.URL, i.ProtocolVersion))
		}
		if strings.Join(got, ", ") != want {
			t.Errorf("%s: interfaces %q, want %q", body, got, want)
		}
	}
	// The full card: what the module reads of it.
	card, _ := parseCard(full)
	if card.Name != "Planner" || !card.Capabilities.Streaming || !card.Capabilities.ExtendedAgentCard || len(card.Skills) != 2 ||
		card.SupportedInterfaces[1].ProtocolBinding != a2a1.TransportProtocolHTTPJSON || card.SupportedInterfaces[1].ProtocolVersion != "0.3.0" ||
		len(card.SecuritySchemes) != 5 || len(card.Skills[0].SecurityRequirements) != 1 {
		t.Fatalf("full card read as %+v", card)
	}
	for _, bad := range []string{`hello`, `{"name":1}`, `{"securitySchemes":{"x":{"type":"magic"}}}`, `{"securitySchemes":{"o":{"type":"oauth2","flows":{}}}}`} {
		_, ours := parseCard([]byte(bad))
		_, theirs := a2av0.NewAgentCardParser()([]byte(bad))
		if ours == nil || theirs == nil || ours.Error() != theirs.Error() {
			t.Errorf("%s: parseCard error %v, a2av0's %v", bad, ours, theirs)
		}
	}
}

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
	hc := newHTTPClient(AgentConfig{Name: "r", URL: srv.URL, MaxResponseBytes: 2048}, srv.Client().Transport)
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

// sseData joins an event's data lines, skips other fields and comments,
// and ends with ErrResponseTooLarge at a line or an event over its bound
// (which the transports set to max_response_bytes, so that the body's own
// bound is normally met first: TestTransports03Answers).
func TestSSEData(t *testing.T) {
	read := func(body string, limit int64) ([]string, error) {
		var got []string
		for data, err := range sseData(strings.NewReader(body), limit) {
			if err != nil {
				return got, err
			}
			got = append(got, string(data))
		}
		return got, nil
	}
	got, err := read(": hi\nid: 1\nevent: x\ndata: {\"a\":\ndata:1}\n\nretry: 5\ndata: two\n\ndata: last", 100)
	if err != nil || strings.Join(got, "|") != "{\"a\":\n1}|two|last" {
		t.Fatalf("events %q, error %v", got, err)
	}
	for _, body := range []string{"data: " + strings.Repeat("x", 200) + "\n\n", strings.Repeat("data: "+strings.Repeat("y", 40)+"\n", 5)} {
		got, err = read("data: first\n\n"+body, 100)
		if !errors.Is(err, ErrResponseTooLarge) || !strings.Contains(err.Error(), "more than 100 bytes") || len(got) != 1 {
			t.Fatalf("events %q, error %v; want the first event, then ErrResponseTooLarge", got, err)
		}
	}
}
