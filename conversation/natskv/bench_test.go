package natskv_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/conversation"
	"github.com/axocoatl/axocoatl-go/conversation/natskv"
)

// benchTurn is a turn as the Engine appends it: the user's message, a tool
// call, its result and the answer, about 1 KiB.
func benchTurn(i int) []conversation.Message {
	at := time.Now()
	return []conversation.Message{
		{Role: agent.RoleUser, Content: fmt.Sprintf("question %d: ", i) + strings.Repeat("q", 200), At: at},
		{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: "call_1", Name: "mcp__fs__read", Arguments: []byte(`{"path":"/etc/hosts"}`)}}, At: at},
		{Role: agent.RoleTool, ToolCallID: "call_1", Content: strings.Repeat("r", 500), At: at},
		{Role: agent.RoleAssistant, Content: strings.Repeat("a", 200), At: at},
	}
}

// Turns appended per second, 16 conversations at once (one writer each),
// against the JetStream KV: the store's Append, and raw KV Puts of the
// same bytes (one Put per turn, what the store adds to that is the info
// entry's read and Update).
func BenchmarkAppend16(b *testing.B) {
	convs := benchConvs
	ns := jsServer(b)
	nc := connect(b, ns)
	ctx := context.Background()
	run := func(b *testing.B, appendTurn func(c, i int) error) {
		var wg sync.WaitGroup
		errs := make(chan error, convs)
		per := (b.N + convs - 1) / convs
		b.ResetTimer()
		start := time.Now()
		for c := range convs {
			wg.Go(func() {
				for i := range per {
					if err := appendTurn(c, i); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		b.ReportMetric(float64(per*convs)/time.Since(start).Seconds(), "turns/s")
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
	}
	runs := 0 // a bucket per run: -count runs again on the same server
	b.Run("store", func(b *testing.B) {
		runs++
		s := open(b, nc, natskv.Config{Bucket: fmt.Sprintf("bench%d_%d", runs, b.N), Limits: conversation.Limits{MaxMessages: -1, MaxBytes: -1}})
		for c := range convs {
			if err := s.Create(ctx, conversation.Info{ID: fmt.Sprintf("c%d", c), AgentID: "a"}); err != nil {
				b.Fatal(err)
			}
		}
		run(b, func(c, i int) error { return s.Append(ctx, fmt.Sprintf("c%d", c), benchTurn(i)) })
	})
	b.Run("rawkv", func(b *testing.B) {
		js, err := jetstream.New(nc)
		if err != nil {
			b.Fatal(err)
		}
		runs++
		kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: fmt.Sprintf("raw%d_%d", runs, b.N), History: 1})
		if err != nil {
			b.Fatal(err)
		}
		data := mustJSON(b, benchTurn(0))
		run(b, func(c, i int) error {
			_, err := kv.Put(ctx, fmt.Sprintf("c%d.%d", c, i), data)
			return err
		})
	})
}

// Turn 100 of a conversation through Engine.ExecuteRequest on the echo
// model, against a one-shot run on the same Engine. Each turn 100 is the
// next of a conversation already holding 99 turns (as the Engine wrote
// them: 99 segments), made before the timer starts.
func BenchmarkEngineTurn100(b *testing.B) {
	ns := jsServer(b)
	nc := connect(b, ns)
	ctx := context.Background()
	s := open(b, nc, natskv.Config{Bucket: "turn100"})
	e := axocoatl.New(axocoatl.Options{Conversations: s})
	b.Cleanup(func() { _ = e.Close(ctx) })
	if err := e.AddAgent(agent.Spec{ID: "echo"}, provider.EchoModel{}); err != nil {
		b.Fatal(err)
	}
	b.Run("oneshot", func(b *testing.B) {
		for b.Loop() {
			if _, err := e.ExecuteRequest(ctx, axocoatl.Request{AgentID: "echo", Input: "hello there"}); err != nil {
				b.Fatal(err)
			}
		}
	})
	runs := 0 // -count runs the sub-benchmarks again on the same bucket
	prefill := func(b *testing.B, name string) []string {
		runs++
		ids := make([]string, b.N)
		for i := range ids {
			ids[i] = fmt.Sprintf("%s-%d-%d-%d", name, runs, b.N, i)
			if err := s.Create(ctx, conversation.Info{ID: ids[i], AgentID: "echo"}); err != nil {
				b.Fatal(err)
			}
			for j := range 99 {
				if err := s.Append(ctx, ids[i], []conversation.Message{
					{Role: agent.RoleUser, Content: fmt.Sprintf("hello there %d", j)},
					{Role: agent.RoleAssistant, Content: fmt.Sprintf("hello there %d", j)},
				}); err != nil {
					b.Fatal(err)
				}
			}
		}
		// The index's watch has all of it (in order: the last one written
		// shows last), so that its backlog costs nothing in the timed part.
		last := ids[len(ids)-1]
		for deadline := time.Now().Add(time.Minute); ; {
			p, err := s.List(ctx, conversation.Query{Limit: 1})
			if err == nil && len(p.Conversations) == 1 && p.Conversations[0].ID == last && p.Conversations[0].Messages == 198 {
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("the index never caught up")
			}
			time.Sleep(10 * time.Millisecond)
		}
		return ids
	}
	b.Run("turn100", func(b *testing.B) {
		ids := prefill(b, "t100")
		b.ResetTimer()
		for i := range b.N {
			if _, err := e.ExecuteRequest(ctx, axocoatl.Request{AgentID: "echo", Input: "hello there", ConversationID: ids[i]}); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The same turn on the in-memory store: the Engine's own cost of a
	// turn (history, window, record) without a store's I/O.
	b.Run("turn100-memory", func(b *testing.B) {
		mem := conversation.NewMemory(conversation.Limits{})
		em := axocoatl.New(axocoatl.Options{Conversations: mem})
		defer em.Close(ctx)
		if err := em.AddAgent(agent.Spec{ID: "echo"}, provider.EchoModel{}); err != nil {
			b.Fatal(err)
		}
		ids := make([]string, b.N)
		for i := range ids {
			ids[i] = fmt.Sprint("m", i)
			_ = mem.Create(ctx, conversation.Info{ID: ids[i], AgentID: "echo"})
			for j := range 99 {
				_ = mem.Append(ctx, ids[i], []conversation.Message{{Role: agent.RoleUser, Content: fmt.Sprintf("hello there %d", j)}, {Role: agent.RoleAssistant, Content: fmt.Sprintf("hello there %d", j)}})
			}
		}
		b.ResetTimer()
		for i := range b.N {
			if _, err := em.ExecuteRequest(ctx, axocoatl.Request{AgentID: "echo", Input: "hello there", ConversationID: ids[i]}); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The store's own part of a turn, without the Engine: what the Engine
	// calls (lease, info, history, the turn's append, release).
	b.Run("storeonly", func(b *testing.B) {
		ids := prefill(b, "s100")
		b.ResetTimer()
		for i := range b.N {
			release, err := s.Lock(ctx, ids[i], time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.Get(ctx, ids[i]); err != nil {
				b.Fatal(err)
			}
			if _, err := s.Messages(ctx, ids[i], 0, 0); err != nil {
				b.Fatal(err)
			}
			if err := s.Append(ctx, ids[i], []conversation.Message{
				{Role: agent.RoleUser, Content: "hello there"}, {Role: agent.RoleAssistant, Content: "hello there"},
			}); err != nil {
				b.Fatal(err)
			}
			release()
		}
	})
}

func mustJSON(b *testing.B, v any) []byte {
	b.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		b.Fatal(err)
	}
	return data
}

var benchConvs = 16
