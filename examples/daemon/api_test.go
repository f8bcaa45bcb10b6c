package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/httpapi"
	"github.com/axocoatl/axocoatl-go/internal/httpguard"
	"github.com/axocoatl/axocoatl-go/lattice"
)

const tokenConfig = `
server:
  api_token: ${TOKEN}
  max_auth_failures: -1  # the audits below send many wrong tokens on purpose
agents:
  - id: assistant
    provider: echo
`

// concretePath fills the {name} segments of a pattern with real values.
func concretePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		switch {
		case s == "{$}":
			parts[i] = ""
		case strings.HasPrefix(s, "{"):
			parts[i] = "assistant"
		}
	}
	return strings.Join(parts, "/")
}

// Every private route, including routes modules add later, answers 401
// without the token and something else with it; public routes need none.
func TestAuthEveryRoute(t *testing.T) {
	const token = "s3cret-token-0123456789"
	td := startDaemon(t, tokenConfig, map[string]string{"TOKEN": token})
	var private, public int
	for _, rt := range td.d.rt.Routes() {
		path := concretePath(rt.Pattern)
		body := ""
		if rt.Method == http.MethodPost {
			body = `{}`
		}
		if rt.Scope == axocoatl.ScopePublic {
			public++
			if r := td.do(t, rt.Method, path, body); r.status == http.StatusUnauthorized {
				t.Errorf("public %s %s answered 401", rt.Method, path)
			}
			continue
		}
		private++
		for _, h := range [][]string{nil, {"Authorization", "Bearer wrong"}, {"X-API-Key", "wrong"}, {"Authorization", "Bearer "}, {"Authorization", "Basic " + token}} {
			r := td.do(t, rt.Method, path, body, h...)
			if r.status != http.StatusUnauthorized {
				t.Errorf("%s %s with %q: %d, want 401", rt.Method, path, h, r.status)
				continue
			}
			if e := r.json(t)["error"].(map[string]any); e["code"] != "unauthorized" {
				t.Errorf("error body %s", r.body)
			}
		}
		for _, h := range [][]string{{"Authorization", "Bearer " + token}, {"X-API-Key", token}} {
			if r := td.do(t, rt.Method, path, body, h...); r.status == http.StatusUnauthorized {
				t.Errorf("%s %s with %s: 401", rt.Method, path, h[0])
			}
		}
	}
	if private < 6 || public < 3 {
		t.Fatalf("only %d private and %d public routes mounted", private, public)
	}
	for _, p := range []string{"/health", "/health/live", "/health/ready", "/"} {
		if r := td.do(t, "GET", p, ""); r.status != http.StatusOK {
			t.Errorf("GET %s without token: %d", p, r.status)
		}
	}

	// The stream takes the token in a header or as ?token=.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dialEvents(t, ctx, td.url, http.Header{"Authorization": {"Bearer " + token}}, "")
	dialEvents(t, ctx, td.url, nil, "?token="+token)
	u := "ws" + strings.TrimPrefix(td.url, "http") + "/api/events"
	for _, q := range []string{"", "?token=wrong", "?token="} {
		_, resp, err := websocket.Dial(ctx, u+q, &websocket.DialOptions{HTTPClient: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}})
		if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("stream%s: err %v, resp %v; want 401", q, err, resp)
		}
	}
}

func TestEventStreamOrigin(t *testing.T) {
	td := startDaemon(t, `
server:
  allowed_origins: ["app.example.com"]
agents:
  - id: assistant
`, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	host := strings.TrimPrefix(td.url, "http://")
	dialEvents(t, ctx, td.url, http.Header{"Origin": {"http://" + host}}, "")
	dialEvents(t, ctx, td.url, http.Header{"Origin": {"https://app.example.com"}}, "")
	dialEvents(t, ctx, td.url, nil, "") // no Origin: not a browser
	u := "ws://" + host + "/api/events"
	for _, origin := range []string{"http://evil.example", "http://" + host + ".evil.example", "null"} {
		_, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{
			HTTPHeader: http.Header{"Origin": {origin}},
			HTTPClient: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
		})
		if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Errorf("Origin %s: err %v resp %v; want 403", origin, err, resp)
		}
	}
	// The refusal has the API's error shape.
	r := td.do(t, "GET", "/api/events", "", "Origin", "http://evil.example", "Connection", "Upgrade", "Upgrade", "websocket",
		"Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	if e, _ := r.json(t)["error"].(map[string]any); r.status != http.StatusForbidden || e["code"] != "forbidden" || !strings.Contains(e["message"].(string), "evil.example") {
		t.Fatalf("refusal %d %s", r.status, r.body)
	}
}

func TestAPI(t *testing.T) {
	td := startDaemon(t, "", nil)
	r := td.do(t, "GET", "/api/agents", "")
	var list struct {
		Agents []httpapi.AgentView `json:"agents"`
	}
	if err := json.Unmarshal(r.body, &list); err != nil || r.status != 200 || len(list.Agents) != 1 || list.Agents[0].ID != "assistant" || list.Agents[0].Status != "idle" || list.Agents[0].Provider != "echo" {
		t.Fatalf("agents: %d %s", r.status, r.body)
	}
	if r := td.do(t, "GET", "/api/agents/assistant", ""); r.status != 200 || r.json(t)["id"] != "assistant" {
		t.Fatalf("agent: %d %s", r.status, r.body)
	}
	r = td.do(t, "POST", "/api/agents/assistant/execute", `{"input":"héllo"}`)
	m := r.json(t)
	if r.status != 200 || m["output"] != "héllo" || m["status"] != "completed" || m["agent_id"] != "assistant" || m["task_id"] == "" {
		t.Fatalf("execute: %d %s", r.status, r.body)
	}

	big := `{"input":"` + strings.Repeat("x", httpguard.DefaultMaxBodyBytes) + `"}`
	for _, tc := range []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"GET", "/api/agents/nope", "", 404, "not_found"},
		{"POST", "/api/agents/nope/execute", `{"input":"x"}`, 404, "not_found"},
		{"POST", "/api/agents/assistant/execute", `{"input":`, 400, "bad_request"},
		{"POST", "/api/agents/assistant/execute", `{"input":1}`, 400, "bad_request"},
		{"POST", "/api/agents/assistant/execute", `{"inpt":"x"}`, 400, "bad_request"},
		{"POST", "/api/agents/assistant/execute", `{}`, 400, "bad_request"},
		{"POST", "/api/agents/assistant/execute", ``, 400, "bad_request"},
		{"POST", "/api/agents/assistant/execute", `{"input":"a"} {"input":"b"}`, 400, "bad_request"},
		{"POST", "/api/agents/assistant/execute", big, 413, "payload_too_large"},
		{"POST", "/api/events", `{"payload":{}}`, 400, "bad_request"},
		{"POST", "/api/events", `{"type":"TaskCompleted","payload":{}}`, 400, "bad_request"},
		{"POST", "/api/events", `{"type":"has space"}`, 400, "bad_request"},
		{"POST", "/api/events", `{"type":"Deployed","payload":[1]}`, 400, "bad_request"},
		{"POST", "/api/events", `{"type":"Deployed","payload":"x"}`, 400, "bad_request"},
		{"DELETE", "/api/agents", "", 405, "method_not_allowed"},
		{"GET", "/nothing/here", "", 404, "not_found"},
	} {
		r := td.do(t, tc.method, tc.path, tc.body)
		if r.status != tc.status {
			t.Errorf("%s %s %.40q: %d %s, want %d", tc.method, tc.path, tc.body, r.status, r.body, tc.status)
			continue
		}
		e, ok := r.json(t)["error"].(map[string]any)
		if !ok || e["code"] != tc.code || e["message"] == "" {
			t.Errorf("%s %s: error body %s, want code %s", tc.method, tc.path, r.body, tc.code)
		}
	}

	// JSON of the wrong shape is told in the client's terms, not called
	// invalid and not in Go's words (encoding/json names Go types).
	for body, want := range map[string]string{
		`{"input":true}`:          `"input" must be a string, not bool`,
		`[1]`:                     `the body must be a JSON object, not array`,
		`{"input":"x","extra":1}`: `unknown member "extra"`,
		`{"input":`:               `invalid JSON body: unexpected EOF`,
	} {
		r := td.do(t, "POST", "/api/agents/assistant/execute", body)
		if e, _ := r.json(t)["error"].(map[string]any); r.status != 400 || e["message"] != want {
			t.Errorf("%s: %d %s, want the message %q", body, r.status, r.body, want)
		}
	}

	// A body over 1 MiB sent without Content-Length (chunked) is cut too.
	req, _ := http.NewRequest("POST", td.url+"/api/agents/assistant/execute", struct{ *strings.Reader }{strings.NewReader(big)})
	resp, err := td.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Errorf("chunked big body: %d, want 413", resp.StatusCode)
	}
	// So is one whose object fits but whose trailing padding does not.
	pad := strings.Repeat(" ", httpguard.DefaultMaxBodyBytes)
	for path, obj := range map[string]string{"/api/agents/assistant/execute": `{"input":"x"}`, "/api/events": `{"type":"Custom"}`} {
		req, _ = http.NewRequest("POST", td.url+path, struct{ *strings.Reader }{strings.NewReader(obj + pad)})
		resp, err = td.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 413 {
			t.Errorf("%s: chunked body padded past 1 MiB: %d %s, want 413", path, resp.StatusCode, b)
		}
	}
}

// The stream carries the events of an execution and of POST /api/events;
// bad client frames get error frames and the stream goes on.
func TestEventStream(t *testing.T) {
	td := startDaemon(t, "", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn := dialEvents(t, ctx, td.url, nil, "")

	r := td.do(t, "POST", "/api/agents/assistant/execute", `{"input":"ping"}`)
	taskID := r.json(t)["task_id"]
	var types []string
	for len(types) < 3 {
		f := readFrame(t, ctx, conn)
		if f.Kind != "event" {
			t.Fatalf("frame %+v", f)
		}
		var p map[string]any
		json.Unmarshal(f.Event.Payload, &p)
		if p["task_id"] != taskID || p["source"] != "api" || f.Event.ID == "" || f.Event.Timestamp == 0 {
			t.Fatalf("event %+v", f.Event)
		}
		types = append(types, f.Event.Type)
	}
	if types[0] != axocoatl.EventAgentActivated || types[1] != axocoatl.EventModelResult || types[2] != axocoatl.EventTaskCompleted {
		t.Fatalf("events %v", types)
	}

	r = td.do(t, "POST", "/api/events", `{"type":"Deployed","payload":{"version":"1.2"}}`)
	if r.status != http.StatusAccepted {
		t.Fatalf("publish: %d %s", r.status, r.body)
	}
	f := readFrame(t, ctx, conn)
	if f.Kind != "event" || f.Event.Type != "Deployed" || f.Event.ProducedBy != "api" || string(f.Event.Payload) != `{"version":"1.2"}` {
		t.Fatalf("custom event frame %+v", f)
	}

	for _, bad := range []string{`not json`, `{"cmd":"dance"}`, `{}`, `{"cmd":"approve","approval_id":"x","decision":"allow"}`} {
		if err := conn.Write(ctx, websocket.MessageText, []byte(bad)); err != nil {
			t.Fatal(err)
		}
		if f := readFrame(t, ctx, conn); f.Kind != "error" || f.Error == nil || f.Error.Message == "" {
			t.Fatalf("reply to %q: %+v", bad, f)
		}
	}
	if err := conn.Write(ctx, websocket.MessageBinary, []byte{0, 1}); err != nil {
		t.Fatal(err)
	}
	if f := readFrame(t, ctx, conn); f.Kind != "error" {
		t.Fatalf("reply to binary: %+v", f)
	}
	// Still streaming.
	td.do(t, "POST", "/api/events", `{"type":"After"}`)
	if f := readFrame(t, ctx, conn); f.Event.Type != "After" {
		t.Fatalf("after bad frames: %+v", f)
	}
}

// A client that stops reading gets lagged frames whose counts, added to the
// events it did get, are exactly what was published; the daemon's memory
// does not grow with the backlog.
//
// Guards: bound "events buffered per client" (event stream) (docs/bounds.md).
func TestEventStreamLagged(t *testing.T) {
	td := startDaemon(t, "", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn := dialEvents(t, ctx, td.url, nil, "")

	const n = 100_000
	ev, err := lattice.New("Flood", "test", map[string]any{"pad": strings.Repeat("p", 200)})
	if err != nil {
		t.Fatal(err)
	}
	bus := td.d.engine.Bus()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range n { // the client reads nothing meanwhile
		if err := bus.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grown := int64(after.HeapInuse) - int64(before.HeapInuse); grown > 16<<20 {
		t.Errorf("heap grew by %d MiB while a client stalled on %d events", grown>>20, n)
	}

	var events, missed uint64
	var lagged int
	for events+missed < n {
		f := readFrame(t, ctx, conn)
		switch f.Kind {
		case "event":
			events++
		case "lagged":
			lagged++
			if f.Missed == 0 {
				t.Fatal("lagged frame with missed 0")
			}
			missed += f.Missed
		default:
			t.Fatalf("frame %+v", f)
		}
	}
	if events+missed != n || lagged == 0 {
		t.Fatalf("events %d + missed %d (in %d lagged frames) != %d published", events, missed, lagged, n)
	}
	t.Logf("%d events delivered, %d reported missed in %d lagged frames", events, missed, lagged)
	// Nothing more is pending: the next frame is the next event.
	bus.Publish(ctx, ev)
	if f := readFrame(t, ctx, conn); f.Kind != "event" {
		t.Fatalf("after catching up: %+v", f)
	}
}

func TestMetrics(t *testing.T) {
	td := startDaemon(t, "", nil)
	for range 3 {
		td.do(t, "POST", "/api/agents/assistant/execute", `{"input":"x"}`)
	}
	td.do(t, "POST", "/api/events", `{"type":"Custom1"}`)
	want := []string{
		`axocoatl_executions_total{agent="assistant",source="api",status="completed"} 3`,
		`axocoatl_events_total{type="TaskCompleted"} 3`,
		`axocoatl_events_total{type="custom"} 1`,
		`axocoatl_execution_duration_seconds_count{agent="assistant",status="completed"} 3`,
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		body := string(td.do(t, "GET", "/metrics", "").body)
		missing := ""
		for _, w := range want {
			if !strings.Contains(body, w) {
				missing = w
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics lack %s:\n%s", missing, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// slowDaemon serves a daemon with one agent, "slow", whose model (an
// openAIServer) answers "slow answer" after delay. server is the body of
// the config's server: section, "" for none.
func slowDaemon(t *testing.T, delay time.Duration, server string) *testDaemon {
	t.Helper()
	slow := openAIServer(t, delay, http.StatusOK)
	config := fmt.Sprintf("providers:\n  ollama: { base_url: %s/v1 }\nagents:\n  - id: slow\n    provider: ollama\n    model: m\n", slow.URL)
	if server != "" {
		config = "server:\n" + server + config
	}
	return startDaemon(t, config, nil)
}

// startSlowRun runs the agent "slow" from another goroutine and returns
// once the Engine has the run in flight (failing t after 5s); wait blocks
// until the request is answered and returns the response.
func (td *testDaemon) startSlowRun(t *testing.T) (wait func() response) {
	t.Helper()
	var wg sync.WaitGroup
	var r response
	wg.Go(func() { r = td.do(t, "POST", "/api/agents/slow/execute", `{"input":"x"}`) })
	deadline := time.Now().Add(5 * time.Second)
	for td.d.engine.Agents()[0].Running == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the run of slow did not start within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return func() response { wg.Wait(); return r }
}

// openAIServer answers Chat Completions like an OpenAI-compatible server,
// after delay, or with status when it is not 200.
func openAIServer(t *testing.T, delay time.Duration, status int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Reading the whole body lets net/http notice a client that hangs
		// up (and cancel r.Context()) while we wait.
		io.Copy(io.Discard, r.Body)
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if status != http.StatusOK {
			w.WriteHeader(status)
			fmt.Fprint(w, `{"error":{"message":"upstream exploded","type":"server_error"}}`)
			return
		}
		fmt.Fprint(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"slow answer"}}]}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Guards: bound server.request_timeout (docs/bounds.md).
func TestExecuteUpstreamStatuses(t *testing.T) {
	broken := openAIServer(t, 0, http.StatusInternalServerError)
	slow := openAIServer(t, time.Second, http.StatusOK)
	td := startDaemon(t, fmt.Sprintf(`
server:
  request_timeout: 300ms
providers:
  openai: { base_url: %s/v1, api_key: k, max_retries: -1 }
  ollama: { base_url: %s/v1 }
agents:
  - id: broken
    provider: openai
    model: m
  - id: slow
    provider: ollama
    model: m
    timeout: 200ms
  - id: slow-request
    provider: ollama
    model: m
`, broken.URL, slow.URL), nil)
	r := td.do(t, "POST", "/api/agents/broken/execute", `{"input":"x"}`)
	if e, _ := r.json(t)["error"].(map[string]any); r.status != http.StatusBadGateway || e["code"] != "provider_failed" || e["task_id"] == "" {
		t.Errorf("provider failure: %d %s", r.status, r.body)
	}
	start := time.Now()
	r = td.do(t, "POST", "/api/agents/slow/execute", `{"input":"x"}`)
	if took := time.Since(start); took > 900*time.Millisecond {
		t.Errorf("a 200ms agent timeout answered after %s", took)
	}
	if e, _ := r.json(t)["error"].(map[string]any); r.status != http.StatusGatewayTimeout || e["code"] != "timeout" {
		t.Errorf("timeout: %d %s", r.status, r.body)
	}
	// server.request_timeout (300ms) is shorter than the agent's (120s).
	start = time.Now()
	r = td.do(t, "POST", "/api/agents/slow-request/execute", `{"input":"x"}`)
	if e, _ := r.json(t)["error"].(map[string]any); r.status != http.StatusGatewayTimeout || e["code"] != "timeout" || time.Since(start) > 900*time.Millisecond {
		t.Errorf("request timeout: %d %s after %s", r.status, r.body, time.Since(start))
	}
	// The message names the bound that fired, not the agent's 2m timeout.
	if msg := string(r.body); !strings.Contains(msg, "300ms") || !strings.Contains(msg, "request_timeout") || strings.Contains(msg, "2m0s") {
		t.Errorf("request timeout message: %s", msg)
	}
}

// SIGTERM (here: the context) lets an in-flight run finish within the
// grace period.
func TestGracefulShutdown(t *testing.T) {
	td := slowDaemon(t, 500*time.Millisecond, "")
	wait := td.startSlowRun(t)
	if code := td.stop(); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, td.stderr.String())
	}
	if r := wait(); r.status != http.StatusOK || r.json(t)["output"] != "slow answer" {
		t.Fatalf("in-flight run: %d %s", r.status, r.body)
	}
}

func TestRefusesPublicAddrWithoutToken(t *testing.T) {
	code, _, stderr := runCLI(t, nil, "serve", "--addr", "0.0.0.0:0")
	if code != exitFail || !strings.Contains(stderr, "refusing to serve without authentication on a non-loopback address") || !strings.Contains(stderr, "api_token") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = runCLI(t, nil, "validate", "--config", writeConfig(t, "server:\n  addr: ':8080'\nagents:\n  - id: a\n"))
	if code != exitFail || !strings.Contains(stderr, "refusing") {
		t.Fatalf("validate: exit %d, stderr %q", code, stderr)
	}
	// Opting in is explicit.
	code, _, stderr = runCLI(t, nil, "validate", "--config", writeConfig(t, "server:\n  addr: ':8080'\n  allow_unauthenticated: true\nagents:\n  - id: a\n"))
	if code != exitOK {
		t.Fatalf("allow_unauthenticated: exit %d, stderr %q", code, stderr)
	}
}

// A run longer than server.shutdown_grace is cut off when the grace ends:
// shutdown stays bounded, the exit code says so, the client gets an answer.
//
// Guards: bound server.shutdown_grace (docs/bounds.md).
func TestShutdownGraceBounded(t *testing.T) {
	td := slowDaemon(t, 5*time.Second, "  shutdown_grace: 300ms\n")
	wait := td.startSlowRun(t)
	start := time.Now()
	code := td.stop()
	took := time.Since(start)
	r := wait()
	if code != exitFail || took > 3*time.Second {
		t.Fatalf("exit %d after %s; want 1 within about the 300ms grace", code, took)
	}
	if !strings.Contains(td.stderr.String(), "grace period were cut off") {
		t.Errorf("stderr lacks the cut-off message:\n%s", td.stderr.String())
	}
	if r.status != http.StatusServiceUnavailable {
		t.Errorf("cut-off run answered %d %s, want 503", r.status, r.body)
	}
}

// The body read deadline ends with the body: a run longer than
// server.body_timeout is not cancelled by it. net/http clears the deadline
// when the body is read to its end; what this guards is that nothing in the
// daemon keeps it armed into the run (re-arming it after the decode, or a
// body timeout done as a request deadline). Then net/http's background read
// of the connection times out, cancels the request's context, and this run
// ends 503 "canceled" after 100ms: the test fails (checked by re-arming the
// deadline after a successful decode in decodeJSON). It also checks that the
// run really lasted longer than body_timeout and answered from the model,
// so it cannot pass vacuously.
func TestRunOutlivesBodyTimeout(t *testing.T) {
	const bodyTimeout, runTime = 100 * time.Millisecond, 600 * time.Millisecond
	td := slowDaemon(t, runTime, fmt.Sprintf("  body_timeout: %s\n", bodyTimeout))
	start := time.Now()
	r := td.do(t, "POST", "/api/agents/slow/execute", `{"input":"x"}`)
	took := time.Since(start)
	if r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if out := r.json(t)["output"]; out != "slow answer" {
		t.Fatalf("output %q, want the model's", out)
	}
	if took < runTime {
		t.Fatalf("answered after %s: the run was not longer than body_timeout (%s), so this proves nothing", took, bodyTimeout)
	}
}

// A client that sends its body too slowly is answered when
// server.body_timeout ends, instead of holding the handler.
//
// Guards: bound server.body_timeout (docs/bounds.md).
func TestSlowBodyTimesOut(t *testing.T) {
	td := startDaemon(t, "server:\n  body_timeout: 200ms\nagents:\n  - id: assistant\n", nil)
	conn, err := net.Dial("tcp", strings.TrimPrefix(td.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	fmt.Fprintf(conn, "POST /api/agents/assistant/execute HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"input\":", conn.RemoteAddr())
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || time.Since(start) > 2*time.Second {
		t.Fatalf("status %d after %s", resp.StatusCode, time.Since(start))
	}
}

// Without a token (the default config), a page on any website could make
// the visitor's browser POST to the loopback daemon: a form or a no-cors
// fetch needs no preflight. Every private write must refuse a foreign
// Origin, as the event stream and /mcp do; same-host and allowed origins,
// and clients sending no Origin, still work.
func TestCrossOriginWritesRefused(t *testing.T) {
	td := startDaemon(t, `
server:
  allowed_origins: ["app.example.com"]
agents:
  - id: assistant
`, nil)
	host := strings.TrimPrefix(td.url, "http://")
	writes := 0
	for _, rt := range td.d.rt.Routes() {
		if rt.Scope == axocoatl.ScopePublic || rt.Method == http.MethodGet || rt.Method == http.MethodHead {
			continue
		}
		writes++
		path := concretePath(rt.Pattern)
		body := `{"input":"hi","type":"Custom","receiver_id":"assistant"}`
		for _, origin := range []string{"http://evil.example", "http://" + host + ".evil.example", "null"} {
			r := td.do(t, rt.Method, path, body, "Origin", origin, "Content-Type", "text/plain")
			if r.status != http.StatusForbidden {
				t.Errorf("%s %s from Origin %s: %d %s, want 403", rt.Method, path, origin, r.status, r.body)
			}
		}
	}
	if writes < 2 {
		t.Fatalf("only %d private write routes mounted", writes)
	}
	for _, origin := range []string{"", "http://" + host, "https://app.example.com"} {
		var h []string
		if origin != "" {
			h = []string{"Origin", origin}
		}
		if r := td.do(t, "POST", "/api/agents/assistant/execute", `{"input":"hi"}`, h...); r.status != http.StatusOK {
			t.Errorf("execute from Origin %q: %d %s", origin, r.status, r.body)
		}
	}
	r := td.do(t, "POST", "/api/events", `{"type":"Custom"}`, "Origin", "http://evil.example")
	if e, _ := r.json(t)["error"].(map[string]any); e["code"] != "forbidden" {
		t.Errorf("refusal body %s, want the error shape with code forbidden", r.body)
	}
}

// DNS rebinding: a page at http://attacker.example:PORT whose name is
// re-pointed to 127.0.0.1 is same-origin with itself, so Origin checks
// pass and it can read every response. A daemon on loopback without a
// token must answer only to host names that are its own.
func TestDNSRebindingRefused(t *testing.T) {
	td := startDaemon(t, "", nil)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(td.url, "http://"))
	send := func(method, path, host, body string) response {
		t.Helper()
		req, err := http.NewRequest(method, td.url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Origin", "http://"+host)
		resp, err := td.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return response{status: resp.StatusCode, body: b}
	}
	foreign := "attacker.example:" + port
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/api/agents", ""},
		{"POST", "/api/agents/assistant/execute", `{"input":"hi"}`},
		{"POST", "/a2a/tasks", `{"receiver_id":"assistant","input":"hi"}`},
		{"GET", "/metrics", ""},
	} {
		r := send(c.method, c.path, foreign, c.body)
		if r.status != http.StatusForbidden {
			t.Errorf("%s %s with Host %s: %d %s, want 403", c.method, c.path, foreign, r.status, r.body)
		} else if e, _ := r.json(t)["error"].(map[string]any); e["code"] != "forbidden" {
			t.Errorf("refusal body %s", r.body)
		}
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "[::1]:" + port, "app.localhost:" + port} {
		if r := send("POST", "/api/agents/assistant/execute", host, `{"input":"hi"}`); r.status != http.StatusOK {
			t.Errorf("Host %s: %d %s", host, r.status, r.body)
		}
	}
	// The event stream too: its Origin matches the rebound Host.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(td.url, "http")+"/api/events", &websocket.DialOptions{
		Host:       foreign,
		HTTPHeader: http.Header{"Origin": {"http://" + foreign}},
		HTTPClient: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
	})
	if err == nil {
		conn.CloseNow()
	}
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("stream with Host %s: err %v resp %v; want 403", foreign, err, resp)
	}

	// With a token set, or a public_url naming the host, the name is fine.
	td2 := startDaemon(t, `
server:
  public_url: http://axo.internal:8080
agents:
  - id: assistant
`, nil)
	req, _ := http.NewRequest("GET", td2.url+"/api/agents", nil)
	req.Host = "axo.internal:8080"
	resp2, err := td2.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusOK {
		t.Errorf("Host of public_url: %d", resp2.StatusCode)
	}
}

// A request refused before its handler reads the body (no token, no such
// route, a foreign Origin) must not wait for that body: net/http drains a
// small unread body before writing the answer, so a client that declares
// 100 bytes and sends 9 held the connection and a goroutine for good,
// unauthenticated. The body deadline applies to every request.
func TestRefusedSlowBodyNotAwaited(t *testing.T) {
	td := startDaemon(t, "server:\n  api_token: tok-0123456789abcdef\n  body_timeout: 200ms\nagents:\n  - id: assistant\n", nil)
	for _, tc := range []struct {
		name, path, headers string
		status              int
	}{
		{"no token", "/api/agents/assistant/execute", "", http.StatusUnauthorized},
		{"no route", "/nowhere", "Authorization: Bearer tok-0123456789abcdef\r\n", http.StatusNotFound},
		{"foreign origin", "/api/events", "Authorization: Bearer tok-0123456789abcdef\r\nOrigin: http://evil.example\r\n", http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", strings.TrimPrefix(td.url, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			start := time.Now()
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\n%sContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"input\":", tc.path, conn.RemoteAddr(), tc.headers)
			conn.SetReadDeadline(time.Now().Add(3 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer within 3s (body_timeout 200ms): %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status || time.Since(start) > 2*time.Second {
				t.Fatalf("status %d after %s, want %d", resp.StatusCode, time.Since(start), tc.status)
			}
		})
	}
}

// On shutdown a stream client is told so with a close frame (1001 going
// away), not a bare EOF it cannot tell from a crash.
func TestEventStreamShutdownGoingAway(t *testing.T) {
	td := startDaemon(t, "", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn := dialEvents(t, ctx, td.url, nil, "")
	stopped := make(chan int, 1)
	go func() { stopped <- td.stop() }()
	_, _, err := conn.Read(ctx)
	if st := websocket.CloseStatus(err); st != websocket.StatusGoingAway {
		t.Errorf("read after shutdown: %v (status %v), want a close frame with %v", err, st, websocket.StatusGoingAway)
	}
	if code := <-stopped; code != exitOK {
		t.Errorf("daemon exited %d", code)
	}
}

// A plain GET of the stream (curl, or a proxy that dropped the Upgrade
// headers) and a wrong WebSocket version get the API's JSON error shape
// with a status that says what is wrong, not the library's plain text.
func TestEventStreamHandshakeErrorsInErrorShape(t *testing.T) {
	td := startDaemon(t, "", nil)
	for _, tc := range []struct {
		name    string
		headers []string
		status  int
	}{
		{"no upgrade", nil, http.StatusUpgradeRequired},
		{"old version", []string{"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "8", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}, http.StatusBadRequest},
		{"no key", []string{"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13"}, http.StatusBadRequest},
	} {
		r := td.do(t, "GET", "/api/events", "", tc.headers...)
		var body httpapi.ErrorBody
		if err := json.Unmarshal(r.body, &body); err != nil || r.status != tc.status || body.Error.Code == "" || body.Error.Message == "" {
			t.Errorf("%s: %d %q (%v), want %d in the error shape", tc.name, r.status, r.body, err, tc.status)
		}
	}
}

// JSON is UTF-8 and a WebSocket text frame must be: a browser fails the
// whole connection on one invalid byte, so a single bad event would cut
// every dashboard. POST /api/events refuses such a payload; an event that
// arrives with one anyway (another lattice peer) is sent with U+FFFD.
func TestInvalidUTF8NeverReachesTheStream(t *testing.T) {
	td := startDaemon(t, "", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn := dialEvents(t, ctx, td.url, nil, "")
	r := td.do(t, "POST", "/api/events", "{\"type\":\"X\",\"payload\":{\"k\":\"a\xffb\"}}")
	if e, _ := r.json(t)["error"].(map[string]any); r.status != http.StatusBadRequest || e["code"] != "bad_request" {
		t.Errorf("invalid UTF-8 payload: %d %s, want 400", r.status, r.body)
	}
	ev, err := lattice.New("FromPeer", "peer", json.RawMessage("{\"k\":\"a\xffb\"}"))
	if err != nil {
		t.Fatal(err)
	}
	if err := td.d.engine.Bus().Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	for {
		typ, data, err := conn.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if typ != websocket.MessageText || !utf8.Valid(data) {
			t.Fatalf("frame %q is not valid UTF-8 text", data)
		}
		var f frame
		if err := json.Unmarshal(data, &f); err != nil {
			t.Fatal(err)
		}
		if f.Event.Type == "FromPeer" {
			if want := `{"k":"a` + "\uFFFD" + `b"}`; string(f.Event.Payload) != want {
				t.Fatalf("payload %s, want %s", f.Event.Payload, want)
			}
			break
		}
		if f.Event.Type == "X" {
			t.Fatal("the invalid event was published")
		}
	}
}
