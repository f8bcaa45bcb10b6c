package a2a_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2aclient "github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
	v1client "github.com/a2aproject/a2a-go/v2/a2aclient"
	v1card "github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/a2a"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/approval"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
	"github.com/axocoatl/axocoatl-go/mcpclient"
)

// toolModel calls tool with the user's message as arguments, then answers
// "done: " and what the tool gave back, which it records (what the model
// was told).
type toolModel struct {
	tool string
	told chan string
}

func (m toolModel) Generate(ctx context.Context, req *agent.Request) (*agent.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	last := req.Messages[len(req.Messages)-1]
	if last.Role == agent.RoleTool {
		select {
		case m.told <- last.Content:
		default:
		}
		return &agent.Response{Content: "done: " + last.Content}, nil
	}
	return &agent.Response{ToolCalls: []agent.ToolCall{{ID: "call-1", Name: m.tool, Arguments: json.RawMessage(last.Content)}}}, nil
}

// inputFixture is an Engine whose agent "gated" calls tool "write", which
// the approval module holds for a human, and whose agent "asker" calls
// tool "ask", which puts a question (a form) to the user through the
// run's prompter, as a gate relaying an MCP server's question does; both
// served over A2A.
type inputFixture struct {
	eng     *axocoatl.Engine
	appr    *approval.Module
	h       *a2a.Handler
	srv     *httptest.Server // the A2A handler
	apprSrv *httptest.Server // the approvals API
	calls   atomic.Int64     // runs of write
	started chan time.Time   // a run of write began
	told    chan string      // what the model was told of the tool's result
	answers chan axocoatl.UserAnswer
}

var questionSchema = json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"nights":{"type":"integer"}},"required":["city"]}`)

func newInputFixture(t testing.TB) *inputFixture {
	t.Helper()
	f := &inputFixture{started: make(chan time.Time, 16), told: make(chan string, 16), answers: make(chan axocoatl.UserAnswer, 16)}
	f.eng = axocoatl.New(axocoatl.Options{Logger: slog.New(slog.DiscardHandler)})
	m, err := approval.New(approval.Config{Default: approval.Allow, Timeout: time.Minute,
		Rules: []approval.Rule{{Tool: "write", Decision: approval.Prompt}}})
	must(t, err)
	f.appr = m
	must(t, f.eng.Use(context.Background(), m))
	must(t, f.eng.RegisterTool(axocoatl.Tool{Name: "write", Description: "Writes a file.",
		Call: func(_ context.Context, c axocoatl.ToolCall) (axocoatl.ToolResult, error) {
			f.started <- time.Now()
			f.calls.Add(1)
			return axocoatl.ToolResult{Content: "wrote " + string(c.Arguments)}, nil
		}}))
	must(t, f.eng.RegisterTool(axocoatl.Tool{Name: "ask", Description: "Asks the user.",
		Call: func(ctx context.Context, c axocoatl.ToolCall) (axocoatl.ToolResult, error) {
			p := axocoatl.UserPrompterFrom(ctx)
			if p == nil {
				return axocoatl.ToolResult{Content: "no prompter", IsError: true}, nil
			}
			a, err := p.PromptUser(ctx, axocoatl.UserPrompt{Message: "Where to?", Schema: questionSchema})
			if err != nil {
				return axocoatl.ToolResult{Content: err.Error(), IsError: true}, nil
			}
			f.answers <- a
			b, _ := json.Marshal(a.Content)
			return axocoatl.ToolResult{Content: fmt.Sprintf("accepted=%v %s", a.Accepted, b)}, nil
		}}))
	must(t, f.eng.AddAgent(agent.Spec{ID: "gated", Tools: []string{"write"}}, toolModel{"write", f.told}))
	must(t, f.eng.AddAgent(agent.Spec{ID: "asker", Tools: []string{"ask"}}, toolModel{"ask", f.told}))
	h, err := a2a.New(a2a.Config{})
	must(t, err)
	must(t, f.eng.Use(context.Background(), h))
	f.h = h
	f.srv = httptest.NewServer(h)
	f.apprSrv = httptest.NewServer(m)
	t.Cleanup(func() {
		f.srv.Close()
		f.apprSrv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		must(t, h.Close(ctx))
		must(t, f.eng.Close(ctx))
	})
	return f
}

// bearer sends every request with one credential, as a caller with its
// own token (a fronting proxy's, or a scoped token) does.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func (f *inputFixture) httpClient(token string) *http.Client {
	return &http.Client{Transport: bearer{token, http.DefaultTransport}, Timeout: 30 * time.Second}
}

func (f *inputFixture) v1(t testing.TB, token string, binding a2a1.TransportProtocol) *v1client.Client {
	t.Helper()
	ctx := context.Background()
	hc := f.httpClient(token)
	card, err := v1card.NewResolver(hc).Resolve(ctx, f.srv.URL)
	must(t, err)
	c, err := v1client.NewFromCard(ctx, card, v1client.WithJSONRPCTransport(hc), v1client.WithRESTTransport(hc),
		v1client.WithConfig(v1client.Config{PreferredTransports: []a2a1.TransportProtocol{binding}}))
	must(t, err)
	t.Cleanup(func() { _ = c.Destroy() })
	return c
}

func (f *inputFixture) v03(t testing.TB, token string) *a2aclient.Client {
	t.Helper()
	ctx := context.Background()
	card, err := agentcard.DefaultResolver.Resolve(ctx, f.srv.URL)
	must(t, err)
	c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(f.httpClient(token)))
	must(t, err)
	t.Cleanup(func() { _ = c.Destroy() })
	return c
}

// checkAsked checks an input-required status message: it names the tool,
// the agent and the arguments, says how to answer, and carries the
// approval as a data part.
func checkAsked(t testing.TB, text string, data map[string]any) {
	t.Helper()
	for _, want := range []string{"write", "gated", `{"path":"a.txt"}`, "allow or deny", `"remember":"once"|"always"`} {
		if !strings.Contains(text, want) {
			t.Errorf("status message %q does not say %q", text, want)
		}
	}
	if data["kind"] != "approval" || data["tool"] != "write" || data["agent_id"] != "gated" || data["arguments"] != `{"path":"a.txt"}` || data["approval_id"] == "" {
		t.Errorf("status data part %v", data)
	}
}

func v1Asked(t testing.TB, st a2a1.TaskStatus) {
	t.Helper()
	if st.State != a2a1.TaskStateInputRequired || st.Message == nil || len(st.Message.Parts) != 2 {
		t.Fatalf("status %+v, want input-required with a text and a data part", st)
	}
	data, _ := st.Message.Parts[1].Data().(map[string]any)
	checkAsked(t, st.Message.Parts[0].Text(), data)
}

func v1Answer(task *a2a1.Task, part *a2a1.Part) *a2a1.SendMessageRequest {
	m := a2a1.NewMessage(a2a1.MessageRoleUser, part)
	m.TaskID, m.ContextID = task.ID, task.ContextID
	return &a2a1.SendMessageRequest{Message: m}
}

func (f *inputFixture) toldWithin(t testing.TB) string {
	t.Helper()
	select {
	case s := <-f.told:
		return s
	case <-time.After(20 * time.Second):
		t.Fatal("the model was told nothing within 20s")
		return ""
	}
}

// a2a-go/v2 over JSON-RPC and HTTP+JSON: a blocking send returns the task
// input-required, naming the tool and its arguments; GetTask shows the
// same; an answer from other credentials is refused, and a malformed one
// refused saying how to answer, the task still waiting; allow runs the
// tool once and the task completes with the model told its result.
func TestInputRequiredV1Allow(t *testing.T) {
	for _, binding := range []a2a1.TransportProtocol{a2a1.TransportProtocolJSONRPC, a2a1.TransportProtocolHTTPJSON} {
		t.Run(string(binding), func(t *testing.T) {
			f := newInputFixture(t)
			ctx := context.Background()
			c := f.v1(t, "alice-token-0123456789", binding)
			task := v1Send(t, c, v1Message(`{"path":"a.txt"}`, map[string]any{"receiver_id": "gated"}))
			v1Asked(t, task.Status)
			got, err := c.GetTask(ctx, &a2a1.GetTaskRequest{ID: task.ID})
			must(t, err)
			v1Asked(t, got.Status)

			other := f.v1(t, "mallory-token-0123456789", binding)
			_, err = other.SendMessage(ctx, v1Answer(task, a2a1.NewDataPart(map[string]any{"approval": "allow"})))
			if !errors.Is(err, a2a1.ErrUnsupportedOperation) || !strings.Contains(err.Error(), "other credentials") {
				t.Fatalf("answer from other credentials: %v, want UnsupportedOperation naming the credentials", err)
			}
			_, err = c.SendMessage(ctx, v1Answer(task, a2a1.NewDataPart(map[string]any{"approval": "maybe"})))
			if !errors.Is(err, a2a1.ErrInvalidParams) || !strings.Contains(err.Error(), "allow or deny") {
				t.Fatalf("malformed answer: %v, want InvalidParams saying how to answer", err)
			}
			if f.calls.Load() != 0 {
				t.Fatal("the tool ran before an answer")
			}

			done := v1Send(t, c, v1Answer(task, a2a1.NewDataPart(map[string]any{"approval": "allow", "remember": "once"})))
			if done.ID != task.ID || done.Status.State != a2a1.TaskStateCompleted {
				t.Fatalf("after allow: %s %s, want task %s completed", done.ID, done.Status.State, task.ID)
			}
			if out := done.Artifacts[0].Parts[0].Text(); out != `done: wrote {"path":"a.txt"}` {
				t.Fatalf("output %q", out)
			}
			if n := f.calls.Load(); n != 1 {
				t.Fatalf("the tool ran %d times, want once", n)
			}
			// A finished task takes no more answers.
			if _, err := c.SendMessage(ctx, v1Answer(task, a2a1.NewTextPart("allow"))); !errors.Is(err, a2a1.ErrUnsupportedOperation) {
				t.Fatalf("answer to a finished task: %v", err)
			}
		})
	}
}

// A stream ends at input-required with the question; the answer deny, sent
// as a stream, follows the task to its end: the tool never runs and the
// model is told a human denied it.
func TestInputRequiredV1StreamDeny(t *testing.T) {
	for _, binding := range []a2a1.TransportProtocol{a2a1.TransportProtocolJSONRPC, a2a1.TransportProtocolHTTPJSON} {
		t.Run(string(binding), func(t *testing.T) {
			f := newInputFixture(t)
			ctx := context.Background()
			c := f.v1(t, "alice-token-0123456789", binding)
			var task *a2a1.Task
			var last a2a1.Event
			for ev, err := range c.SendStreamingMessage(ctx, v1Message(`{"path":"a.txt"}`, map[string]any{"receiver_id": "gated"})) {
				must(t, err)
				if tk, ok := ev.(*a2a1.Task); ok {
					task = tk
				}
				last = ev
			}
			st, ok := last.(*a2a1.TaskStatusUpdateEvent)
			if !ok || task == nil {
				t.Fatalf("stream ended with %#v", last)
			}
			v1Asked(t, st.Status)

			var states []a2a1.TaskState
			for ev, err := range c.SendStreamingMessage(ctx, v1Answer(task, a2a1.NewTextPart("deny"))) {
				must(t, err)
				switch ev := ev.(type) {
				case *a2a1.Task:
					states = append(states, ev.Status.State)
				case *a2a1.TaskStatusUpdateEvent:
					states = append(states, ev.Status.State)
				}
			}
			if len(states) == 0 || states[len(states)-1] != a2a1.TaskStateCompleted {
				t.Fatalf("answer stream states %v, want it to end completed", states)
			}
			if told := f.toldWithin(t); !strings.Contains(told, "A human denied this call of tool write") {
				t.Fatalf("the model was told %q", told)
			}
			if f.calls.Load() != 0 {
				t.Fatal("a denied tool ran")
			}
		})
	}
}

// a2a-go v0.3 (the 0.3 wire, input-required): allow runs the tool once;
// SubscribeToTask (resubscribe) of a waiting task shows the question and
// ends; remember: always is remembered, by a2a_input.
func TestInputRequiredV03(t *testing.T) {
	f := newInputFixture(t)
	ctx := context.Background()
	c := f.v03(t, "alice-token-0123456789")
	res, err := c.SendMessage(ctx, userMessage(`{"path":"a.txt"}`, map[string]any{"receiver_id": "gated"}))
	must(t, err)
	task, ok := res.(*a2a03.Task)
	if !ok || task.Status.State != a2a03.TaskStateInputRequired || task.Status.Message == nil || len(task.Status.Message.Parts) != 2 {
		t.Fatalf("send: %#v", res)
	}
	text := task.Status.Message.Parts[0].(a2a03.TextPart).Text
	checkAsked(t, text, task.Status.Message.Parts[1].(a2a03.DataPart).Data)

	var last a2a03.Event
	for ev, err := range c.ResubscribeToTask(ctx, &a2a03.TaskIDParams{ID: task.ID}) {
		must(t, err)
		last = ev
	}
	if st, ok := last.(*a2a03.TaskStatusUpdateEvent); !ok || st.Status.State != a2a03.TaskStateInputRequired || !st.Final {
		t.Fatalf("resubscribe ended with %#v, want a final input-required status", last)
	}

	other := f.v03(t, "mallory-token-0123456789")
	answer := func(c *a2aclient.Client, part a2a03.Part) (a2a03.SendMessageResult, error) {
		m := a2a03.NewMessageForTask(a2a03.MessageRoleUser, task, part)
		return c.SendMessage(ctx, &a2a03.MessageSendParams{Message: m})
	}
	if _, err := answer(other, a2a03.TextPart{Text: "allow"}); !errors.Is(err, a2a03.ErrUnsupportedOperation) {
		t.Fatalf("answer from other credentials: %v", err)
	}
	res, err = answer(c, a2a03.DataPart{Data: map[string]any{"approval": "allow", "remember": "always"}})
	must(t, err)
	if done, ok := res.(*a2a03.Task); !ok || done.Status.State != a2a03.TaskStateCompleted {
		t.Fatalf("after allow: %#v", res)
	}
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("the tool ran %d times, want once", n)
	}
	// remember: always: the next call of the tool by the agent asks no one.
	res, err = c.SendMessage(ctx, userMessage(`{"path":"a.txt"}`, map[string]any{"receiver_id": "gated"}))
	must(t, err)
	if next, ok := res.(*a2a03.Task); !ok || next.Status.State != a2a03.TaskStateCompleted || f.calls.Load() != 2 {
		t.Fatalf("after remember always: %#v, %d calls", res, f.calls.Load())
	}
	if d := f.appr.Decisions(); len(d) != 1 || d[0].ResolvedBy != a2a.InputBy || d[0].Decision != approval.Allow {
		t.Fatalf("remembered %+v", d)
	}
}

// Another channel answers first (the approvals API): the task leaves
// input-required on its own and completes; the caller's late answer is
// refused, saying why.
func TestInputRequiredOtherChannel(t *testing.T) {
	f := newInputFixture(t)
	ctx := context.Background()
	c := f.v1(t, "alice-token-0123456789", a2a1.TransportProtocolJSONRPC)
	task := v1Send(t, c, v1Message(`{"path":"a.txt"}`, map[string]any{"receiver_id": "gated"}))
	v1Asked(t, task.Status)
	id, _ := task.Status.Message.Parts[1].Data().(map[string]any)["approval_id"].(string)
	res, err := http.Post(f.apprSrv.URL+"/api/approvals/"+id, "application/json", strings.NewReader(`{"decision":"allow"}`))
	must(t, err)
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("approvals API: %d %s", res.StatusCode, b)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := c.GetTask(ctx, &a2a1.GetTaskRequest{ID: task.ID})
		must(t, err)
		if got.Status.State == a2a1.TaskStateCompleted {
			break
		}
		if got.Status.State != a2a1.TaskStateWorking && got.Status.State != a2a1.TaskStateInputRequired || time.Now().After(deadline) {
			t.Fatalf("task %s after the API's allow", got.Status.State)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if f.calls.Load() != 1 {
		t.Fatalf("the tool ran %d times", f.calls.Load())
	}
	if _, err := c.SendMessage(ctx, v1Answer(task, a2a1.NewTextPart("deny"))); !errors.Is(err, a2a1.ErrUnsupportedOperation) {
		t.Fatalf("late answer: %v", err)
	}
}

// A question (a form): the schema goes out in the data part; values that
// do not match it are refused, the task still waiting; matching values
// reach the asker; the text decline declines.
func TestInputRequiredQuestion(t *testing.T) {
	f := newInputFixture(t)
	ctx := context.Background()
	c := f.v1(t, "alice-token-0123456789", a2a1.TransportProtocolJSONRPC)
	for _, tc := range []struct {
		name   string
		answer *a2a1.Part
		want   string
	}{
		{"values", a2a1.NewDataPart(map[string]any{"city": "Oaxaca", "nights": 3}), `accepted=true {"city":"Oaxaca","nights":3}`},
		{"decline", a2a1.NewTextPart("decline"), "accepted=false null"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task := v1Send(t, c, v1Message(`{}`, map[string]any{"receiver_id": "asker"}))
			st := task.Status
			if st.State != a2a1.TaskStateInputRequired || st.Message == nil || len(st.Message.Parts) != 2 {
				t.Fatalf("status %+v", st)
			}
			data, _ := st.Message.Parts[1].Data().(map[string]any)
			schema, _ := data["schema"].(map[string]any)
			if data["kind"] != "question" || schema["required"] == nil || !strings.Contains(st.Message.Parts[0].Text(), "Where to?") {
				t.Fatalf("question %v / %q", data, st.Message.Parts[0].Text())
			}
			_, err := c.SendMessage(ctx, v1Answer(task, a2a1.NewDataPart(map[string]any{"nights": "three"})))
			if !errors.Is(err, a2a1.ErrInvalidParams) || !strings.Contains(err.Error(), "schema") {
				t.Fatalf("values off the schema: %v", err)
			}
			done := v1Send(t, c, v1Answer(task, tc.answer))
			if done.Status.State != a2a1.TaskStateCompleted {
				t.Fatalf("after the answer: %s", done.Status.State)
			}
			if out := done.Artifacts[0].Parts[0].Text(); out != "done: "+tc.want {
				t.Fatalf("output %q, want done: %s", out, tc.want)
			}
			if a := <-f.answers; a.By != a2a.InputBy {
				t.Fatalf("answer by %q", a.By)
			}
		})
	}
}

// Two callers with no credential are the same caller (there is nothing to
// tell them apart); a caller with a credential is not one without.
func TestInputRequiredAnonymous(t *testing.T) {
	f := newInputFixture(t)
	ctx := context.Background()
	anon := func() *v1client.Client {
		card, err := v1card.NewResolver(http.DefaultClient).Resolve(ctx, f.srv.URL)
		must(t, err)
		c, err := v1client.NewFromCard(ctx, card, v1client.WithJSONRPCTransport(http.DefaultClient))
		must(t, err)
		t.Cleanup(func() { _ = c.Destroy() })
		return c
	}
	task := v1Send(t, anon(), v1Message(`{"path":"a.txt"}`, map[string]any{"receiver_id": "gated"}))
	v1Asked(t, task.Status)
	withToken := f.v1(t, "alice-token-0123456789", a2a1.TransportProtocolJSONRPC)
	if _, err := withToken.SendMessage(ctx, v1Answer(task, a2a1.NewTextPart("allow"))); !errors.Is(err, a2a1.ErrUnsupportedOperation) {
		t.Fatalf("answer with a credential to an anonymous task: %v", err)
	}
	if done := v1Send(t, anon(), v1Answer(task, a2a1.NewTextPart("allow"))); done.Status.State != a2a1.TaskStateCompleted {
		t.Fatalf("after allow: %s", done.Status.State)
	}
}

// The ts-proto TaskState number @a2a-js/sdk reports for input-required.
const jsInputRequired = 6

// @a2a-js/sdk 1.3.0 (A2A 1.0 JSON-RPC, HTTP+JSON, and the 0.3 wire): a
// send comes back input-required naming the tool and its arguments,
// GetTask shows it, an answer with other credentials is refused, allow
// runs the tool once; a stream ends input-required and deny never runs the
// tool, the model told.
func TestA2AJSInputRequired(t *testing.T) {
	modules := testutil.NodeModules(t, a2aJSPackage)
	for _, mode := range []string{"default", "rest", "legacy03"} {
		t.Run(mode, func(t *testing.T) {
			f := newInputFixture(t)
			raw := testutil.RunNode(t, modules, "testdata/a2ajs_input.mjs", 2*time.Minute, f.srv.URL, mode, "alice-token-0123456789", "mallory-token-0123456789")
			var r struct {
				ProtocolVersion string
				Asked, Get      struct {
					State int
					Text  string
					Data  map[string]any
				}
				StreamEnd struct {
					State int
					Text  string
					Data  map[string]any
				}
				Intruder        string
				Allowed, Denied struct {
					State  int
					Output string
				}
			}
			if err := json.Unmarshal([]byte(strings.TrimSpace(raw)), &r); err != nil {
				t.Fatalf("node output is not the report: %v\n%s", err, raw)
			}
			for name, s := range map[string]struct {
				State int
				Text  string
				Data  map[string]any
			}{"send": r.Asked, "getTask": r.Get} {
				if s.State != jsInputRequired {
					t.Errorf("%s: state %d, want input-required", name, s.State)
				}
				checkAsked(t, s.Text, s.Data)
			}
			if r.StreamEnd.State != jsInputRequired || !strings.Contains(r.StreamEnd.Text, `{"path":"b.txt"}`) {
				t.Errorf("stream end %+v", r.StreamEnd)
			}
			// The 0.3 wire keeps the standard message (-32004) and puts
			// the detail in error.data, which the JS client's 0.3 path drops.
			want := "other credentials"
			if mode == "legacy03" {
				want = "this operation is not supported"
			}
			if !strings.Contains(r.Intruder, want) {
				t.Errorf("answer from other credentials: %q", r.Intruder)
			}
			if r.Allowed.State != jsCompleted || r.Allowed.Output != `done: wrote {"path":"a.txt"}` {
				t.Errorf("after allow: %+v", r.Allowed)
			}
			if r.Denied.State != jsCompleted || !strings.Contains(r.Denied.Output, "A human denied this call of tool write") {
				t.Errorf("after deny: %+v", r.Denied)
			}
			if n := f.calls.Load(); n != 1 {
				t.Errorf("the tool ran %d times, want once (allowed) and not for the denied call", n)
			}
		})
	}
}

// The gated tool is a go-sdk MCP server's, reached through mcpclient: the
// question names the tool and its server; allow calls the server once.
func TestInputRequiredMCPTool(t *testing.T) {
	eng := axocoatl.New(axocoatl.Options{Logger: slog.New(slog.DiscardHandler)})
	gate, err := approval.New(approval.Config{Default: approval.Allow, Timeout: time.Minute,
		Rules: []approval.Rule{{Tool: "mcp__files__write", Decision: approval.Prompt}}})
	must(t, err)
	must(t, eng.Use(context.Background(), gate))
	var calls atomic.Int64
	srv := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "write", Description: "Writes a file."},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			Path string `json:"path"`
		}) (*mcp.CallToolResult, any, error) {
			calls.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "wrote " + in.Path}}}, nil, nil
		})
	mc, err := mcpclient.New(mcpclient.Config{Servers: []mcpclient.ServerConfig{{Name: "files", Dial: func(ctx context.Context) (mcp.Transport, error) {
		ct, st := mcp.NewInMemoryTransports()
		if _, err := srv.Connect(ctx, st, nil); err != nil {
			return nil, err
		}
		return ct, nil
	}}}})
	must(t, err)
	must(t, eng.Use(context.Background(), mc))
	ready, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	must(t, mc.Ready(ready))
	told := make(chan string, 4)
	must(t, eng.AddAgent(agent.Spec{ID: "gated"}, toolModel{"mcp__files__write", told}))
	h, err := a2a.New(a2a.Config{})
	must(t, err)
	must(t, eng.Use(context.Background(), h))
	hs := httptest.NewServer(h)
	t.Cleanup(func() {
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		must(t, eng.Close(ctx))
	})

	f := &inputFixture{srv: hs}
	c := f.v1(t, "alice-token-0123456789", a2a1.TransportProtocolJSONRPC)
	task := v1Send(t, c, v1Message(`{"path":"a.txt"}`, map[string]any{"receiver_id": "gated"}))
	st := task.Status
	if st.State != a2a1.TaskStateInputRequired || st.Message == nil || len(st.Message.Parts) != 2 {
		t.Fatalf("status %+v", st)
	}
	text := st.Message.Parts[0].Text()
	data, _ := st.Message.Parts[1].Data().(map[string]any)
	for _, want := range []string{"mcp__files__write", "(server files)", `{"path":"a.txt"}`} {
		if !strings.Contains(text, want) {
			t.Errorf("status message %q does not say %q", text, want)
		}
	}
	if data["tool"] != "mcp__files__write" || data["server"] != "files" {
		t.Errorf("data part %v", data)
	}
	if calls.Load() != 0 {
		t.Fatal("the MCP tool ran before an answer")
	}
	done := v1Send(t, c, v1Answer(task, a2a1.NewTextPart("allow")))
	if done.Status.State != a2a1.TaskStateCompleted || done.Artifacts[0].Parts[0].Text() != "done: wrote a.txt" {
		t.Fatalf("after allow: %s %v", done.Status.State, done.Artifacts)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the MCP tool ran %d times, want once", n)
	}
}

// The Handler's Close while a task waits for input: the question is
// withdrawn, the task ends canceled, and Close does not wait for the
// approval's timeout. (Engine.Close alone lets in-flight runs finish until
// its ctx ends, a run waiting for a human included, as for every door.)
func TestInputRequiredClose(t *testing.T) {
	f := newInputFixture(t)
	c := f.v1(t, "alice-token-0123456789", a2a1.TransportProtocolJSONRPC)
	task := v1Send(t, c, v1Message(`{"path":"a.txt"}`, map[string]any{"receiver_id": "gated"}))
	v1Asked(t, task.Status)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	must(t, f.h.Close(ctx))
	if d := time.Since(start); d > 15*time.Second {
		t.Fatalf("close took %s", d)
	}
	got, err := c.GetTask(ctx, &a2a1.GetTaskRequest{ID: task.ID})
	must(t, err)
	if got.Status.State != a2a1.TaskStateCanceled {
		t.Fatalf("after Close: %s", got.Status.State)
	}
	if f.calls.Load() != 0 {
		t.Fatal("the tool ran")
	}
}

// A new turn of a context whose task waits for input is refused, saying
// how to answer the waiting task.
func TestInputRequiredBusyContext(t *testing.T) {
	f := newInputFixture(t)
	c := f.v1(t, "alice-token-0123456789", a2a1.TransportProtocolJSONRPC)
	task := v1Send(t, c, v1Message(`{"path":"a.txt"}`, map[string]any{"receiver_id": "gated"}))
	v1Asked(t, task.Status)
	next := v1Message(`{"path":"b.txt"}`, nil)
	next.Message.ContextID = task.ContextID
	_, err := c.SendMessage(context.Background(), next)
	if !errors.Is(err, a2a1.ErrUnsupportedOperation) || !strings.Contains(err.Error(), "answer it with a message carrying taskId "+string(task.ID)) {
		t.Fatalf("new turn of a waiting context: %v", err)
	}
	if done := v1Send(t, c, v1Answer(task, a2a1.NewTextPart("allow"))); done.Status.State != a2a1.TaskStateCompleted {
		t.Fatalf("after allow: %s", done.Status.State)
	}
}
