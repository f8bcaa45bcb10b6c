package mcpserver_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/builtin"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
	"github.com/axocoatl/axocoatl-go/mcpserver"
)

// streamFixture is a Server whose agent "writer" is the real provider of
// chat's wire (openai or anthropic) against chat, a model server that
// streams its answer.
func streamFixture(t testing.TB, chat *testutil.StreamingChat) *fixture {
	t.Helper()
	m, err := builtin.New(chat.Wire, provider.Config{BaseURL: chat.URL, APIKey: "sk-test", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	eng := axocoatl.New(axocoatl.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := eng.AddAgent(agent.Spec{ID: "writer", Provider: chat.Wire, Model: "m", Tools: []string{}}, m); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, eng, mcpserver.Config{})
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := eng.Close(ctx); err != nil {
			t.Errorf("engine close: %v", err)
		}
	})
	return &fixture{eng: eng, srv: srv}
}

// textLog records each progress notification, and for each whether the
// model server had finished its answer when the client got it.
type textLog struct {
	chat     *testutil.StreamingChat
	mu       sync.Mutex
	msgs     []string
	vals     []float64
	finished []int64
	at       []time.Time
	seen     chan struct{}
}

func (l *textLog) handler(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	fin := l.chat.Finished()
	l.mu.Lock()
	l.msgs = append(l.msgs, req.Params.Message)
	l.vals = append(l.vals, req.Params.Progress)
	l.finished = append(l.finished, fin)
	l.at = append(l.at, time.Now())
	l.mu.Unlock()
	select {
	case l.seen <- struct{}{}:
	default:
	}
}

// waitFor waits (bounded) until a notification's message satisfies ok;
// notifications are handled on the client's own goroutine and may land
// just after the result.
func (l *textLog) waitFor(t *testing.T, ok func(string) bool) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		l.mu.Lock()
		for _, m := range l.msgs {
			if ok(m) {
				l.mu.Unlock()
				return
			}
		}
		l.mu.Unlock()
		select {
		case <-l.seen:
		case <-deadline:
			t.Fatal("timed out waiting for the progress notification with the answer's end")
		}
	}
}

func (l *textLog) snapshot() (msgs []string, vals []float64, finished []int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.msgs...), append([]float64(nil), l.vals...), append([]int64(nil), l.finished...)
}

// isText: a progress message that is the answer so far (the status
// messages are "agent …", "calling tool …", "tool …").
func isText(msg string) bool {
	return !strings.HasPrefix(msg, "agent ") && !strings.HasPrefix(msg, "calling tool ") && !strings.HasPrefix(msg, "tool ")
}

type progressDoor struct {
	name    string
	connect func(t *testing.T, f *fixture, opts *mcp.ClientOptions) *mcp.ClientSession
}

// progressDoors are stdio and /mcp, each in both eras.
func progressDoors() []progressDoor {
	stdio := func(so *mcp.ClientSessionOptions) func(*testing.T, *fixture, *mcp.ClientOptions) *mcp.ClientSession {
		return func(t *testing.T, f *fixture, opts *mcp.ClientOptions) *mcp.ClientSession {
			tr, _ := stdioPair(t, f, context.Background())
			cs, err := testClient(opts).Connect(ctxT(t), tr, so)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })
			return cs
		}
	}
	httpDoor := func(so ...*mcp.ClientSessionOptions) func(*testing.T, *fixture, *mcp.ClientOptions) *mcp.ClientSession {
		return func(t *testing.T, f *fixture, opts *mcp.ClientOptions) *mcp.ClientSession {
			return connectHTTP(t, serveHTTP(t, f).URL+"/mcp", opts, so...)
		}
	}
	return []progressDoor{
		{"stdio/" + mcpserver.ProtocolVersion2026, stdio(nil)},
		{"stdio/2025-11-25", stdio(legacy)},
		{"http/" + mcpserver.ProtocolVersion2026, httpDoor()},
		{"http/2025-11-25", httpDoor(legacy)},
	}
}

// A call with a progressToken gets the answer as the model writes it: the
// first text arrives before the model finished, the last is the answer's
// end, the progress values increase. A call without a token is not
// streamed at all (the model is asked for a plain answer). On the OpenAI
// wire and on the Anthropic wire.
// Guards: one text progress notification per 200 ms.
func TestProgressCarriesTheTextSoFar(t *testing.T) {
	for _, door := range progressDoors() {
		t.Run(door.name, func(t *testing.T) {
			testutil.EachWire(t, func(t *testing.T, wire string) {
				chat := testutil.NewStreamingChatOn(t, wire, 200, 5*time.Millisecond)
				f := streamFixture(t, chat)
				log := &textLog{chat: chat, seen: make(chan struct{}, 1)}
				cs := door.connect(t, f, &mcp.ClientOptions{ProgressNotificationHandler: log.handler})
				final := chat.Text()

				params := &mcp.CallToolParams{Name: "agent_writer", Arguments: map[string]any{"input": "write"}}
				params.SetProgressToken("tok-text")
				start := time.Now()
				res, err := cs.CallTool(ctxT(t), params)
				took := time.Since(start)
				if err != nil {
					t.Fatal(err)
				}
				if res.IsError || len(res.Content) == 0 {
					t.Fatalf("result %+v", res)
				}
				if got := res.Content[0].(*mcp.TextContent).Text; got != final {
					t.Fatalf("answer %q, want %q", got, final)
				}
				if p := chat.Plain.Load(); p != 0 {
					t.Fatalf("a call with a progress token asked for %d plain answers, want it streamed", p)
				}
				log.waitFor(t, func(m string) bool { return isText(m) && strings.HasSuffix(m, chat.Word(chat.Deltas-1)) })

				msgs, vals, finished := log.snapshot()
				first, last, texts := -1, -1, 0
				for i, m := range msgs {
					if !isText(m) {
						continue
					}
					texts++
					if first < 0 {
						first = i
					}
					last = i
					if !strings.HasSuffix(final, m) && !strings.HasPrefix(final, m) {
						t.Errorf("progress[%d] = %q is not a piece of the answer", i, m)
					}
				}
				if first < 0 {
					t.Fatalf("no progress with text among %q", msgs)
				}
				if finished[first] != 0 {
					t.Errorf("the first text (%q) reached the client after the model had finished", msgs[first])
				}
				log.mu.Lock()
				firstAt := log.at[first].Sub(start)
				log.mu.Unlock()
				t.Logf("%s wire, %d deltas in %v: first text after %v, %d text notifications of %d", wire, chat.Deltas, took, firstAt, texts, len(msgs))
				if m := msgs[last]; m == "" || !strings.HasSuffix(final, m) {
					t.Errorf("last text %q is not a suffix of the answer %q", m, final)
				}
				// Coalesced: 200 deltas over about a second make a handful of
				// notifications, not one per delta.
				if texts >= chat.Deltas/2 {
					t.Errorf("%d text notifications for %d deltas: not coalesced", texts, chat.Deltas)
				}
				for i := 1; i < len(vals); i++ {
					if vals[i] <= vals[i-1] {
						t.Fatalf("progress values %v do not increase", vals)
					}
				}

				// No token: no listener, so the model is asked for a plain
				// answer, and no progress is sent.
				before := len(msgs)
				res, err = cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "agent_writer", Arguments: map[string]any{"input": "again"}})
				if err != nil || res.IsError {
					t.Fatalf("call without token: %v %+v", err, res)
				}
				if p := chat.Plain.Load(); p != 1 {
					t.Errorf("a call without a progress token made %d plain model requests, want 1 (no listener, no stream)", p)
				}
				if msgs, _, _ := log.snapshot(); len(msgs) != before {
					t.Errorf("progress sent without a progress token: %q", msgs[before:])
				}
			})
		})
	}
}

// A 10,000-delta answer written as fast as the model server can: the
// notifications are bounded by time (one per ProgressTextInterval, plus
// the start and the last text), not by the number of deltas, and each
// message is at most ProgressTextBytes of valid UTF-8, the end of the
// answer.
// Guards: the 4 KiB of text in one progress notification and one text notification per 200 ms.
func TestProgressTextIsBounded(t *testing.T) {
	chat := testutil.NewStreamingChat(t, 10_000, 0)
	// Multi-byte words, so a cut at the byte bound falls inside a rune.
	chat.Word = func(i int) string { return "é" + strings.Repeat("ж", i%3) + "€ " }
	f := streamFixture(t, chat)
	log := &textLog{chat: chat, seen: make(chan struct{}, 1)}
	cs := connectHTTP(t, serveHTTP(t, f).URL+"/mcp", &mcp.ClientOptions{ProgressNotificationHandler: log.handler})
	final := chat.Text()

	params := &mcp.CallToolParams{Name: "agent_writer", Arguments: map[string]any{"input": "write"}}
	params.SetProgressToken(42)
	start := time.Now()
	res, err := cs.CallTool(ctxT(t), params)
	elapsed := time.Since(start)
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	log.waitFor(t, func(m string) bool { return isText(m) && strings.HasSuffix(m, chat.Word(chat.Deltas-1)) })
	msgs, vals, _ := log.snapshot()
	// start + one per interval (+1 for the partial one) + the last text +
	// the heartbeats of DefaultProgressInterval.
	bound := 3 + int(elapsed/mcpserver.ProgressTextInterval) + int(elapsed/mcpserver.DefaultProgressInterval)
	if len(msgs) > bound {
		t.Errorf("%d notifications for %d deltas in %v, want at most %d", len(msgs), chat.Deltas, elapsed, bound)
	}
	var lastText string
	for i, m := range msgs {
		if !isText(m) {
			continue
		}
		lastText = m
		if len(m) > mcpserver.ProgressTextBytes || !utf8.ValidString(m) {
			t.Errorf("progress[%d]: %d bytes (bound %d), valid UTF-8 %v", i, len(m), mcpserver.ProgressTextBytes, utf8.ValidString(m))
		}
	}
	if !strings.HasSuffix(final, lastText) || len(lastText) < mcpserver.ProgressTextBytes-utf8.UTFMax {
		t.Errorf("last text: %d bytes, a suffix of the answer: %v; want the answer's last %d bytes", len(lastText), strings.HasSuffix(final, lastText), mcpserver.ProgressTextBytes)
	}
	for i := 1; i < len(vals); i++ {
		if vals[i] <= vals[i-1] {
			t.Fatalf("progress values %v do not increase", vals)
		}
	}
	t.Logf("%d deltas (%d bytes) in %v: %d notifications", chat.Deltas, len(final), elapsed, len(msgs))
}
