// Package storetest is the suite every [conversation.Store] passes: call
// [Run] from a test of the implementation.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/conversation"
)

// Open returns a new, empty store bounded by l, closed by the test's
// cleanup (Run closes it too; a second Close must not fail the test).
type Open func(t *testing.T, l conversation.Limits) conversation.Store

// Run runs the suite against stores from open. It checks:
//   - [conversation.Store.Create] and [conversation.Store.Get], with
//     [conversation.ErrExists] and [conversation.ErrInvalidID];
//   - [conversation.Store.Append] and [conversation.Store.Messages] round
//     trips, paged;
//   - [conversation.ErrNotFound] from every method;
//   - [conversation.Store.List], newest first, paged by cursor, by agent;
//   - [conversation.Store.Delete], for good;
//   - [conversation.Store.Lock]: [conversation.ErrBusy], release, ttl;
//   - every bound of [conversation.Limits]: eviction of the least
//     recently updated idle conversation, [conversation.ErrFull] all or
//     none, idle_ttl;
//   - concurrent appends, and [conversation.ErrClosed] after Close.
func Run(t *testing.T, open Open) {
	t.Run("CreateGet", func(t *testing.T) { testCreateGet(t, open) })
	t.Run("AppendMessages", func(t *testing.T) { testAppendMessages(t, open) })
	t.Run("NotFound", func(t *testing.T) { testNotFound(t, open) })
	t.Run("ListPaged", func(t *testing.T) { testList(t, open) })
	t.Run("Delete", func(t *testing.T) { testDelete(t, open) })
	t.Run("Lock", func(t *testing.T) { testLock(t, open) })
	t.Run("LockExpires", func(t *testing.T) { testLockExpires(t, open) })
	t.Run("MaxPerAgentEvictsOldestIdle", func(t *testing.T) { testMaxPerAgent(t, open) })
	t.Run("MaxConversationsEvicts", func(t *testing.T) { testMaxConversations(t, open) })
	t.Run("MaxMessagesAndBytesRefuse", func(t *testing.T) { testFull(t, open) })
	t.Run("MaxTotalBytesEvicts", func(t *testing.T) { testTotalBytes(t, open) })
	t.Run("IdleTTL", func(t *testing.T) { testIdleTTL(t, open) })
	t.Run("ConcurrentAppends", func(t *testing.T) { testConcurrent(t, open) })
	t.Run("Closed", func(t *testing.T) { testClosed(t, open) })
}

var ctx = context.Background()

func create(t *testing.T, s conversation.Store, id, agentID string) conversation.Info {
	t.Helper()
	c := conversation.Info{ID: id, AgentID: agentID, Title: "title of " + id, Source: "api", Created: time.Now()}
	if err := s.Create(ctx, c); err != nil {
		t.Fatalf("Create(%s): %v", id, err)
	}
	return c
}

func userMsg(text string) conversation.Message {
	return conversation.Message{Role: agent.RoleUser, Content: text, TaskID: "t1", At: time.Now().UTC().Truncate(time.Millisecond)}
}

func turn(text string) []conversation.Message {
	at := time.Now().UTC().Truncate(time.Millisecond)
	return []conversation.Message{
		{Role: agent.RoleUser, Content: text, TaskID: "task-" + text, At: at},
		{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: "call_1", Name: "mcp__fs__read", Arguments: json.RawMessage(`{"path":"/a b","n":1}`)}}, TaskID: "task-" + text, At: at},
		{Role: agent.RoleTool, ToolCallID: "call_1", Content: "contents ✓", IsError: true, TaskID: "task-" + text, At: at},
		{Role: agent.RoleAssistant, Content: "answer to " + text, TaskID: "task-" + text, At: at},
	}
}

func append1(t *testing.T, s conversation.Store, id string, msgs ...conversation.Message) {
	t.Helper()
	if err := s.Append(ctx, id, msgs); err != nil {
		t.Fatalf("Append(%s): %v", id, err)
	}
}

func testCreateGet(t *testing.T, open Open) {
	s := open(t, conversation.Limits{})
	c := create(t, s, "c1", "a")
	got, err := s.Get(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != c.ID || got.AgentID != "a" || got.Title != c.Title || got.Source != "api" || got.Messages != 0 || got.Bytes != 0 {
		t.Fatalf("Get = %+v, created %+v", got, c)
	}
	if !got.Created.Equal(got.Updated) || got.Created.Sub(c.Created).Abs() > time.Millisecond {
		t.Fatalf("Created %v Updated %v, want both %v", got.Created, got.Updated, c.Created)
	}
	if err := s.Create(ctx, conversation.Info{ID: "c1", AgentID: "b"}); !errors.Is(err, conversation.ErrExists) {
		t.Fatalf("second Create = %v, want ErrExists", err)
	}
	for _, bad := range []string{"", "new", "has space", "ü", strings.Repeat("x", conversation.MaxIDLength+1), "../x", "-lead"} {
		if err := s.Create(ctx, conversation.Info{ID: bad, AgentID: "a"}); !errors.Is(err, conversation.ErrInvalidID) {
			t.Errorf("Create(%q) = %v, want ErrInvalidID", bad, err)
		}
	}
}

func testAppendMessages(t *testing.T, open Open) {
	s := open(t, conversation.Limits{})
	create(t, s, "c1", "a")
	first, second := turn("one"), turn("two")
	append1(t, s, "c1", first...)
	before, _ := s.Get(ctx, "c1")
	append1(t, s, "c1", second...)
	info, err := s.Get(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	var size int64
	for _, m := range append(first, second...) {
		size += int64(conversation.Size(m))
	}
	if info.Messages != 8 || info.Bytes != size {
		t.Fatalf("Info messages %d bytes %d, want 8 and %d", info.Messages, info.Bytes, size)
	}
	if info.Updated.Before(before.Updated) || !info.Updated.After(info.Created) && !info.Updated.Equal(info.Created) {
		t.Fatalf("Updated %v did not advance (before %v, created %v)", info.Updated, before.Updated, info.Created)
	}
	all, err := s.Messages(ctx, "c1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := append(first, second...)
	if len(all) != len(want) {
		t.Fatalf("Messages: %d, want %d", len(all), len(want))
	}
	for i := range want {
		if !sameMessage(all[i], want[i]) {
			t.Fatalf("message %d = %+v, want %+v", i, all[i], want[i])
		}
	}
	page, err := s.Messages(ctx, "c1", 3, 2)
	if err != nil || len(page) != 2 || !sameMessage(page[0], want[3]) || !sameMessage(page[1], want[4]) {
		t.Fatalf("Messages(3, 2) = %+v, %v", page, err)
	}
	if tail, err := s.Messages(ctx, "c1", 7, 10); err != nil || len(tail) != 1 {
		t.Fatalf("Messages(7, 10) = %d messages, %v; want 1", len(tail), err)
	}
	if past, err := s.Messages(ctx, "c1", 100, 0); err != nil || len(past) != 0 {
		t.Fatalf("Messages past the end = %d, %v; want none and no error", len(past), err)
	}
}

func sameMessage(a, b conversation.Message) bool {
	if a.Role != b.Role || a.Content != b.Content || a.ToolCallID != b.ToolCallID || a.IsError != b.IsError || a.TaskID != b.TaskID || !a.At.Equal(b.At) || len(a.ToolCalls) != len(b.ToolCalls) {
		return false
	}
	for i := range a.ToolCalls {
		x, y := a.ToolCalls[i], b.ToolCalls[i]
		if x.ID != y.ID || x.Name != y.Name || string(x.Arguments) != string(y.Arguments) {
			return false
		}
	}
	return true
}

func testNotFound(t *testing.T, open Open) {
	s := open(t, conversation.Limits{})
	if _, err := s.Get(ctx, "nope"); !errors.Is(err, conversation.ErrNotFound) {
		t.Errorf("Get = %v", err)
	}
	if _, err := s.Messages(ctx, "nope", 0, 0); !errors.Is(err, conversation.ErrNotFound) {
		t.Errorf("Messages = %v", err)
	}
	if err := s.Append(ctx, "nope", turn("x")); !errors.Is(err, conversation.ErrNotFound) {
		t.Errorf("Append = %v", err)
	}
	if err := s.Delete(ctx, "nope"); !errors.Is(err, conversation.ErrNotFound) {
		t.Errorf("Delete = %v", err)
	}
	if _, err := s.Lock(ctx, "nope", time.Minute); !errors.Is(err, conversation.ErrNotFound) {
		t.Errorf("Lock = %v", err)
	}
}

func testList(t *testing.T, open Open) {
	s := open(t, conversation.Limits{})
	const n = 25
	for i := range n {
		agentID := "a"
		if i%3 == 0 {
			agentID = "b"
		}
		create(t, s, fmt.Sprintf("c%02d", i), agentID)
		append1(t, s, fmt.Sprintf("c%02d", i), userMsg("hi"))
	}
	// c05 becomes the most recent.
	append1(t, s, "c05", userMsg("again"))

	var seen []conversation.Info
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > n {
			t.Fatal("List never ends")
		}
		p, err := s.List(ctx, conversation.Query{Limit: 4, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Conversations) > 4 {
			t.Fatalf("page of %d, limit 4", len(p.Conversations))
		}
		seen = append(seen, p.Conversations...)
		if p.Next == "" {
			break
		}
		cursor = p.Next
	}
	if len(seen) != n {
		t.Fatalf("List gave %d conversations over its pages, want %d", len(seen), n)
	}
	if seen[0].ID != "c05" {
		t.Fatalf("newest first: got %s first, want c05", seen[0].ID)
	}
	ids := map[string]bool{}
	for i, c := range seen {
		if ids[c.ID] {
			t.Fatalf("%s listed twice", c.ID)
		}
		ids[c.ID] = true
		if i > 0 && c.Updated.After(seen[i-1].Updated) {
			t.Fatalf("not newest first at %d: %v after %v", i, c.Updated, seen[i-1].Updated)
		}
	}
	p, err := s.List(ctx, conversation.Query{AgentID: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Conversations) != 9 {
		t.Fatalf("agent b: %d conversations, want 9", len(p.Conversations))
	}
	for _, c := range p.Conversations {
		if c.AgentID != "b" {
			t.Fatalf("agent b's list holds %s of %s", c.ID, c.AgentID)
		}
	}
	if _, err := s.List(ctx, conversation.Query{Cursor: "garbage"}); err == nil {
		t.Fatal("a malformed cursor was accepted")
	}
	if p, err := s.List(ctx, conversation.Query{Limit: 10_000}); err != nil || len(p.Conversations) != n {
		t.Fatalf("List(limit 10000) = %d, %v", len(p.Conversations), err)
	}
}

func testDelete(t *testing.T, open Open) {
	s := open(t, conversation.Limits{})
	create(t, s, "c1", "a")
	create(t, s, "c2", "a")
	append1(t, s, "c1", turn("one")...)
	if err := s.Delete(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "c1"); !errors.Is(err, conversation.ErrNotFound) {
		t.Fatalf("Get after Delete = %v", err)
	}
	if _, err := s.Messages(ctx, "c1", 0, 0); !errors.Is(err, conversation.ErrNotFound) {
		t.Fatalf("Messages after Delete = %v", err)
	}
	p, _ := s.List(ctx, conversation.Query{})
	if len(p.Conversations) != 1 || p.Conversations[0].ID != "c2" {
		t.Fatalf("List after Delete = %+v", p.Conversations)
	}
	// The id can be used again, and starts empty.
	create(t, s, "c1", "a")
	if msgs, _ := s.Messages(ctx, "c1", 0, 0); len(msgs) != 0 {
		t.Fatalf("a re-created conversation holds %d old messages", len(msgs))
	}
}

func testLock(t *testing.T, open Open) {
	s := open(t, conversation.Limits{})
	create(t, s, "c1", "a")
	create(t, s, "c2", "a")
	release, err := s.Lock(ctx, "c1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lock(ctx, "c1", time.Minute); !errors.Is(err, conversation.ErrBusy) {
		t.Fatalf("second Lock = %v, want ErrBusy", err)
	}
	r2, err := s.Lock(ctx, "c2", time.Minute)
	if err != nil {
		t.Fatalf("another conversation's Lock = %v", err)
	}
	r2()
	release()
	release() // idempotent
	r3, err := s.Lock(ctx, "c1", time.Minute)
	if err != nil {
		t.Fatalf("Lock after release = %v", err)
	}
	release() // the old release must not end the new lease
	if _, err := s.Lock(ctx, "c1", time.Minute); !errors.Is(err, conversation.ErrBusy) {
		t.Fatalf("an old release ended a newer lease: Lock = %v", err)
	}
	r3()
}

func testLockExpires(t *testing.T, open Open) {
	s := open(t, conversation.Limits{})
	create(t, s, "c1", "a")
	if _, err := s.Lock(ctx, "c1", 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for {
		release, err := s.Lock(ctx, "c1", time.Minute)
		if err == nil {
			if time.Since(start) < 250*time.Millisecond {
				t.Fatalf("the lease ended after %v, its ttl is 300ms", time.Since(start))
			}
			release()
			return
		}
		if !errors.Is(err, conversation.ErrBusy) {
			t.Fatal(err)
		}
		if time.Since(start) > 20*time.Second {
			t.Fatal("a lease never released did not end after its ttl")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func testMaxPerAgent(t *testing.T, open Open) {
	s := open(t, conversation.Limits{MaxPerAgent: 3})
	for _, id := range []string{"a1", "a2", "a3"} {
		create(t, s, id, "a")
		append1(t, s, id, userMsg(id))
	}
	create(t, s, "b1", "b")
	// a1 is the oldest but has a turn running: a2 goes.
	release, err := s.Lock(ctx, "a1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	create(t, s, "a4", "a")
	for id, want := range map[string]bool{"a1": true, "a2": false, "a3": true, "a4": true, "b1": true} {
		_, err := s.Get(ctx, id)
		if got := err == nil; got != want {
			t.Errorf("%s present = %v (%v), want %v", id, got, err, want)
		}
	}
	p, _ := s.List(ctx, conversation.Query{AgentID: "a"})
	if len(p.Conversations) != 3 {
		t.Fatalf("agent a has %d conversations, max_per_agent 3", len(p.Conversations))
	}
}

func testMaxConversations(t *testing.T, open Open) {
	s := open(t, conversation.Limits{MaxConversations: 5})
	for i := range 12 {
		id := fmt.Sprintf("c%02d", i)
		create(t, s, id, fmt.Sprintf("agent%d", i%2))
		append1(t, s, id, userMsg(id))
	}
	p, _ := s.List(ctx, conversation.Query{})
	if len(p.Conversations) != 5 {
		t.Fatalf("%d conversations, max_conversations 5", len(p.Conversations))
	}
	for i, c := range p.Conversations {
		if want := fmt.Sprintf("c%02d", 11-i); c.ID != want {
			t.Fatalf("kept %s at %d, want the newest (%s)", c.ID, i, want)
		}
	}
}

func testFull(t *testing.T, open Open) {
	s := open(t, conversation.Limits{MaxMessages: 6, MaxBytes: 4096})
	create(t, s, "c1", "a")
	append1(t, s, "c1", turn("one")...)
	if err := s.Append(ctx, "c1", turn("two")); !errors.Is(err, conversation.ErrFull) || !strings.Contains(err.Error(), "max_messages") {
		t.Fatalf("Append past max_messages = %v, want ErrFull naming max_messages", err)
	}
	if info, _ := s.Get(ctx, "c1"); info.Messages != 4 {
		t.Fatalf("a refused Append left %d messages, want 4 (all or none)", info.Messages)
	}
	create(t, s, "c2", "a")
	big := userMsg(strings.Repeat("x", 5000))
	if err := s.Append(ctx, "c2", []conversation.Message{big}); !errors.Is(err, conversation.ErrFull) || !strings.Contains(err.Error(), "max_bytes") {
		t.Fatalf("Append past max_bytes = %v, want ErrFull naming max_bytes", err)
	}
	if info, _ := s.Get(ctx, "c2"); info.Messages != 0 || info.Bytes != 0 {
		t.Fatalf("a refused Append left %+v", info)
	}
}

func testTotalBytes(t *testing.T, open Open) {
	msg := userMsg(strings.Repeat("y", 1000))
	size := int64(conversation.Size(msg))
	s := open(t, conversation.Limits{MaxTotalBytes: 3*size + size/2})
	for _, id := range []string{"c1", "c2", "c3"} {
		create(t, s, id, "a")
		append1(t, s, id, msg)
	}
	create(t, s, "c4", "a")
	append1(t, s, "c4", msg) // c1, the least recently updated, goes
	if _, err := s.Get(ctx, "c1"); !errors.Is(err, conversation.ErrNotFound) {
		t.Fatalf("c1 still there past max_total_bytes: %v", err)
	}
	for _, id := range []string{"c2", "c3", "c4"} {
		if _, err := s.Get(ctx, id); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
}

func testIdleTTL(t *testing.T, open Open) {
	s := open(t, conversation.Limits{IdleTTL: 400 * time.Millisecond})
	create(t, s, "old", "a")
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := s.Get(ctx, "old")
		if errors.Is(err, conversation.ErrNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("a conversation idle past idle_ttl is still there")
		}
		time.Sleep(50 * time.Millisecond)
	}
	p, _ := s.List(ctx, conversation.Query{})
	for _, c := range p.Conversations {
		if c.ID == "old" {
			t.Fatal("List shows a conversation past idle_ttl")
		}
	}
	// One updated within the ttl stays.
	create(t, s, "live", "a")
	append1(t, s, "live", userMsg("x"))
	if _, err := s.Get(ctx, "live"); err != nil {
		t.Fatalf("a fresh conversation: %v", err)
	}
}

func testConcurrent(t *testing.T, open Open) {
	s := open(t, conversation.Limits{})
	const convs, turns = 16, 25
	for i := range convs {
		create(t, s, fmt.Sprintf("c%d", i), "a")
	}
	var wg sync.WaitGroup
	errs := make(chan error, convs)
	for i := range convs {
		wg.Go(func() {
			id := fmt.Sprintf("c%d", i)
			for j := range turns {
				if err := s.Append(ctx, id, []conversation.Message{userMsg(fmt.Sprint(j)), {Role: agent.RoleAssistant, Content: fmt.Sprint(j)}}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := range convs {
		msgs, err := s.Messages(ctx, fmt.Sprintf("c%d", i), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != 2*turns {
			t.Fatalf("c%d: %d messages, want %d", i, len(msgs), 2*turns)
		}
		for j := range turns {
			if msgs[2*j].Content != fmt.Sprint(j) || msgs[2*j].Role != agent.RoleUser || msgs[2*j+1].Role != agent.RoleAssistant {
				t.Fatalf("c%d: turn %d out of order: %+v %+v", i, j, msgs[2*j], msgs[2*j+1])
			}
		}
	}
}

func testClosed(t *testing.T, open Open) {
	s := open(t, conversation.Limits{})
	create(t, s, "c1", "a")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "c1"); !errors.Is(err, conversation.ErrClosed) {
		t.Fatalf("Get after Close = %v, want ErrClosed", err)
	}
	if err := s.Create(ctx, conversation.Info{ID: "c2", AgentID: "a"}); !errors.Is(err, conversation.ErrClosed) {
		t.Fatalf("Create after Close = %v, want ErrClosed", err)
	}
}
