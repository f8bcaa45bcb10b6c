package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/openai"
	"github.com/axocoatl/axocoatl-go/conversation"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
	"github.com/axocoatl/axocoatl-go/secret"
)

// convAPI is the API over an Engine with the echo agents "assistant" and
// "other", and "chat" on a ChatRecorder model calling the tool "clock"
// (which says "noon").
type convAPI struct {
	srv   *httptest.Server
	eng   *axocoatl.Engine
	model *testutil.ChatRecorder
}

func newConvAPI(t *testing.T) *convAPI {
	t.Helper()
	srv, _, eng := serveAPI(t, Config{})
	rec := testutil.NewChatRecorder(t, "clock")
	model, err := openai.New(provider.Config{BaseURL: rec.URL, APIKey: secret.Secret("sk-test"), MaxRetries: -1})
	if err == nil {
		err = eng.AddAgent(agent.Spec{ID: "chat", Provider: provider.OpenAI, Model: "recorder"}, model)
	}
	if err == nil {
		err = eng.AddAgent(agent.Spec{ID: "other"}, provider.EchoModel{})
	}
	if err == nil {
		err = eng.RegisterTool(axocoatl.Tool{Name: "clock", Description: "tells the time", Call: func(context.Context, axocoatl.ToolCall) (axocoatl.ToolResult, error) {
			return axocoatl.ToolResult{Content: "noon"}, nil
		}})
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Client().CloseIdleConnections)
	return &convAPI{srv: srv, eng: eng, model: rec}
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("%d %s: %v", r.status, r.body, err)
	}
}

// errorCode is the code of an error body, "" when it is none.
func (r reply) errorCode() string {
	var e ErrorBody
	json.Unmarshal(r.body, &e)
	return e.Error.Code
}

func (a *convAPI) do(t *testing.T, method, path, body string) reply {
	t.Helper()
	r, err := a.try(method, path, body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// try is do for goroutines other than the test's.
func (a *convAPI) try(method, path, body string) (reply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.srv.URL+path, rd)
	if err != nil {
		return reply{}, err
	}
	res, err := a.srv.Client().Do(req)
	if err != nil {
		return reply{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return reply{res.StatusCode, res.Header, b}, err
}

// execute runs a turn and wants 200.
func (a *convAPI) execute(t *testing.T, agentID, input, convID string) ExecuteResponse {
	t.Helper()
	r := a.do(t, http.MethodPost, "/api/agents/"+agentID+"/execute", executeBody(input, convID))
	if r.status != http.StatusOK {
		t.Fatalf("execute %s %q in %q: %d %s", agentID, input, convID, r.status, r.body)
	}
	var res ExecuteResponse
	r.decode(t, &res)
	return res
}

func executeBody(input, convID string) string {
	b, _ := json.Marshal(map[string]string{"input": input, "conversation_id": convID})
	return string(b)
}

// A conversation started over HTTP and continued: the model's request of
// the second turn holds the whole first turn, the tool call and its result
// included; the store holds both turns; a one-shot task is recorded
// nowhere and its answer names no conversation.
func TestConversationContinuedOverHTTP(t *testing.T) {
	a := newConvAPI(t)
	first := a.execute(t, "chat", "what time is it?", conversation.New)
	if !conversation.ValidID(first.ConversationID) || first.Output != testutil.ChatAnswer("what time is it?", "noon") {
		t.Fatalf("first turn = %+v", first)
	}
	second := a.execute(t, "chat", "and now?", first.ConversationID)
	if second.ConversationID != first.ConversationID {
		t.Fatalf("second turn in conversation %q, want %q", second.ConversationID, first.ConversationID)
	}
	sent, ok := a.model.RequestFor("and now?")
	if !ok {
		t.Fatal("the model was never sent the second turn")
	}
	a.model.CheckHistory(t, sent, "what time is it?", "noon")

	var view ConversationView
	r := a.do(t, http.MethodGet, "/api/conversations/"+first.ConversationID, "")
	r.decode(t, &view)
	if r.status != http.StatusOK || view.Conversation.ID != first.ConversationID || view.Conversation.AgentID != "chat" ||
		view.Conversation.Source != string(axocoatl.SourceAPI) || view.Conversation.Title != "what time is it?" || view.Conversation.Messages != 8 {
		t.Fatalf("GET the conversation: %d %s", r.status, r.body)
	}
	var roles []string
	for _, m := range view.Messages {
		roles = append(roles, string(m.Role))
	}
	if got := strings.Join(roles, " "); got != "user assistant tool assistant user assistant tool assistant" || view.NextFrom != nil {
		t.Fatalf("messages %s (next_from %v)", got, view.NextFrom)
	}
	if c := view.Messages[1].ToolCalls; len(c) != 1 || c[0].Name != "clock" || view.Messages[2].Content != "noon" || view.Messages[2].ToolCallID != c[0].ID {
		t.Errorf("the first turn's tool call and result: %+v %+v", view.Messages[1], view.Messages[2])
	}
	if view.Messages[4].TaskID != second.TaskID || view.Messages[0].TaskID != first.TaskID {
		t.Errorf("task ids of the turns: %q %q, want %q %q", view.Messages[0].TaskID, view.Messages[4].TaskID, first.TaskID, second.TaskID)
	}

	// A fresh well-formed id starts a conversation of that id.
	mine := a.execute(t, "chat", "hello", "my-conv.1")
	if mine.ConversationID != "my-conv.1" {
		t.Fatalf("a client-chosen id came back as %q", mine.ConversationID)
	}

	// One-shot: no conversation in the answer, no history sent, nothing
	// recorded.
	r = a.do(t, http.MethodPost, "/api/agents/chat/execute", `{"input":"just once"}`)
	if r.status != http.StatusOK || strings.Contains(string(r.body), "conversation_id") {
		t.Fatalf("one-shot: %d %s", r.status, r.body)
	}
	if sent, _ := a.model.RequestFor("just once"); len(sent) != 1 && !(len(sent) == 2 && sent[0].Role == "system") {
		t.Errorf("a one-shot task was sent %d messages", len(sent))
	}
	var page ConversationsPage
	r = a.do(t, http.MethodGet, "/api/conversations?agent=chat", "")
	r.decode(t, &page)
	if len(page.Conversations) != 2 || page.Next != "" {
		t.Errorf("chat's conversations: %s, want the two started", r.body)
	}
}

// Listing: by agent, newest first, paged by cursor across pages, with the
// default page and ?limit= bounded; one conversation's messages paged by
// ?from=; delete, then 404.
// Guards: the 200-conversation page.
func TestConversationRoutes(t *testing.T) {
	a := newConvAPI(t)
	var mine []string // assistant's, oldest first
	for i := range 7 {
		mine = append(mine, a.execute(t, "assistant", fmt.Sprint("turn ", i), conversation.New).ConversationID)
	}
	for range DefaultConversationsPage {
		a.execute(t, "other", "x", conversation.New)
	}

	// Pages of 3 of the assistant's 7: 3, 3, 1, newest first.
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatalf("more than 3 pages: %v", got)
		}
		var page ConversationsPage
		r := a.do(t, http.MethodGet, "/api/conversations?agent=assistant&limit=3&cursor="+url.QueryEscape(cursor), "")
		r.decode(t, &page)
		if r.status != http.StatusOK {
			t.Fatalf("page %d: %d %s", pages, r.status, r.body)
		}
		if want := min(3, 7-len(got)); len(page.Conversations) != want {
			t.Fatalf("page %d has %d conversations, want %d", pages, len(page.Conversations), want)
		}
		for _, c := range page.Conversations {
			if c.AgentID != "assistant" {
				t.Errorf("?agent=assistant listed %s's", c.AgentID)
			}
			got = append(got, c.ID)
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	for i, id := range got {
		if want := mine[len(mine)-1-i]; id != want {
			t.Fatalf("listed %v, want newest first %v", got, mine)
		}
	}

	// The default page, then the rest.
	var page ConversationsPage
	r := a.do(t, http.MethodGet, "/api/conversations", "")
	r.decode(t, &page)
	if len(page.Conversations) != DefaultConversationsPage || page.Next == "" {
		t.Fatalf("without ?limit=: %d conversations, next %q; want %d and a next page", len(page.Conversations), page.Next, DefaultConversationsPage)
	}
	r = a.do(t, http.MethodGet, "/api/conversations?limit=200&cursor="+url.QueryEscape(page.Next), "")
	page = ConversationsPage{}
	r.decode(t, &page)
	if len(page.Conversations) != 7 || page.Next != "" || page.Conversations[6].ID != mine[0] {
		t.Fatalf("the rest: %d conversations, next %q", len(page.Conversations), page.Next)
	}

	for _, q := range []string{"limit=0", "limit=201", "limit=100000", "limit=-1", "limit=ten", "cursor=garbage", "cursor=" + url.QueryEscape("123.-bad")} {
		if r := a.do(t, http.MethodGet, "/api/conversations?"+q, ""); r.status != http.StatusBadRequest || r.errorCode() != "bad_request" {
			t.Errorf("?%s: %d %s, want 400", q, r.status, r.body)
		}
	}
	if r := a.do(t, http.MethodGet, "/api/conversations?agent=nobody", ""); r.status != http.StatusNotFound || !strings.Contains(string(r.body), `agent \"nobody\" not found`) {
		t.Errorf("?agent=nobody: %d %s, want 404", r.status, r.body)
	}

	// Messages, paged: 3 turns of echo are 6 messages.
	id := mine[0]
	a.execute(t, "assistant", "turn 0 again", id)
	a.execute(t, "assistant", "turn 0 once more", id)
	var view ConversationView
	r = a.do(t, http.MethodGet, "/api/conversations/"+id+"?limit=4", "")
	r.decode(t, &view)
	if len(view.Messages) != 4 || view.NextFrom == nil || *view.NextFrom != 4 || view.Conversation.Messages != 6 {
		t.Fatalf("first page of messages: %s", r.body)
	}
	r = a.do(t, http.MethodGet, fmt.Sprintf("/api/conversations/%s?from=%d&limit=4", id, *view.NextFrom), "")
	view = ConversationView{}
	r.decode(t, &view)
	if len(view.Messages) != 2 || view.NextFrom != nil || view.Messages[1].Content != "turn 0 once more" || strings.Contains(string(r.body), "next_from") {
		t.Fatalf("last page of messages: %s", r.body)
	}
	r = a.do(t, http.MethodGet, "/api/conversations/"+id+"?from=6", "")
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"messages":[]`) {
		t.Errorf("from the end: %d %s", r.status, r.body)
	}
	for _, q := range []string{"limit=0", fmt.Sprint("limit=", MaxMessagesPage+1), "from=-1", "from=x", "from=2147483648"} {
		if r := a.do(t, http.MethodGet, "/api/conversations/"+id+"?"+q, ""); r.status != http.StatusBadRequest {
			t.Errorf("messages ?%s: %d %s, want 400", q, r.status, r.body)
		}
	}

	// Delete: 204, then it is gone everywhere.
	if r := a.do(t, http.MethodDelete, "/api/conversations/"+id, ""); r.status != http.StatusNoContent || len(r.body) != 0 {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	for _, m := range []string{http.MethodGet, http.MethodDelete} {
		if r := a.do(t, m, "/api/conversations/"+id, ""); r.status != http.StatusNotFound || r.errorCode() != "not_found" {
			t.Errorf("%s after DELETE: %d %s, want 404", m, r.status, r.body)
		}
	}
	r = a.do(t, http.MethodGet, "/api/conversations?agent=assistant", "")
	page = ConversationsPage{}
	r.decode(t, &page)
	if len(page.Conversations) != 6 {
		t.Errorf("after DELETE the assistant has %d conversations listed, want 6", len(page.Conversations))
	}
}

// Bad input gets a precise status: unknown ids 404, malformed ones 400,
// another agent's conversation 404 in words that do not say it exists.
func TestConversationBadInput(t *testing.T) {
	a := newConvAPI(t)
	theirs := a.execute(t, "other", "private", conversation.New).ConversationID

	for _, m := range []string{http.MethodGet, http.MethodDelete} {
		if r := a.do(t, m, "/api/conversations/no-such-conversation", ""); r.status != http.StatusNotFound || r.errorCode() != "not_found" {
			t.Errorf("%s an unknown id: %d %s, want 404", m, r.status, r.body)
		}
		for _, bad := range []string{"-leading-dash", "has%20space", "new", strings.Repeat("a", conversation.MaxIDLength+1), "%C3%A9"} {
			if r := a.do(t, m, "/api/conversations/"+bad, ""); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "invalid conversation id") {
				t.Errorf("%s /api/conversations/%s: %d %s, want 400", m, bad, r.status, r.body)
			}
		}
	}
	for _, bad := range []string{"-x", "a b", "x/y", strings.Repeat("a", conversation.MaxIDLength+1)} {
		r := a.do(t, http.MethodPost, "/api/agents/assistant/execute", executeBody("hi", bad))
		if r.status != http.StatusBadRequest || r.errorCode() != "bad_request" || !strings.Contains(string(r.body), "invalid conversation id") {
			t.Errorf("execute in %q: %d %s, want 400", bad, r.status, r.body)
		}
	}
	if r := a.do(t, http.MethodPost, "/api/agents/assistant/execute", `{"input":"hi","conversation_id":7}`); r.status != http.StatusBadRequest {
		t.Errorf("a numeric conversation_id: %d %s, want 400", r.status, r.body)
	}

	// Another agent's conversation is not found for this one, and the
	// answer does not say whose it is.
	r := a.do(t, http.MethodPost, "/api/agents/assistant/execute", executeBody("let me in", theirs))
	if r.status != http.StatusNotFound || r.errorCode() != "not_found" || strings.Contains(string(r.body), "other") || strings.Contains(string(r.body), "belongs") {
		t.Errorf("execute in another agent's conversation: %d %s, want a 404 naming no owner", r.status, r.body)
	}
	var view ConversationView
	a.do(t, http.MethodGet, "/api/conversations/"+theirs, "").decode(t, &view)
	if view.Conversation.Messages != 2 {
		t.Errorf("the refused turn was recorded in the other agent's conversation: %d messages", view.Conversation.Messages)
	}

	// Full: one message short of max_messages, and a turn adds two.
	ctx := context.Background()
	store := a.eng.Conversations()
	if err := store.Create(ctx, conversation.Info{ID: "full-talk", AgentID: "assistant", Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	msgs := make([]conversation.Message, conversation.DefaultMaxMessages-1)
	for i := range msgs {
		msgs[i] = conversation.Message{Role: agent.RoleUser, Content: "x", At: time.Now()}
	}
	if err := store.Append(ctx, "full-talk", msgs); err != nil {
		t.Fatal(err)
	}
	r = a.do(t, http.MethodPost, "/api/agents/assistant/execute", executeBody("one more", "full-talk"))
	if r.status != http.StatusConflict || r.errorCode() != "conversation_full" || !strings.Contains(string(r.body), "max_messages") {
		t.Errorf("a turn of a full conversation: %d %s, want 409 naming max_messages", r.status, r.body)
	}
}

// failingModel fails every run.
type failingModel struct{}

func (failingModel) Generate(context.Context, *agent.Request) (*agent.Response, error) {
	return nil, errors.New("the model is down")
}

// A failed turn is recorded, and its error answer names the conversation
// (a new one's id too), so that the client can go on.
func TestConversationFailedTurn(t *testing.T) {
	a := newConvAPI(t)
	if err := a.eng.AddAgent(agent.Spec{ID: "broken"}, failingModel{}); err != nil {
		t.Fatal(err)
	}
	r := a.do(t, http.MethodPost, "/api/agents/broken/execute", executeBody("try", conversation.New))
	var e ErrorBody
	r.decode(t, &e)
	if r.status != http.StatusInternalServerError || e.Error.Code != "agent_failed" || !conversation.ValidID(e.Error.ConversationID) || e.Error.TaskID == "" {
		t.Fatalf("a failed turn: %d %s, want 500 naming the conversation", r.status, r.body)
	}
	var view ConversationView
	a.do(t, http.MethodGet, "/api/conversations/"+e.Error.ConversationID, "").decode(t, &view)
	if len(view.Messages) != 2 || view.Messages[0].Content != "try" || !strings.Contains(view.Messages[1].Content, "the model is down") {
		t.Fatalf("the failed turn recorded as %+v", view.Messages)
	}
	if r := a.do(t, http.MethodPost, "/api/agents/broken/execute", `{"input":"x"}`); r.status != http.StatusInternalServerError || strings.Contains(string(r.body), "conversation_id") {
		t.Errorf("a failed one-shot task: %d %s, want 500 naming no conversation", r.status, r.body)
	}
}

// gateModel answers "done" once released, and says when a run reached it.
type gateModel struct {
	started chan struct{}
	release chan struct{}
}

func (m *gateModel) Generate(ctx context.Context, _ *agent.Request) (*agent.Response, error) {
	m.started <- struct{}{}
	select {
	case <-m.release:
		return &agent.Response{Content: "done"}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// A turn sent while another of its conversation runs is refused at once:
// 409 conversation_busy with Retry-After: 1; the first goes on.
func TestConversationBusy(t *testing.T) {
	a := newConvAPI(t)
	gate := &gateModel{started: make(chan struct{}, 1), release: make(chan struct{})}
	if err := a.eng.AddAgent(agent.Spec{ID: "gated"}, gate); err != nil {
		t.Fatal(err)
	}
	if err := a.eng.Conversations().Create(context.Background(), conversation.Info{ID: "talk", AgentID: "gated", Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	first := make(chan reply, 1)
	go func() {
		r, err := a.try(http.MethodPost, "/api/agents/gated/execute", executeBody("first", "talk"))
		if err != nil {
			t.Error(err)
		}
		first <- r
	}()
	select {
	case <-gate.started:
	case <-time.After(20 * time.Second):
		t.Fatal("the first turn never reached the model")
	}
	r := a.do(t, http.MethodPost, "/api/agents/gated/execute", executeBody("second", "talk"))
	if r.status != http.StatusConflict || r.errorCode() != "conversation_busy" || r.header.Get("Retry-After") != "1" {
		t.Errorf("a second turn while one runs: %d %s (Retry-After %q), want 409 busy", r.status, r.body, r.header.Get("Retry-After"))
	}
	close(gate.release)
	if r := <-first; r.status != http.StatusOK || !strings.Contains(string(r.body), `"conversation_id":"talk"`) {
		t.Errorf("the first turn: %d %s", r.status, r.body)
	}
}

// 50 turns sent at once to one conversation: each is answered 200 or 409
// (busy, with Retry-After), and every accepted turn is recorded once,
// whole and in the order it ran: nothing interleaved.
// Guards: one turn of a conversation at once, at the HTTP door.
func TestConversationConcurrentTurns(t *testing.T) {
	a := newConvAPI(t)
	id := a.execute(t, "chat", "turn zero", conversation.New).ConversationID
	const n = 50
	replies := make([]reply, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			r, err := a.try(http.MethodPost, "/api/agents/chat/execute", executeBody(fmt.Sprint("turn ", i+1), id))
			if err != nil {
				t.Error(err)
			}
			replies[i] = r
		})
	}
	close(start)
	wg.Wait()
	accepted := map[string]string{} // input -> task id
	busy := 0
	for i, r := range replies {
		switch r.status {
		case http.StatusOK:
			var res ExecuteResponse
			r.decode(t, &res)
			accepted[fmt.Sprint("turn ", i+1)] = res.TaskID
		case http.StatusConflict:
			busy++
			if r.errorCode() != "conversation_busy" || r.header.Get("Retry-After") != "1" {
				t.Errorf("a refused turn: %s, Retry-After %q", r.body, r.header.Get("Retry-After"))
			}
		default:
			t.Errorf("turn %d: %d %s, want 200 or 409", i+1, r.status, r.body)
		}
	}
	if len(accepted) == 0 || len(accepted)+busy != n {
		t.Fatalf("%d accepted, %d busy of %d", len(accepted), busy, n)
	}
	t.Logf("%d accepted, %d refused as busy", len(accepted), busy)

	var view ConversationView
	a.do(t, http.MethodGet, fmt.Sprintf("/api/conversations/%s?limit=%d", id, MaxMessagesPage), "").decode(t, &view)
	turns := 1 + len(accepted)
	if len(view.Messages) != 4*turns || view.Conversation.Messages != 4*turns {
		t.Fatalf("%d messages recorded (info says %d), want %d: 4 for each of %d turns", len(view.Messages), view.Conversation.Messages, 4*turns, turns)
	}
	seen := map[string]bool{}
	for k := range turns {
		turn := view.Messages[4*k : 4*k+4]
		input := turn[0].Content
		if k == 0 {
			if input != "turn zero" {
				t.Fatalf("the first turn recorded is %q", input)
			}
		} else if task, ok := accepted[input]; !ok || seen[input] {
			t.Fatalf("turn %d recorded is %q: not an accepted one, or twice", k, input)
		} else {
			seen[input] = true
			for _, m := range turn {
				if m.TaskID != task {
					t.Fatalf("turn %d (%s) holds a message of task %s: interleaved", k, input, m.TaskID)
				}
			}
		}
		if turn[0].Role != agent.RoleUser || turn[1].Role != agent.RoleAssistant || turn[2].Role != agent.RoleTool || turn[3].Content != testutil.ChatAnswer(input, "noon") {
			t.Fatalf("turn %d (%s) recorded as %+v", k, input, turn)
		}
		// It ran after every turn recorded before it: the model was sent
		// all of them.
		if k > 0 {
			sent, ok := a.model.RequestFor(input)
			nonSystem := 0
			for _, m := range sent {
				if m.Role != "system" {
					nonSystem++
				}
			}
			if !ok || nonSystem != 4*k+1 {
				t.Fatalf("turn %d (%s) was sent %d messages, want the %d of the turns recorded before it and its own", k, input, nonSystem, 4*k)
			}
		}
	}
}
