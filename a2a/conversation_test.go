package a2a_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/a2a"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/openai"
	"github.com/axocoatl/axocoatl-go/conversation"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

// wireMessage is one message of a chat-completions request, normalised:
// content as text, tool calls with their arguments re-encoded compactly.
type wireMessage struct {
	Role       string
	Content    string
	ToolCalls  []string // "id name arguments"
	ToolCallID string
}

// convModel is an httptest server speaking the OpenAI chat-completions
// wire that records every request's messages. To a request ending in a
// user message it answers with a call of the tool lookup {"q": <the
// text>}; to one ending in the tool's result, with "answer: <result>".
type convModel struct {
	mu       sync.Mutex
	requests [][]wireMessage
}

func (m *convModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct {
			Role      string `json:"role"`
			Content   any    `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
			ToolCallID string `json:"tool_call_id"`
		} `json:"messages"`
	}
	if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Messages) == 0 {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	var msgs []wireMessage
	for _, x := range req.Messages {
		if x.Role == "system" {
			continue
		}
		wm := wireMessage{Role: x.Role, ToolCallID: x.ToolCallID}
		if s, ok := x.Content.(string); ok {
			wm.Content = s
		}
		for _, c := range x.ToolCalls {
			var args any
			_ = json.Unmarshal([]byte(c.Function.Arguments), &args)
			compact, _ := json.Marshal(args)
			wm.ToolCalls = append(wm.ToolCalls, c.ID+" "+c.Function.Name+" "+string(compact))
		}
		msgs = append(msgs, wm)
	}
	m.mu.Lock()
	m.requests = append(m.requests, msgs)
	n := len(m.requests)
	m.mu.Unlock()

	last := msgs[len(msgs)-1]
	var message map[string]any
	if last.Role == "tool" {
		message = map[string]any{"role": "assistant", "content": "answer: " + last.Content}
	} else {
		args, _ := json.Marshal(map[string]string{"q": last.Content})
		message = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{
			map[string]any{"id": fmt.Sprintf("call-%d", n), "type": "function", "function": map[string]any{"name": "lookup", "arguments": string(args)}},
		}}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "fake",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": message}},
	})
}

func (m *convModel) recorded() [][]wireMessage {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([][]wireMessage(nil), m.requests...)
}

// convFixture is the A2A handler over an Engine whose agent "chat" runs on
// a convModel and may call the native tool lookup; "other" is the echo,
// and "gate" answers only when released. Its conversation store is passed
// in, so that tests can read it and bound it.
type convFixture struct {
	*fixture
	model *convModel
	convs conversation.Store
	gate  *gateModel
}

// gateModel answers "gated: <text>" once it takes a token from release;
// started receives the text of each call.
type gateModel struct {
	started chan string
	release chan struct{}
}

func (m *gateModel) Generate(ctx context.Context, req *agent.Request) (*agent.Response, error) {
	text := req.Messages[len(req.Messages)-1].Content
	select {
	case m.started <- text:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case <-m.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &agent.Response{Content: "gated: " + text}, nil
}

func newConvFixture(t *testing.T, limits conversation.Limits) *convFixture {
	t.Helper()
	cf := &convFixture{model: &convModel{}, convs: conversation.NewMemory(limits),
		gate: &gateModel{started: make(chan string, 4), release: make(chan struct{}, 4)}}
	llm := httptest.NewServer(cf.model)
	t.Cleanup(llm.Close)
	t.Cleanup(func() { _ = cf.convs.Close() }) // after the Engine's Close (cleanups run last first)
	eng := axocoatl.New(axocoatl.Options{Conversations: cf.convs})
	model, err := openai.New(provider.Config{BaseURL: llm.URL + "/v1", APIKey: "sk-test"})
	must(t, err)
	must(t, eng.RegisterTool(axocoatl.Tool{Name: "lookup", Description: "Looks q up.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`),
		Call: func(_ context.Context, c axocoatl.ToolCall) (axocoatl.ToolResult, error) {
			var args struct{ Q string }
			if err := json.Unmarshal(c.Arguments, &args); err != nil {
				return axocoatl.ToolResult{}, err
			}
			return axocoatl.ToolResult{Content: "found: " + args.Q}, nil
		}}))
	must(t, eng.AddAgent(agent.Spec{ID: "chat", Provider: provider.OpenAI, Model: "fake", Tools: []string{"lookup"}}, model))
	must(t, eng.AddAgent(agent.Spec{ID: "other"}, provider.EchoModel{}))
	must(t, eng.AddAgent(agent.Spec{ID: "gate", Timeout: time.Minute}, cf.gate))
	h, err := a2a.New(a2a.Config{})
	must(t, err)
	must(t, eng.Use(context.Background(), h))
	srv := httptest.NewServer(h)
	f := &fixture{eng: eng, h: h, srv: srv, client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}, Timeout: 30 * time.Second}}
	t.Cleanup(func() {
		f.client.CloseIdleConnections()
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Errorf("handler close: %v", err)
		}
		if err := eng.Close(ctx); err != nil {
			t.Errorf("engine close: %v", err)
		}
	})
	cf.fixture = f
	return cf
}

// checkTurns checks what the model was sent for turns turns of one
// conversation (two requests a turn: the user's message, then the tool's
// result): turn n's first request holds every earlier turn — the user's
// message, the assistant's tool call, the tool's result and the answer —
// then the new user message, and nothing else.
func (cf *convFixture) checkTurns(t *testing.T, inputs ...string) {
	t.Helper()
	reqs := cf.model.recorded()
	if len(reqs) != 2*len(inputs) {
		t.Fatalf("the model got %d requests for %d turns, want %d: %+v", len(reqs), len(inputs), 2*len(inputs), reqs)
	}
	var history []wireMessage
	for n, in := range inputs {
		first, second := reqs[2*n], reqs[2*n+1]
		call := fmt.Sprintf("call-%d lookup {\"q\":%q}", 2*n+1, in)
		want := append(append([]wireMessage(nil), history...), wireMessage{Role: "user", Content: in})
		if !reflect.DeepEqual(first, want) {
			t.Fatalf("turn %d: the model's first request is\n%+v\nwant (the earlier turns, then the new message)\n%+v", n+1, first, want)
		}
		want = append(want,
			wireMessage{Role: "assistant", ToolCalls: []string{call}},
			wireMessage{Role: "tool", Content: "found: " + in, ToolCallID: fmt.Sprintf("call-%d", 2*n+1)})
		if !reflect.DeepEqual(second, want) {
			t.Fatalf("turn %d: the model's second request is\n%+v\nwant\n%+v", n+1, second, want)
		}
		history = append(want, wireMessage{Role: "assistant", Content: "answer: found: " + in})
	}
}

// checkConversation checks the store holds the conversation id of agent
// chat with the turns' messages, each tagged with its task.
func (cf *convFixture) checkConversation(t *testing.T, id string, taskIDs ...string) {
	t.Helper()
	ctx := context.Background()
	info, err := cf.convs.Get(ctx, id)
	if err != nil {
		t.Fatalf("conversation %s: %v", id, err)
	}
	if info.AgentID != "chat" || info.Source != string(axocoatl.SourceA2A) || info.Messages != 4*len(taskIDs) {
		t.Fatalf("conversation: %+v, want agent chat, source a2a, %d messages", info, 4*len(taskIDs))
	}
	msgs, err := cf.convs.Messages(ctx, id, 0, 0)
	must(t, err)
	for i, m := range msgs {
		if m.TaskID != taskIDs[i/4] {
			t.Fatalf("message %d (%s %q) is of task %s, want %s", i, m.Role, m.Content, m.TaskID, taskIDs[i/4])
		}
	}
}

var chat = map[string]any{"receiver_id": "chat"}

// Over A2A 0.3 with the a2a-go v0.3 client: a message without contextId
// starts a conversation whose id the task carries; a second message in
// that context is sent the first turn; a third, streamed, the first two,
// and every event of the stream carries the context.
func TestConversationA2A03(t *testing.T) {
	cf := newConvFixture(t, conversation.Limits{})
	c, _ := cf.a2aClient(t, cf.srv.URL, nil)
	ctx := context.Background()

	first := sendTask(t, c, userMessage("turn one", chat))
	if first.Status.State != a2a03.TaskStateCompleted || outputOf(t, first) != "answer: found: turn one" {
		t.Fatalf("turn one: %+v", first)
	}
	if !conversation.ValidID(first.ContextID) || first.History[0].ContextID != first.ContextID {
		t.Fatalf("turn one's contextId %q (history %+v)", first.ContextID, first.History)
	}
	p := userMessage("turn two", chat)
	p.Message.ContextID = first.ContextID
	second := sendTask(t, c, p)
	if second.ContextID != first.ContextID || outputOf(t, second) != "answer: found: turn two" {
		t.Fatalf("turn two: %+v", second)
	}

	p = userMessage("turn three", nil) // the context names the agent
	p.Message.ContextID = first.ContextID
	var thirdID a2a03.TaskID
	var out string
	events := 0
	for ev, err := range c.SendStreamingMessage(ctx, p) {
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		events++
		var ctxID string
		switch e := ev.(type) {
		case *a2a03.Task:
			ctxID, thirdID = e.ContextID, e.ID
		case *a2a03.TaskStatusUpdateEvent:
			ctxID = e.ContextID
		case *a2a03.TaskArtifactUpdateEvent:
			ctxID = e.ContextID
			out += e.Artifact.Parts[0].(a2a03.TextPart).Text
		}
		if ctxID != first.ContextID {
			t.Fatalf("stream event %T carries context %q, want %q", ev, ctxID, first.ContextID)
		}
	}
	if events < 3 || out != "answer: found: turn three" {
		t.Fatalf("stream: %d events, output %q", events, out)
	}
	cf.checkTurns(t, "turn one", "turn two", "turn three")
	cf.checkConversation(t, first.ContextID, string(first.ID), string(second.ID), string(thirdID))

	// tasks/list (a2a-go v0.3's ListTasks) by context_id: the three turns,
	// newest first, not another context's task; two to a page.
	elsewhere := sendTask(t, c, userMessage("elsewhere", nil))
	if elsewhere.ContextID == first.ContextID {
		t.Fatalf("a message without contextId joined context %s", elsewhere.ContextID)
	}
	var ids []a2a03.TaskID
	for token := ""; ; {
		page, err := c.ListTasks(ctx, &a2a03.ListTasksRequest{ContextID: first.ContextID, PageSize: 2, PageToken: token})
		must(t, err)
		if page.TotalSize != 3 || len(page.Tasks) > 2 {
			t.Fatalf("tasks/list page: %+v", page)
		}
		for _, task := range page.Tasks {
			if task.ContextID != first.ContextID {
				t.Fatalf("tasks/list(context_id %s) returned a task of context %s", first.ContextID, task.ContextID)
			}
			ids = append(ids, task.ID)
		}
		if token = page.NextPageToken; token == "" {
			break
		}
	}
	if want := []a2a03.TaskID{thirdID, second.ID, first.ID}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("tasks/list(context_id): %v, want %v", ids, want)
	}

	// A message to the finished first task: -32004 (was -32602), the
	// standard message a2a-go's errors.Is reads, the detail in error.data.
	p = userMessage("again", chat)
	p.Message.ContextID, p.Message.TaskID = first.ContextID, first.ID
	_, err := c.SendMessage(ctx, p)
	if !errors.Is(err, a2a03.ErrUnsupportedOperation) || !strings.Contains(detail03(err), "takes no more messages") {
		t.Fatalf("message to a finished task: %v (%s), want UnsupportedOperation", err, detail03(err))
	}
}

// detail03 is the detail of an a2a-go v0.3 client's error: error.data.error
// on the wire.
func detail03(err error) string {
	var e *a2a03.Error
	if !errors.As(err, &e) {
		return ""
	}
	s, _ := e.Details["error"].(string)
	return s
}

// Over A2A 1.0 with the a2a-go/v2 client, on JSON-RPC and on HTTP+JSON:
// the same conversation, ListTasks by contextId, and -32004 for a message
// to a finished task.
func TestConversationV1(t *testing.T) {
	for _, binding := range []a2a1.TransportProtocol{a2a1.TransportProtocolJSONRPC, a2a1.TransportProtocolHTTPJSON} {
		t.Run(string(binding), func(t *testing.T) {
			cf := newConvFixture(t, conversation.Limits{})
			c, _, rec := cf.v1Client(t, cf.srv.URL, binding)
			ctx := context.Background()

			first := v1Send(t, c, v1Message("turn one", chat))
			if first.Status.State != a2a1.TaskStateCompleted || v1Output(t, first) != "answer: found: turn one" || !conversation.ValidID(first.ContextID) {
				t.Fatalf("turn one: %+v", first)
			}
			req := v1Message("turn two", chat)
			req.Message.ContextID = first.ContextID
			second := v1Send(t, c, req)
			if second.ContextID != first.ContextID || v1Output(t, second) != "answer: found: turn two" {
				t.Fatalf("turn two: %+v", second)
			}
			req = v1Message("turn three", nil)
			req.Message.ContextID = first.ContextID
			var thirdID a2a1.TaskID
			var out string
			for ev, err := range c.SendStreamingMessage(ctx, req) {
				if err != nil {
					t.Fatalf("stream: %v", err)
				}
				var ctxID string
				switch e := ev.(type) {
				case *a2a1.Task:
					ctxID, thirdID = e.ContextID, e.ID
				case *a2a1.TaskStatusUpdateEvent:
					ctxID = e.ContextID
				case *a2a1.TaskArtifactUpdateEvent:
					ctxID = e.ContextID
					out += e.Artifact.Parts[0].Text()
				}
				if ctxID != first.ContextID {
					t.Fatalf("stream event %T carries context %q, want %q", ev, ctxID, first.ContextID)
				}
			}
			if out != "answer: found: turn three" {
				t.Fatalf("stream output %q", out)
			}
			cf.checkTurns(t, "turn one", "turn two", "turn three")
			cf.checkConversation(t, first.ContextID, string(first.ID), string(second.ID), string(thirdID))

			// ListTasks by contextId: the three turns, newest first; another
			// context's task is not among them.
			other := v1Send(t, c, v1Message("elsewhere", map[string]any{"receiver_id": "other"}))
			if other.ContextID == first.ContextID {
				t.Fatalf("a message without contextId joined context %s", other.ContextID)
			}
			list, err := c.ListTasks(ctx, &a2a1.ListTasksRequest{ContextID: first.ContextID})
			must(t, err)
			var ids []a2a1.TaskID
			for _, task := range list.Tasks {
				ids = append(ids, task.ID)
			}
			if want := []a2a1.TaskID{thirdID, second.ID, first.ID}; !reflect.DeepEqual(ids, want) || list.TotalSize != 3 {
				t.Fatalf("ListTasks(contextId): %v (total %d), want %v", ids, list.TotalSize, want)
			}

			req = v1Message("again", chat)
			req.Message.ContextID, req.Message.TaskID = first.ContextID, first.ID
			_, err = c.SendMessage(ctx, req)
			if !errors.Is(err, a2a1.ErrUnsupportedOperation) || !strings.Contains(err.Error(), "takes no more messages") {
				t.Fatalf("message to a finished task: %v, want UnsupportedOperation", err)
			}
			// A stream refused at intake is the error, not a task.
			req = v1Message("bad", chat)
			req.Message.ContextID = "not a context id"
			var streamErr error
			for _, err := range c.SendStreamingMessage(ctx, req) {
				if streamErr = err; err != nil {
					break
				}
			}
			if !errors.Is(streamErr, a2a1.ErrInvalidParams) || !strings.Contains(streamErr.Error(), `contextId "not a context id" is not a conversation id`) {
				t.Fatalf("stream with a malformed contextId: %v, want InvalidParams", streamErr)
			}
			if binding == a2a1.TransportProtocolHTTPJSON && !strings.Contains(rec.seen(), "POST /a2a/message:stream") {
				t.Fatalf("the client did not use HTTP+JSON:\n%s", rec.seen())
			}
		})
	}
}

type jsConversation struct {
	ProtocolVersion string `json:"protocolVersion"`
	Turns           []struct {
		ID       string   `json:"id"`
		Context  string   `json:"context"`
		Contexts []string `json:"contexts"`
		State    int      `json:"state"`
		Output   string   `json:"output"`
	} `json:"turns"`
	Finished struct {
		Chain   []string `json:"chain"`
		Message string   `json:"message"`
	} `json:"finished"`
}

// Through @a2a-js/sdk 1.3.0, on A2A 1.0 JSON-RPC, HTTP+JSON and the 0.3
// wire: three messages in one context (the third streamed), each turn sent
// the ones before, and its typed UnsupportedOperation error for a message
// to a finished task.
func TestConversationA2AJS(t *testing.T) {
	modules := testutil.NodeModules(t, a2aJSPackage)
	for _, tc := range []struct{ mode, version, finished string }{
		{"default", "1.0", "JsonRpcUnsupportedOperationError"},
		{"rest", "1.0", "RestUnsupportedOperationError"},
		{"legacy03", "0.3", "UnsupportedOperationError"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			cf := newConvFixture(t, conversation.Limits{})
			raw := testutil.RunNode(t, modules, "testdata/a2ajs_conversation.mjs", 2*time.Minute, cf.srv.URL, tc.mode, "chat")
			var r jsConversation
			if err := json.Unmarshal([]byte(strings.TrimSpace(raw)), &r); err != nil {
				t.Fatalf("node output is not the report: %v\n%s", err, raw)
			}
			if r.ProtocolVersion != tc.version || len(r.Turns) != 3 {
				t.Fatalf("report: %s", raw)
			}
			ctxID := r.Turns[0].Context
			if !conversation.ValidID(ctxID) || r.Turns[1].Context != ctxID {
				t.Fatalf("contexts of the turns: %s", raw)
			}
			for i, in := range []string{"turn one", "turn two", "turn three"} {
				if r.Turns[i].State != jsCompleted || r.Turns[i].Output != "answer: found: "+in {
					t.Fatalf("turn %d: %+v", i+1, r.Turns[i])
				}
			}
			if len(r.Turns[2].Contexts) < 3 {
				t.Fatalf("stream events: %v", r.Turns[2].Contexts)
			}
			for _, c := range r.Turns[2].Contexts {
				if c != ctxID {
					t.Fatalf("a stream event carries context %q, want %q", c, ctxID)
				}
			}
			cf.checkTurns(t, "turn one", "turn two", "turn three")
			cf.checkConversation(t, ctxID, r.Turns[0].ID, r.Turns[1].ID, r.Turns[2].ID)
			// Over 1.0 the message carries the detail; the JS client's 0.3
			// path keeps only the standard message.
			if !slices.Contains(r.Finished.Chain, tc.finished) || (tc.version == "1.0" && !strings.Contains(r.Finished.Message, "takes no more messages")) {
				t.Fatalf("message to a finished task: %+v, want a %s", r.Finished, tc.finished)
			}
		})
	}
}
