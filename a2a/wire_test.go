package a2a_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/a2a"
	"github.com/axocoatl/axocoatl-go/secret"
)

// post sends body to path and returns the status and response body.
func post(t testing.TB, f *fixture, path, body string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.srv.URL+path, strings.NewReader(body))
	must(t, err)
	req.Header.Set("Content-Type", "application/json")
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

// rpc posts a JSON-RPC body to /a2a and insists on HTTP 200.
func rpc(t testing.TB, f *fixture, body string) string {
	t.Helper()
	status, out := post(t, f, "/a2a", body)
	if status != http.StatusOK {
		t.Fatalf("HTTP %d for %s: %s", status, body, out)
	}
	return out
}

type rpcReply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

func decodeReply(t testing.TB, s string) rpcReply {
	t.Helper()
	var r rpcReply
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		t.Fatalf("reply is not JSON: %v: %s", err, s)
	}
	if r.JSONRPC != "2.0" || len(r.ID) == 0 || (r.Error == nil) == (r.Result == nil) {
		t.Fatalf("malformed JSON-RPC reply: %s", s)
	}
	// 0.3: data is an object (a2a-go v0.3 fails on anything else); 1.0: a
	// list of google.rpc details.
	if r.Error != nil && len(r.Error.Data) > 0 && r.Error.Data[0] != '{' && r.Error.Data[0] != '[' {
		t.Fatalf("error.data is neither object nor list: %s", s)
	}
	return r
}

const sendParams = `{"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"ping"}]}}`

func TestJSONRPCWireRules(t *testing.T) {
	f := newFixture(t, a2a.Config{})
	cases := []struct {
		name, body string
		id         string // the id the reply must carry, byte for byte
		code       int    // 0: a result
	}{
		{"id zero, no configuration", `{"jsonrpc":"2.0","id":0,"method":"message/send","params":` + sendParams + `}`, `0`, 0},
		{"string id", `{"jsonrpc":"2.0","id":"abc","method":"message/send","params":` + sendParams + `}`, `"abc"`, 0},
		{"float id", `{"jsonrpc":"2.0","id":1.5,"method":"tasks/get","params":{"id":"nope"}}`, `1.5`, -32001},
		{"unknown method", `{"jsonrpc":"2.0","id":7,"method":"tasks/frobnicate"}`, `7`, -32601},
		{"parse error", `{"jsonrpc":`, `null`, -32700},
		{"not an object", `"hello"`, `null`, -32600},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"tasks/get"}]`, `null`, -32600},
		{"no id", `{"jsonrpc":"2.0","method":"tasks/get","params":{"id":"x"}}`, `null`, -32600},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"tasks/get"}`, `null`, -32600},
		{"wrong version", `{"jsonrpc":"1.0","id":3,"method":"tasks/get"}`, `3`, -32600},
		{"missing params", `{"jsonrpc":"2.0","id":4,"method":"message/send"}`, `4`, -32602},
		{"no parts", `{"jsonrpc":"2.0","id":5,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[]}}}`, `5`, -32602},
		{"unknown receiver", `{"jsonrpc":"2.0","id":6,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"x"}],"metadata":{"receiver_id":"nobody"}}}}`, `6`, -32602},
		{"bad part kind", `{"jsonrpc":"2.0","id":8,"method":"message/send","params":{"message":{"messageId":"m","role":"user","parts":[{"kind":"video"}]}}}`, `8`, -32602},
		{"image only", `{"jsonrpc":"2.0","id":9,"method":"message/send","params":{"configuration":{"acceptedOutputModes":["image/png"]},"message":{"messageId":"m","role":"user","parts":[{"kind":"text","text":"x"}]}}}`, `9`, -32005},
		{"empty accepted modes", `{"jsonrpc":"2.0","id":10,"method":"message/send","params":{"configuration":{"acceptedOutputModes":[]},"message":{"messageId":"m","role":"user","parts":[{"kind":"text","text":"x"}]}}}`, `10`, 0},
		{"push config", `{"jsonrpc":"2.0","id":11,"method":"tasks/pushNotificationConfig/set","params":{}}`, `11`, -32003},
		{"extended card", `{"jsonrpc":"2.0","id":12,"method":"agent/getAuthenticatedExtendedCard"}`, `12`, -32007},
		{"method not a string", `{"jsonrpc":"2.0","id":14,"method":5}`, `14`, -32600},
		{"version not a string", `{"jsonrpc":2,"id":"v","method":"tasks/get"}`, `"v"`, -32600},
		{"data part", `{"jsonrpc":"2.0","id":13,"method":"message/send","params":{"message":{"messageId":"m","role":"user","parts":[{"kind":"data","data":{"a":1}}]}}}`, `13`, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := decodeReply(t, rpc(t, f, tc.body))
			if string(r.ID) != tc.id {
				t.Fatalf("id %s, want %s", r.ID, tc.id)
			}
			if tc.code == 0 {
				if r.Error != nil {
					t.Fatalf("error %+v", r.Error)
				}
				var res struct {
					Kind   string `json:"kind"`
					Status struct{ State string }
				}
				must(t, json.Unmarshal(r.Result, &res))
				if res.Kind != "task" || res.Status.State != "completed" {
					t.Fatalf("result %s", r.Result)
				}
				if !bytes.Contains(r.Result, []byte(`"parts":[{"kind":"text"`)) {
					t.Fatalf("parts without kind: %s", r.Result)
				}
				return
			}
			if r.Error == nil || r.Error.Code != tc.code {
				t.Fatalf("want error %d, got %+v", tc.code, r)
			}
		})
	}
}

// The A2A-Version header picks the generation: a 0.3 method under 1.0 (and
// the other way round) is -32601 naming the right method; an unknown
// version is -32009 naming the supported ones, in the message because the
// 1.0 SDKs drop error.data.
func TestJSONRPCVersionHeader(t *testing.T) {
	f := newFixture(t, a2a.Config{})
	body := `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}`
	_, out := post(t, f, "/a2a", body, "A2A-Version", "1.0")
	if r := decodeReply(t, out); r.Error == nil || r.Error.Code != -32601 || !strings.Contains(r.Error.Message, "use GetTask") ||
		!strings.Contains(string(r.Error.Data), `"reason":"METHOD_NOT_FOUND"`) {
		t.Fatalf("0.3 method with A2A-Version 1.0: %s", out)
	}
	_, out = post(t, f, "/a2a", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}`)
	if r := decodeReply(t, out); r.Error == nil || r.Error.Code != -32601 || !strings.Contains(string(r.Error.Data), "A2A-Version: 1.0") {
		t.Fatalf("1.0 method without the header: %s", out)
	}
	_, out = post(t, f, "/a2a", body, "A2A-Version", "0.3")
	if r := decodeReply(t, out); r.Error == nil || r.Error.Code != -32001 {
		t.Fatalf("A2A-Version 0.3: %s", out)
	}
	for _, path := range []string{"/a2a", "/a2a/agents/upper"} {
		_, out = post(t, f, path, `{"jsonrpc":"2.0","id":"v","method":"SendMessage","params":{}}`, "A2A-Version", "9.9")
		r := decodeReply(t, out)
		if r.Error == nil || r.Error.Code != -32009 || string(r.ID) != `"v"` ||
			!strings.Contains(r.Error.Message, `"9.9"`) || !strings.Contains(r.Error.Message, "supported versions: 1.0, 0.3") {
			t.Fatalf("%s with A2A-Version 9.9: %s", path, out)
		}
	}
}

// Guards: bound a2a.max_body_bytes (docs/bounds.md).
func TestJSONRPCBodyLimit(t *testing.T) {
	f := newFixture(t, a2a.Config{})
	big := `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"messageId":"m","role":"user","parts":[{"kind":"text","text":"` +
		strings.Repeat("a", 1<<20) + `"}]}}}`
	r := decodeReply(t, rpc(t, f, big))
	if r.Error == nil || r.Error.Code != -32600 || !strings.Contains(string(r.Error.Data), "exceeds") {
		t.Fatalf("oversized body: %+v", r)
	}
}

func TestJSONRPCStreamShape(t *testing.T) {
	f := newFixture(t, a2a.Config{})
	status, body := post(t, f, "/a2a", `{"jsonrpc":"2.0","id":0,"method":"message/stream","params":`+sendParams+`}`)
	if status != http.StatusOK {
		t.Fatalf("HTTP %d", status)
	}
	var kinds []string
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
		r := decodeReply(t, data)
		if string(r.ID) != "0" {
			t.Fatalf("event id %s", r.ID)
		}
		var k struct{ Kind string }
		must(t, json.Unmarshal(r.Result, &k))
		if k.Kind == "artifact-update" && len(kinds) > 0 && kinds[len(kinds)-1] == k.Kind {
			continue // the output's chunks (its text and a closing chunk) as one
		}
		kinds = append(kinds, k.Kind)
	}
	want := "task status-update artifact-update status-update"
	if strings.Join(kinds, " ") != want {
		t.Fatalf("event kinds %v, want %s", kinds, want)
	}
}

func TestAuthToken(t *testing.T) {
	f := newFixture(t, a2a.Config{}, axocoatl.HTTPOptions{APIToken: secret.Secret("s3cret"), PublicURL: "https://agents.example.com/"})
	resp, err := f.client.Get(f.srv.URL + "/.well-known/agent-card.json")
	must(t, err)
	var card struct {
		URL             string
		SecuritySchemes map[string]map[string]any
		Security        []map[string][]string
	}
	must(t, json.NewDecoder(resp.Body).Decode(&card))
	resp.Body.Close()
	if card.URL != "https://agents.example.com/a2a" {
		t.Fatalf("card url %q does not use public_url", card.URL)
	}
	if card.SecuritySchemes["bearer"]["type"] != "http" || card.SecuritySchemes["apiKey"]["name"] != "X-API-Key" ||
		len(card.Security) != 2 || card.Security[0]["bearer"] == nil {
		t.Fatalf("security schemes: %+v %+v", card.SecuritySchemes, card.Security)
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"message/send","params":` + sendParams + `}`
	if status, out := post(t, f, "/a2a", body); status != http.StatusUnauthorized || strings.Contains(out, "s3cret") {
		t.Fatalf("no token: %d %s", status, out)
	}
	if status, _ := post(t, f, "/a2a", body, "Authorization", "Bearer wrong"); status != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", status)
	}
	if status, _ := post(t, f, "/a2a", body, "Authorization", "Bearer s3cret"); status != http.StatusOK {
		t.Fatalf("bearer token: %d", status)
	}
	if status, _ := post(t, f, "/a2a/tasks", `{"receiver_id":"assistant","input":"x"}`, "X-API-Key", "s3cret"); status != http.StatusOK {
		t.Fatalf("X-API-Key: %d", status)
	}
}

func TestAxocoatlCard(t *testing.T) {
	f := newFixture(t, a2a.Config{Name: "edge"})
	resp, err := f.client.Get(f.srv.URL + "/.well-known/agent.json")
	must(t, err)
	defer resp.Body.Close()
	var card a2a.AxocoatlCard
	must(t, json.NewDecoder(resp.Body).Decode(&card))
	if card.Name != "edge" || card.Endpoint != f.srv.URL+"/a2a/tasks" || card.URL != f.srv.URL ||
		strings.Join(card.Capabilities, ",") != "assistant,upper,slow,broken" || card.Agents[0].Description != "Echoes." {
		t.Fatalf("card: %+v", card)
	}
}

func TestTasksEndpoint(t *testing.T) {
	f := newFixture(t, a2a.Config{})
	type reply struct {
		TaskID     string `json:"task_id"`
		ReceiverID string `json:"receiver_id"`
		Status     string `json:"status"`
		Output     *struct {
			Content string `json:"content"`
		} `json:"output"`
		Error *string `json:"error"`
	}
	decode := func(s string) reply {
		var r reply
		if err := json.Unmarshal([]byte(s), &r); err != nil {
			t.Fatalf("reply %q: %v", s, err)
		}
		return r
	}

	status, out := post(t, f, "/a2a/tasks", `{"id":"t-1","sender_id":"peer","receiver_id":"upper","input":"hello"}`)
	r := decode(out)
	if status != 200 || r.Status != "completed" || r.Output == nil || r.Output.Content != "upper: hello" ||
		r.Error != nil || r.TaskID != "t-1" || r.ReceiverID != "upper" || !strings.Contains(out, `"error":null`) {
		t.Fatalf("success: %d %s", status, out)
	}

	status, out = post(t, f, "/a2a/tasks", `{"receiver_id":"assistant","input":{"city":"Oaxaca","days":[1,2]}}`)
	r = decode(out)
	if status != 200 || r.Output == nil || !strings.Contains(r.Output.Content, `"city": "Oaxaca"`) || r.TaskID == "" {
		t.Fatalf("object input: %d %s", status, out)
	}

	status, out = post(t, f, "/a2a/tasks", `{"receiver_id":"broken","input":"x"}`)
	r = decode(out)
	if status != 200 || r.Status != "failed" || r.Error == nil || !strings.Contains(*r.Error, "model exploded") ||
		!strings.Contains(out, `"output":null`) {
		t.Fatalf("failing agent: %d %s", status, out)
	}

	status, out = post(t, f, "/a2a/tasks", `{"receiver_id":"slow","input":"x","timeout_secs":0.05}`)
	r = decode(out)
	if status != 200 || r.Status != "failed" || r.Error == nil {
		t.Fatalf("timeout_secs: %d %s", status, out)
	}

	for _, tc := range []struct {
		body   string
		status int
		msg    string
	}{
		{`{"receiver_id":"nobody","input":"x"}`, 404, "nobody"},
		{`{"input":"x"}`, 400, "receiver_id is required"},
		{`{"receiver_id":"assistant"}`, 400, "input is required"},
		{`{"receiver_id":"assistant","input":[1]}`, 400, "string or a JSON object"},
		{`{"receiver_id":"assistant","input":"x","timeout_secs":-1}`, 400, "timeout_secs"},
		{`{"receiver_id":`, 400, "not a valid task request"},
		{`{"receiver_id":"assistant","input":"` + strings.Repeat("a", 1<<20) + `"}`, 413, "over the 1 MiB limit"},
	} {
		status, out := post(t, f, "/a2a/tasks", tc.body)
		var e struct {
			Error struct{ Code, Message string }
		}
		if err := json.Unmarshal([]byte(out), &e); err != nil || status != tc.status || !strings.Contains(e.Error.Message, tc.msg) {
			t.Errorf("%.60s: %d %s, want %d with %q", tc.body, status, out, tc.status, tc.msg)
		}
	}
}

func TestStreamKeepAlive(t *testing.T) {
	f := newFixture(t, a2a.Config{StreamKeepAlive: 10 * time.Millisecond})
	req, err := http.NewRequest(http.MethodPost, f.srv.URL+"/a2a", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"message/stream","params":{"message":{"messageId":"m","role":"user","parts":[{"kind":"text","text":"x"}],"metadata":{"receiver_id":"slow"}}}}`))
	must(t, err)
	resp, err := f.client.Do(req)
	must(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var taskID string
	keepAlives, canceled := 0, false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == ": keep-alive":
			keepAlives++
			if keepAlives == 3 {
				out := rpc(t, f, `{"jsonrpc":"2.0","id":2,"method":"tasks/cancel","params":{"id":"`+taskID+`"}}`)
				if r := decodeReply(t, out); r.Error != nil {
					t.Fatalf("cancel: %s", out)
				}
			}
		case strings.HasPrefix(line, "data: "):
			r := decodeReply(t, strings.TrimPrefix(line, "data: "))
			var ev struct {
				Kind   string
				ID     string
				Final  bool
				Status struct{ State string }
			}
			must(t, json.Unmarshal(r.Result, &ev))
			if ev.Kind == "task" {
				taskID = ev.ID
			}
			if ev.Final && ev.Status.State == "canceled" {
				canceled = true
			}
		}
	}
	if keepAlives < 3 || !canceled {
		t.Fatalf("keep-alives %d, canceled %v", keepAlives, canceled)
	}
}

// A client sending its body too slowly gets its answer when BodyTimeout
// ends, on every route it serves: refused for a missing token as
// well as read and refused as malformed.
//
// Guards: bound server.body_timeout (docs/bounds.md).
func TestSlowBodyTimesOut(t *testing.T) {
	f := newFixture(t, a2a.Config{}, axocoatl.HTTPOptions{BodyTimeout: 200 * time.Millisecond, APIToken: secret.Secret("tok")})
	for _, tc := range []struct {
		name, path, token string
		status            int
	}{
		{"rpc", "/a2a", "tok", http.StatusOK},
		{"tasks", "/a2a/tasks", "tok", http.StatusBadRequest},
		{"rpcNoToken", "/a2a", "", http.StatusUnauthorized},
		{"tasksNoToken", "/a2a/tasks", "", http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", strings.TrimPrefix(f.srv.URL, "http://"))
			must(t, err)
			defer conn.Close()
			start := time.Now()
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\":", tc.path, conn.RemoteAddr(), tc.token)
			conn.SetReadDeadline(time.Now().Add(3 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer within 3s (body timeout 200ms): %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || time.Since(start) > 2*time.Second {
				t.Fatalf("status %d after %s: %s", resp.StatusCode, time.Since(start), body)
			}
		})
	}
}

// Without a token, a web page must not be able to make its visitor's
// browser run agents on a host that mounts the Handler (typically on
// loopback): a form post or a no-cors fetch with a text/plain body needs no
// CORS preflight. Browsers send Origin on such requests; a foreign one is
// refused with 403, while same-host pages, allowed origins and clients
// sending no Origin (every non-browser client) go through.
func TestCrossOriginWritesRefused(t *testing.T) {
	for _, bad := range []string{"https://app.example.com/path", "ftp://x", "https://"} {
		if err := (axocoatl.HTTPOptions{AllowedOrigins: []string{bad}}).Validate(); err == nil {
			t.Errorf("allowed origin %q accepted", bad)
		}
	}
	f := newFixture(t, a2a.Config{}, axocoatl.HTTPOptions{AllowedOrigins: []string{"https://app.example.com"}})
	rpcBody := `{"jsonrpc":"2.0","id":1,"method":"message/send","params":` + sendParams + `}`
	taskBody := `{"receiver_id":"assistant","input":"x"}`
	self := f.srv.URL
	for _, tc := range []struct {
		name, path, body, origin string
		status                   int
	}{
		{"rpc foreign", "/a2a", rpcBody, "http://evil.example", http.StatusForbidden},
		{"per-agent foreign", "/a2a/agents/assistant", rpcBody, "http://evil.example", http.StatusForbidden},
		{"tasks foreign", "/a2a/tasks", taskBody, "http://evil.example", http.StatusForbidden},
		{"tasks null origin", "/a2a/tasks", taskBody, "null", http.StatusForbidden},
		{"rpc same host", "/a2a", rpcBody, self, http.StatusOK},
		{"tasks allowed", "/a2a/tasks", taskBody, "https://APP.example.com", http.StatusOK},
		{"tasks no origin", "/a2a/tasks", taskBody, "", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			header := []string{"Content-Type", "text/plain"}
			if tc.origin != "" {
				header = append(header, "Origin", tc.origin)
			}
			status, out := post(t, f, tc.path, tc.body, header...)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, out)
			}
			if status == http.StatusOK && !strings.Contains(out, "completed") {
				t.Fatalf("not run: %s", out)
			}
		})
	}
}
