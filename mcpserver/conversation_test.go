package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/openai"
	"github.com/axocoatl/axocoatl-go/conversation"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
	"github.com/axocoatl/axocoatl-go/mcpserver"
	"github.com/axocoatl/axocoatl-go/secret"
)

// withChat adds the agent "chat" to f: an openai provider on a
// ChatRecorder, calling the test Engine's tool "clock" (it says "noon").
func withChat(t *testing.T, f *fixture) *testutil.ChatRecorder {
	t.Helper()
	rec := testutil.NewChatRecorder(t, "clock")
	model, err := openai.New(provider.Config{BaseURL: rec.URL, APIKey: secret.Secret("sk-test"), MaxRetries: -1})
	if err == nil {
		err = f.eng.AddAgent(agent.Spec{ID: "chat", Provider: provider.OpenAI, Model: "recorder", Tools: []string{"clock"}}, model)
	}
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// call calls tool with args and fails the test on a protocol error.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("call %s %v: %v", tool, args, err)
	}
	return res
}

// texts are the text blocks of a result.
func texts(t *testing.T, res *mcp.CallToolResult) []string {
	t.Helper()
	var out []string
	for _, c := range res.Content {
		tc, ok := c.(*mcp.TextContent)
		if !ok {
			t.Fatalf("content is %T, want text", c)
		}
		out = append(out, tc.Text)
	}
	return out
}

// checkConversation holds a conversation with agent_chat over cs: the
// second call's model request holds the whole first turn; results carry
// the id in _meta and a line saying how to continue; a call without
// conversation_id is one-shot; bad ids are isError results.
func checkConversation(t *testing.T, f *fixture, rec *testutil.ChatRecorder, cs *mcp.ClientSession, era string) {
	t.Helper()
	if got := cs.InitializeResult().ProtocolVersion; got != era {
		t.Fatalf("negotiated %q, want %s", got, era)
	}
	list, err := cs.ListTools(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range list.Tools {
		props, _ := tool.InputSchema.(map[string]any)["properties"].(map[string]any)
		cid, _ := props["conversation_id"].(map[string]any)
		if d, _ := cid["description"].(string); cid["type"] != "string" || !strings.Contains(d, `"new" starts a conversation`) {
			t.Errorf("%s: conversation_id in the schema = %v", tool.Name, cid)
		}
	}

	first, second := "first of "+era, "second of "+era
	res := call(t, cs, "agent_chat", map[string]any{"input": first, "conversation_id": conversation.New})
	id, _ := res.Meta[mcpserver.MetaConversationID].(string)
	got := texts(t, res)
	if res.IsError || !conversation.ValidID(id) || len(got) != 2 || got[0] != testutil.ChatAnswer(first, "noon") ||
		got[1] != "conversation_id: "+id+" (pass it to continue this conversation)" {
		t.Fatalf("first turn: isError %v, _meta %v, content %q", res.IsError, res.Meta, got)
	}
	if info, err := f.eng.Conversations().Get(ctxT(t), id); err != nil || info.Source != "mcp" || info.AgentID != "chat" {
		t.Fatalf("the conversation in the store: %+v %v", info, err)
	}
	res = call(t, cs, "agent_chat", map[string]any{"input": second, "conversation_id": id})
	if res.IsError || res.Meta[mcpserver.MetaConversationID] != id || texts(t, res)[0] != testutil.ChatAnswer(second, "noon") {
		t.Fatalf("second turn: isError %v, _meta %v, content %q", res.IsError, res.Meta, texts(t, res))
	}
	sent, ok := rec.RequestFor(second)
	if !ok {
		t.Fatal("the model was never sent the second turn")
	}
	rec.CheckHistory(t, sent, first, "noon")

	// Without conversation_id (or with ""): one-shot, as before.
	for _, args := range []map[string]any{{"input": "once " + era}, {"input": "once more " + era, "conversation_id": ""}} {
		res = call(t, cs, "agent_chat", args)
		if _, has := res.Meta[mcpserver.MetaConversationID]; res.IsError || has || len(res.Content) != 1 {
			t.Errorf("one-shot %v: isError %v, _meta %v, %d content blocks", args, res.IsError, res.Meta, len(res.Content))
		}
	}

	// The key as JSON may spell it, with escapes.
	res, err = cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "agent_echo", Arguments: json.RawMessage(`{"input":"escaped","\u0063onversation_id":"new"}`)})
	if err != nil || res.IsError || res.Meta[mcpserver.MetaConversationID] == nil {
		t.Errorf("an escaped key: %v, %+v", err, res)
	}

	// Bad ids: isError results saying why, and nothing created.
	for _, c := range []struct {
		id   any
		want string
	}{
		{"no-such-conversation", "conversation not found"},
		{"-bad", "invalid conversation id"},
		{strings.Repeat("x", conversation.MaxIDLength+1), "invalid conversation id"},
		{7, `"conversation_id" must be a string`},
		{nil, `"conversation_id" must be a string`},
	} {
		res := call(t, cs, "agent_chat", map[string]any{"input": "hi", "conversation_id": c.id})
		if text := strings.Join(texts(t, res), "\n"); !res.IsError || !strings.Contains(text, c.want) {
			t.Errorf("conversation_id %v: isError %v %q, want an error saying %q", c.id, res.IsError, text, c.want)
		}
	}
	if _, err := f.eng.Conversations().Get(ctxT(t), "no-such-conversation"); !errors.Is(err, conversation.ErrNotFound) {
		t.Errorf("a call with an unknown id created it: %v", err)
	}
	// Another agent's conversation.
	res = call(t, cs, "agent_echo", map[string]any{"input": "hi", "conversation_id": id})
	if text := strings.Join(texts(t, res), "\n"); !res.IsError || !strings.Contains(text, conversation.ErrOtherAgent.Error()) {
		t.Errorf("agent_echo in chat's conversation: isError %v %q", res.IsError, text)
	}
}

// A conversation held over MCP in both eras, over stdio (ServeStdio on
// pipes) and over /mcp, with the go-sdk client.
func TestConversationGoSDK(t *testing.T) {
	for _, era := range []struct {
		version string
		opts    *mcp.ClientSessionOptions
	}{{mcpserver.ProtocolVersion2026, nil}, {"2025-11-25", legacy}} {
		t.Run("stdio/"+era.version, func(t *testing.T) {
			f := newFixture(t, mcpserver.Config{})
			rec := withChat(t, f)
			tr, done := stdioPair(t, f, context.Background())
			cs, err := testClient(nil).Connect(ctxT(t), tr, era.opts)
			if err != nil {
				t.Fatal(err)
			}
			checkConversation(t, f, rec, cs, era.version)
			cs.Close()
			if err, terr := recv(done, 10*time.Second); terr != nil || err != nil {
				t.Errorf("ServeStdio after EOF = %v (%v)", err, terr)
			}
		})
		t.Run("http/"+era.version, func(t *testing.T) {
			f := newFixture(t, mcpserver.Config{})
			rec := withChat(t, f)
			ts := serveHTTP(t, f)
			checkConversation(t, f, rec, connectHTTP(t, ts.URL+"/mcp", nil, era.opts), era.version)
		})
	}
}

// A second turn while one is running is an isError result saying the
// conversation is busy; a full conversation is one naming the bound. A
// failed turn is still a turn of the conversation: its result says how
// to continue.
func TestConversationBusyAndFull(t *testing.T) {
	f := newFixture(t, mcpserver.Config{})
	cs := connectInMemory(t, f, nil)
	ctx := ctxT(t)
	store := f.eng.Conversations()
	if err := store.Create(ctx, conversation.Info{ID: "slow-talk", AgentID: "slow", Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	firstDone := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(runCtx, &mcp.CallToolParams{Name: "agent_slow", Arguments: map[string]any{"input": "wait", "conversation_id": "slow-talk"}})
		if err != nil {
			res = nil
		}
		firstDone <- res
	}()
	if _, err := recv(f.slow.started, 10*time.Second); err != nil {
		t.Fatal("the first turn never reached the model")
	}
	res := call(t, cs, "agent_slow", map[string]any{"input": "me too", "conversation_id": "slow-talk"})
	if text := strings.Join(texts(t, res), "\n"); !res.IsError || !strings.Contains(text, "conversation busy") {
		t.Errorf("a second turn while one runs: isError %v %q, want busy", res.IsError, text)
	}
	cancel()
	if _, err := recv(firstDone, 10*time.Second); err != nil {
		t.Fatal("the first turn did not end when cancelled")
	}

	// Full: the conversation holds one message short of max_messages, and
	// a turn adds two.
	if err := store.Create(ctx, conversation.Info{ID: "full-talk", AgentID: "echo", Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	msgs := make([]conversation.Message, conversation.DefaultMaxMessages-1)
	for i := range msgs {
		msgs[i] = conversation.Message{Role: agent.RoleUser, Content: "x", At: time.Now()}
	}
	if err := store.Append(ctx, "full-talk", msgs); err != nil {
		t.Fatal(err)
	}
	res = call(t, cs, "agent_echo", map[string]any{"input": "one more", "conversation_id": "full-talk"})
	if text := strings.Join(texts(t, res), "\n"); !res.IsError || !strings.Contains(text, "max_messages") {
		t.Errorf("a turn of a full conversation: isError %v %q, want an error naming max_messages", res.IsError, text)
	}

	// A failed run is recorded and continues: broken's model answers 500.
	if err := store.Create(ctx, conversation.Info{ID: "broken-talk", AgentID: "broken", Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	res = call(t, cs, "agent_broken", map[string]any{"input": "try", "conversation_id": "broken-talk"})
	if got := texts(t, res); !res.IsError || res.Meta[mcpserver.MetaConversationID] != "broken-talk" || len(got) != 2 || !strings.Contains(got[1], "broken-talk") {
		t.Errorf("a failed turn: isError %v, _meta %v, content %q", res.IsError, res.Meta, got)
	}
}
