package testutil

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// ChatRecorder is a model on an httptest server speaking the OpenAI
// chat-completions wire (configure an openai provider with BaseURL
// [ChatRecorder.URL]) that records every request's messages. Each run
// goes: to a user message it answers with one call of its tool, arguments
// {"q": "<the user's text>"}; to the tool's result it answers
// "<the user's text> / tool: <the result>". So a conversation's second
// turn shows, in what the model was sent, the whole first turn: the user,
// the assistant's tool call, the tool's result and the answer.
type ChatRecorder struct {
	// URL is the base URL of the API (ending in /v1).
	URL  string
	tool string

	mu       sync.Mutex
	requests [][]ChatMessage
}

// ChatMessage is a message of a chat-completions request.
type ChatMessage struct {
	Role       string         `json:"role"`
	Content    *string        `json:"content"`
	ToolCalls  []ChatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

// ChatToolCall is a tool call of an assistant message.
type ChatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// Text is m's content, "" when it has none.
func (m ChatMessage) Text() string {
	if m.Content == nil {
		return ""
	}
	return *m.Content
}

// NewChatRecorder starts a ChatRecorder whose runs call tool; it closes
// when the test ends.
func NewChatRecorder(t testing.TB, tool string) *ChatRecorder {
	t.Helper()
	c := &ChatRecorder{tool: tool}
	srv := httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(srv.Close)
	c.URL = srv.URL + "/v1"
	return c
}

// ChatAnswer is what a ChatRecorder answers to a user's text once its tool
// said result.
func ChatAnswer(user, result string) string { return user + " / tool: " + result }

func (c *ChatRecorder) serve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []ChatMessage `json:"messages"`
	}
	if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Messages) == 0 {
		http.Error(w, `{"error":{"message":"want a chat completion request with messages"}}`, http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	c.requests = append(c.requests, req.Messages)
	n := len(c.requests)
	c.mu.Unlock()
	// The user's text of this run: the last user message.
	var user string
	for _, m := range req.Messages {
		if m.Role == "user" {
			user = m.Text()
		}
	}
	var message map[string]any
	if last := req.Messages[len(req.Messages)-1]; last.Role == "tool" {
		message = map[string]any{"role": "assistant", "content": ChatAnswer(user, last.Text())}
	} else {
		args, _ := json.Marshal(map[string]string{"q": user})
		message = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{
			map[string]any{"id": fmt.Sprintf("call-%d", n), "type": "function", "function": map[string]any{"name": c.tool, "arguments": string(args)}},
		}}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "created": 1, "model": "recorder",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": message}},
	})
}

// Requests returns the messages of every request so far, oldest first.
func (c *ChatRecorder) Requests() [][]ChatMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]ChatMessage(nil), c.requests...)
}

// RequestFor returns the messages of the first request whose last message
// is the user's text user: what the model was sent at the start of that
// turn. ok false: none.
func (c *ChatRecorder) RequestFor(user string) (msgs []ChatMessage, ok bool) {
	for _, req := range c.Requests() {
		if last := req[len(req)-1]; last.Role == "user" && last.Text() == user {
			return req, true
		}
	}
	return nil, false
}

// CheckHistory fails t unless msgs (a request's messages) hold, before
// the last user message, the whole turn a ChatRecorder ran for the user's
// text first with its tool answering result: the user, the assistant's
// call of the tool with {"q": first}, the tool's result under that call's
// id, and the answer.
func (c *ChatRecorder) CheckHistory(t testing.TB, msgs []ChatMessage, first, result string) {
	t.Helper()
	var conv []ChatMessage
	for _, m := range msgs {
		if m.Role != "system" {
			conv = append(conv, m)
		}
	}
	describe := func() string {
		var b strings.Builder
		for _, m := range conv {
			fmt.Fprintf(&b, "\n  %s %q calls %v id %q", m.Role, m.Text(), m.ToolCalls, m.ToolCallID)
		}
		return b.String()
	}
	if len(conv) != 5 {
		t.Fatalf("the second turn's request has %d messages, want the first turn's 4 and the new user message:%s", len(conv), describe())
	}
	u, call, res, answer := conv[0], conv[1], conv[2], conv[3]
	ok := u.Role == "user" && u.Text() == first &&
		call.Role == "assistant" && len(call.ToolCalls) == 1 && call.ToolCalls[0].Function.Name == c.tool &&
		res.Role == "tool" && res.ToolCallID == call.ToolCalls[0].ID && res.Text() == result &&
		answer.Role == "assistant" && answer.Text() == ChatAnswer(first, result)
	if ok {
		var args map[string]string
		ok = json.Unmarshal([]byte(call.ToolCalls[0].Function.Arguments), &args) == nil && args["q"] == first
	}
	if !ok {
		t.Fatalf("the second turn's request does not hold the first turn (user %q, a call of %s, its result %q, the answer):%s", first, c.tool, result, describe())
	}
}
