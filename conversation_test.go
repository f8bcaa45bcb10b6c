package axocoatl_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/conversation"
)

// A turn of a conversation sends the model the earlier turns, tool call
// and result included, and records the new one.
func TestConversationCarriesHistory(t *testing.T) {
	e := newEngine(t)
	m := &scriptModel{turns: []agent.Response{
		{ToolCalls: []agent.ToolCall{call("c1", "mcp__fs__read", `{"path":"a"}`)}},
		{Content: "first answer"},
		{Content: "second answer"},
	}}
	must(t, e.RegisterTool(axocoatl.Tool{Name: "mcp__fs__read", Server: "fs", Call: func(context.Context, axocoatl.ToolCall) (axocoatl.ToolResult, error) {
		return axocoatl.ToolResult{Content: "file a"}, nil
	}}))
	must(t, e.AddAgent(agent.Spec{ID: "a"}, m))
	events := subscribe(t, e, axocoatl.EventTaskCompleted)

	r1, err := e.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "a", Input: "read a", ConversationID: conversation.New})
	if err != nil {
		t.Fatal(err)
	}
	if r1.Output != "first answer" || !conversation.ValidID(r1.ConversationID) {
		t.Fatalf("turn 1 = %+v", r1)
	}
	if _, p := next(t, events); p["conversation_id"] != r1.ConversationID {
		t.Fatalf("TaskCompleted conversation_id = %v, want %s", p["conversation_id"], r1.ConversationID)
	}
	r2, err := e.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "a", Input: "and then?", ConversationID: r1.ConversationID})
	if err != nil || r2.Output != "second answer" || r2.ConversationID != r1.ConversationID {
		t.Fatalf("turn 2 = %+v, %v", r2, err)
	}
	last := m.reqs[len(m.reqs)-1].Messages
	want := []string{"user:read a", "assistant:call mcp__fs__read", "tool:file a", "assistant:first answer", "user:and then?"}
	if got := describe(last); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("turn 2's model request:\n got  %q\n want %q", got, want)
	}
	info, err := e.Conversations().Get(context.Background(), r1.ConversationID)
	if err != nil || info.AgentID != "a" || info.Title != "read a" || info.Messages != 6 || info.Source != "library" {
		t.Fatalf("stored %+v, %v", info, err)
	}
	msgs, _ := e.Conversations().Messages(context.Background(), r1.ConversationID, 0, 0)
	if msgs[0].TaskID != r1.TaskID || msgs[5].TaskID != r2.TaskID || msgs[5].Content != "second answer" {
		t.Fatalf("stored messages %+v", msgs)
	}
}

func describe(ms []agent.Message) []string {
	var out []string
	for _, m := range ms {
		s := string(m.Role) + ":" + m.Content
		for _, c := range m.ToolCalls {
			s = string(m.Role) + ":call " + c.Name
		}
		out = append(out, s)
	}
	return out
}

func TestConversationIDs(t *testing.T) {
	e := newEngine(t)
	must(t, e.AddAgent(agent.Spec{ID: "a"}, &scriptModel{}))
	must(t, e.AddAgent(agent.Spec{ID: "b"}, &scriptModel{}))
	ctx := context.Background()
	if _, err := e.ExecuteRequest(ctx, axocoatl.Request{AgentID: "a", Input: "x", ConversationID: "unknown-1"}); !errors.Is(err, conversation.ErrNotFound) {
		t.Fatalf("unknown id: %v, want ErrNotFound", err)
	}
	for _, bad := range []string{"a b", "../etc", strings.Repeat("z", 200)} {
		if _, err := e.ExecuteRequest(ctx, axocoatl.Request{AgentID: "a", Input: "x", ConversationID: bad}); !errors.Is(err, conversation.ErrInvalidID) {
			t.Fatalf("id %q: %v, want ErrInvalidID", bad, err)
		}
	}
	r, err := e.ExecuteRequest(ctx, axocoatl.Request{AgentID: "a", Input: "x", ConversationID: "client-chosen", CreateConversation: true})
	if err != nil || r.ConversationID != "client-chosen" {
		t.Fatalf("CreateConversation: %+v, %v", r, err)
	}
	if _, err := e.ExecuteRequest(ctx, axocoatl.Request{AgentID: "b", Input: "x", ConversationID: "client-chosen"}); !errors.Is(err, conversation.ErrOtherAgent) {
		t.Fatalf("another agent's conversation: %v, want ErrOtherAgent", err)
	}
	if _, err := e.ExecuteRequest(ctx, axocoatl.Request{AgentID: "b", Input: "x", ConversationID: "client-chosen", CreateConversation: true}); !errors.Is(err, conversation.ErrOtherAgent) {
		t.Fatalf("another agent's conversation with CreateConversation: %v, want ErrOtherAgent", err)
	}
	if info, _ := e.Conversations().Get(ctx, "client-chosen"); info.Messages != 2 {
		t.Fatalf("refused turns were recorded: %d messages", info.Messages)
	}
}

// A failed turn keeps the user's message and says it failed.
func TestFailedTurnIsKept(t *testing.T) {
	e := newEngine(t)
	must(t, e.AddAgent(agent.Spec{ID: "a", Timeout: 50 * time.Millisecond}, hangModel{}))
	r, err := e.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "a", Input: "hang", ConversationID: conversation.New})
	if !errors.Is(err, context.DeadlineExceeded) || r.ConversationID == "" {
		t.Fatalf("%+v, %v", r, err)
	}
	msgs, err := e.Conversations().Messages(context.Background(), r.ConversationID, 0, 0)
	if err != nil || len(msgs) != 2 || msgs[0].Content != "hang" || !strings.Contains(msgs[1].Content, "timed out") {
		t.Fatalf("a failed turn recorded %+v, %v", msgs, err)
	}
	// The lease was released: the next turn runs.
	if _, err := e.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "a", Input: "again", ConversationID: r.ConversationID}); errors.Is(err, conversation.ErrBusy) {
		t.Fatal("a failed turn kept its lease")
	}
}

// hangModel answers only when its run ends.
type hangModel struct{}

func (hangModel) Generate(ctx context.Context, _ *agent.Request) (*agent.Response, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// gateModel answers once release is closed.
type gateModel struct{ release chan struct{} }

func (m gateModel) Generate(ctx context.Context, req *agent.Request) (*agent.Response, error) {
	select {
	case <-m.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &agent.Response{Content: "re: " + req.Messages[len(req.Messages)-1].Content}, nil
}

// Fifty writers on one conversation: each turn is recorded once, whole and
// in order, or refused as busy; none interleaves with another.
// Guards: one turn of a conversation at once.
func TestConcurrentTurnsAreRefusedNotInterleaved(t *testing.T) {
	e := newEngine(t)
	m := gateModel{release: make(chan struct{})}
	must(t, e.AddAgent(agent.Spec{ID: "a"}, m))
	ctx := context.Background()
	close(m.release) // every turn answers at once
	r, err := e.ExecuteRequest(ctx, axocoatl.Request{AgentID: "a", Input: "start", ConversationID: conversation.New})
	if err != nil {
		t.Fatal(err)
	}
	id := r.ConversationID
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted, busy := 0, 0
	for i := range 50 {
		wg.Go(func() {
			_, err := e.ExecuteRequest(ctx, axocoatl.Request{AgentID: "a", Input: fmt.Sprint("msg ", i), ConversationID: id})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				accepted++
			case errors.Is(err, conversation.ErrBusy):
				busy++
			default:
				t.Errorf("turn %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	msgs, err := e.Conversations().Messages(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if accepted+busy != 50 || len(msgs) != 2+2*accepted {
		t.Fatalf("accepted %d, busy %d, %d messages recorded (want %d)", accepted, busy, len(msgs), 2+2*accepted)
	}
	for i := 0; i < len(msgs); i += 2 {
		u, a := msgs[i], msgs[i+1]
		if u.Role != agent.RoleUser || a.Role != agent.RoleAssistant || a.Content != "re: "+u.Content || u.TaskID != a.TaskID {
			t.Fatalf("messages %d and %d interleaved: %+v / %+v", i, i+1, u, a)
		}
	}
}

// startedModel signals each call it begins, then answers as gateModel.
type startedModel struct {
	gateModel
	started chan struct{}
}

func (m startedModel) Generate(ctx context.Context, req *agent.Request) (*agent.Response, error) {
	m.started <- struct{}{}
	return m.gateModel.Generate(ctx, req)
}

// A turn sent to agent b in agent a's conversation is refused as another
// agent's before the conversation is locked: while a's own turn holds it,
// b's request says ErrOtherAgent, not ErrBusy, and holds nothing.
func TestOtherAgentsConversationRefusedBeforeTheLock(t *testing.T) {
	e := newEngine(t)
	m := startedModel{gateModel{release: make(chan struct{})}, make(chan struct{}, 2)}
	must(t, e.AddAgent(agent.Spec{ID: "a"}, m))
	must(t, e.AddAgent(agent.Spec{ID: "b"}, gateModel{release: m.release}))
	ctx := context.Background()
	var release sync.Once
	defer release.Do(func() { close(m.release) }) // a failure must not leave a's turn held
	done := make(chan error, 1)
	go func() {
		_, err := e.ExecuteRequest(ctx, axocoatl.Request{AgentID: "a", Input: "hold", ConversationID: "c1", CreateConversation: true})
		done <- err
	}()
	<-m.started // a's turn holds c1's lease
	if _, err := e.ExecuteRequest(ctx, axocoatl.Request{AgentID: "b", Input: "x", ConversationID: "c1"}); !errors.Is(err, conversation.ErrOtherAgent) {
		t.Fatalf("b's turn in a's held conversation: %v, want ErrOtherAgent (checked before the lock)", err)
	}
	release.Do(func() { close(m.release) })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// windowModel records the system prompt and message count of each request.
type windowModel struct {
	mu     sync.Mutex
	system string
	n      int
}

func (m *windowModel) Generate(_ context.Context, req *agent.Request) (*agent.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.system, m.n = req.System, len(req.Messages)
	return &agent.Response{Content: strings.Repeat("a", 100)}, nil
}

// Guards: agents[].max_history_bytes through the Engine.
func TestLongConversationIsWindowed(t *testing.T) {
	e := newEngine(t)
	m := &windowModel{}
	must(t, e.AddAgent(agent.Spec{ID: "a", SystemPrompt: "be brief", MaxHistoryBytes: 2000}, m))
	ctx := context.Background()
	id := conversation.New
	for i := range 40 {
		r, err := e.ExecuteRequest(ctx, axocoatl.Request{AgentID: "a", Input: fmt.Sprint("turn ", i), ConversationID: id})
		if err != nil {
			t.Fatal(err)
		}
		id = r.ConversationID
	}
	// A turn is about 32+6 + 32+100 bytes: 2000 holds 11 of them.
	if m.n > 2*12+1 || m.n < 2*8+1 {
		t.Fatalf("turn 40 sent %d messages with a 2000-byte window", m.n)
	}
	if !strings.HasPrefix(m.system, "be brief\n\n") || !strings.Contains(m.system, "oldest messages were left out") {
		t.Fatalf("system prompt %q does not tell the model", m.system)
	}
}

// bigModel answers with n bytes.
type bigModel int

func (n bigModel) Generate(context.Context, *agent.Request) (*agent.Response, error) {
	return &agent.Response{Content: strings.Repeat("é", int(n)/2)}, nil
}

// A huge answer is the caller's whole, and recorded cut; a turn that does
// not fit its conversation at all still succeeds, its event saying why it
// was not recorded.
// Guards: conversations.max_bytes and max_messages as the Engine records a turn.
func TestTurnsTooBigForTheRecord(t *testing.T) {
	store := conversation.NewMemory(conversation.Limits{MaxBytes: 4 << 20})
	e := axocoatl.New(axocoatl.Options{Conversations: store})
	t.Cleanup(func() { _ = e.Close(context.Background()); _ = store.Close() })
	must(t, e.AddAgent(agent.Spec{ID: "big"}, bigModel(3<<20)))
	events := subscribe(t, e, axocoatl.EventTaskCompleted)
	ctx := context.Background()
	r, err := e.ExecuteRequest(ctx, axocoatl.Request{AgentID: "big", Input: "x", ConversationID: conversation.New})
	if err != nil || len(r.Output) != 3<<20 {
		t.Fatalf("%d bytes, %v; want the whole 3 MiB answer", len(r.Output), err)
	}
	msgs, _ := store.Messages(ctx, r.ConversationID, 0, 0)
	if len(msgs) != 2 || len(msgs[1].Content) > (4<<20)/8+200 || !strings.Contains(msgs[1].Content, "bytes of this message were left out") {
		t.Fatalf("recorded a %d-byte answer", len(msgs[1].Content))
	}
	if !utf8.ValidString(msgs[1].Content) {
		t.Fatal("the cut split a character")
	}
	if _, p := next(t, events); p["conversation_error"] != nil {
		t.Fatalf("conversation_error on a recorded turn: %v", p["conversation_error"])
	}

	// max_messages 3: the second turn would make 4.
	small := conversation.NewMemory(conversation.Limits{MaxMessages: 3})
	e2 := axocoatl.New(axocoatl.Options{Conversations: small})
	t.Cleanup(func() { _ = e2.Close(context.Background()); _ = small.Close() })
	m := &scriptModel{turns: []agent.Response{{ToolCalls: []agent.ToolCall{call("c1", "nope", `{}`)}}, {Content: "done"}}}
	must(t, e2.AddAgent(agent.Spec{ID: "a"}, m))
	ev2 := subscribe(t, e2, axocoatl.EventTaskCompleted)
	r, err = e2.ExecuteRequest(ctx, axocoatl.Request{AgentID: "a", Input: "x", ConversationID: conversation.New})
	if err != nil || r.Output != "done" {
		t.Fatalf("a turn too long for its conversation failed: %+v, %v", r, err)
	}
	if _, p := next(t, ev2); !strings.Contains(fmt.Sprint(p["conversation_error"]), "max_messages") {
		t.Fatalf("TaskCompleted conversation_error = %v, want the bound named", p["conversation_error"])
	}
}

// A long conversation is windowed from its end without reading it all, and
// the window is the one the whole conversation gives.
// Guards: agents[].max_history_bytes on a 1,000-turn conversation.
func TestLongConversationTailIsTheWindow(t *testing.T) {
	store := conversation.NewMemory(conversation.Limits{})
	t.Cleanup(func() { _ = store.Close() })
	ctx := context.Background()
	must(t, store.Create(ctx, conversation.Info{ID: "long", AgentID: "a"}))
	var all []conversation.Message
	for i := range 1000 {
		turn := []conversation.Message{
			{Role: agent.RoleUser, Content: fmt.Sprint("q", i)},
			{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{call(fmt.Sprint("c", i), "t", `{}`)}},
			{Role: agent.RoleTool, ToolCallID: fmt.Sprint("c", i), Content: strings.Repeat("r", i%7*50)},
			{Role: agent.RoleAssistant, Content: fmt.Sprint("a", i)},
		}
		must(t, store.Append(ctx, "long", turn))
		all = append(all, turn...)
	}
	e := axocoatl.New(axocoatl.Options{Conversations: store})
	t.Cleanup(func() { _ = e.Close(ctx) })
	m := &scriptModel{}
	const window = 5000
	must(t, e.AddAgent(agent.Spec{ID: "a", MaxHistoryBytes: window}, m))
	if _, err := e.ExecuteRequest(ctx, axocoatl.Request{AgentID: "a", Input: "next", ConversationID: "long"}); err != nil {
		t.Fatal(err)
	}
	want, omitted := conversation.Window(all, window)
	got := m.reqs[0].Messages
	if len(got) != len(want)+1 || omitted == 0 {
		t.Fatalf("sent %d messages, the whole conversation's window is %d (+1 new); omitted %d", len(got), len(want), omitted)
	}
	for i := range want {
		if got[i].Content != want[i].Content || got[i].Role != want[i].Role {
			t.Fatalf("message %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if !strings.Contains(m.reqs[0].System, fmt.Sprintf("its %d oldest messages", omitted)) {
		t.Fatalf("system %q does not count the %d left out", m.reqs[0].System, omitted)
	}
}
