package testutil_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/builtin"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

// Each wire of StreamingChat is read by the provider of its kind as the
// same answer: the deltas one by one (text equal to Text), and the usage
// of the final frames, streamed or plain, equal to Prompt, Completion and
// Cached.
func TestStreamingChatWires(t *testing.T) {
	testutil.EachWire(t, func(t *testing.T, wire string) {
		chat := testutil.NewStreamingChatOn(t, wire, 50, time.Millisecond)
		m, err := builtin.New(wire, provider.Config{BaseURL: chat.URL, APIKey: "sk-test", MaxRetries: -1})
		if err != nil {
			t.Fatal(err)
		}
		s, ok := m.(agent.Streamer)
		if !ok {
			t.Fatalf("the %s provider does not stream", wire)
		}
		want := agent.Usage{InputTokens: 123, OutputTokens: 50, CachedInputTokens: 23}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		req := &agent.Request{Model: "m", Messages: []agent.Message{{Role: agent.RoleUser, Content: "go"}}}
		var text strings.Builder
		deltas := 0
		res, err := s.GenerateStream(ctx, req, func(d agent.Delta) {
			if d.Kind == agent.DeltaText {
				if deltas == 0 && chat.Finished() != 0 {
					t.Error("the first delta came after the whole answer")
				}
				deltas++
				text.WriteString(d.Text)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if deltas != 50 || text.String() != chat.Text() || res.Content != chat.Text() || res.Usage != want {
			t.Fatalf("%d deltas, text %q, content %q, usage %+v (want %+v)", deltas, text.String(), res.Content, res.Usage, want)
		}
		res, err = m.Generate(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if res.Content != chat.Text() || res.Usage != want || chat.Plain.Load() != 1 {
			t.Fatalf("plain: content %q, usage %+v, %d plain requests", res.Content, res.Usage, chat.Plain.Load())
		}
		if chat.Started() != 2 || chat.Finished() != 2 {
			t.Fatalf("started %d, finished %d", chat.Started(), chat.Finished())
		}
	})
}
