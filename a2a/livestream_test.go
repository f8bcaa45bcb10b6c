package a2a_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/a2a"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/builtin"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

// streamingFixture is newFixture plus agent "streamer", the provider of
// chat's wire (openai or anthropic) on chat, a real streaming server.
func streamingFixture(t testing.TB, chat *testutil.StreamingChat) *fixture {
	t.Helper()
	f := newFixture(t, a2a.Config{})
	model, err := builtin.New(chat.Wire, provider.Config{BaseURL: chat.URL, APIKey: "sk-test", Timeout: 2 * time.Minute})
	must(t, err)
	must(t, f.eng.AddAgent(agent.Spec{ID: "streamer", Model: "m1"}, model))
	return f
}

// wantUsage checks the usage metadata of a final task or status.
func wantUsage(t *testing.T, meta map[string]any, chat *testutil.StreamingChat) {
	t.Helper()
	u, ok := meta["usage"].(map[string]any)
	if !ok {
		t.Fatalf("no usage in metadata %v", meta)
	}
	want := map[string]float64{"input_tokens": float64(chat.Prompt), "output_tokens": float64(chat.Completion), "cached_input_tokens": float64(chat.Cached)}
	for k, v := range want {
		if u[k] != v {
			t.Fatalf("usage %v, want %v", u, want)
		}
	}
}

// The 0.3 message/stream sends the answer as the model writes it: the
// first artifact update reaches an a2a-go client before the model
// finished, the updates append to one artifact, the last one is marked,
// and the final status carries the usage; on the OpenAI wire and on the
// Anthropic wire.
func TestStreamDeltasV03(t *testing.T) {
	testutil.EachWire(t, testStreamDeltasV03)
}

func testStreamDeltasV03(t *testing.T, wire string) {
	chat := testutil.NewStreamingChatOn(t, wire, 200, 5*time.Millisecond)
	f := streamingFixture(t, chat)
	c, _ := f.a2aClient(t, f.srv.URL, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var kinds []string
	var text strings.Builder
	artifacts := 0
	var final *a2a03.TaskStatusUpdateEvent
	start := time.Now()
	var firstAt time.Duration
	for ev, err := range c.SendStreamingMessage(ctx, userMessage("go", map[string]any{"receiver_id": "streamer"})) {
		must(t, err)
		if firstAt == 0 && artifacts == 0 {
			if _, ok := ev.(*a2a03.TaskArtifactUpdateEvent); ok {
				firstAt = time.Since(start)
			}
		}
		switch e := ev.(type) {
		case *a2a03.Task:
			kinds = append(kinds, "task")
		case *a2a03.TaskStatusUpdateEvent:
			kinds = append(kinds, "status:"+string(e.Status.State))
			if e.Final {
				final = e
			}
		case *a2a03.TaskArtifactUpdateEvent:
			if artifacts == 0 && chat.Finished() != 0 {
				t.Error("the first artifact update reached the client after the model had written its whole answer")
			}
			if e.Append != (artifacts > 0) {
				t.Fatalf("artifact update %d: append %v", artifacts, e.Append)
			}
			if final != nil {
				t.Fatal("artifact update after the final status")
			}
			kinds = append(kinds, fmt.Sprintf("artifact:last=%v", e.LastChunk))
			artifacts++
			text.WriteString(e.Artifact.Parts[0].(a2a03.TextPart).Text)
		}
	}
	if text.String() != chat.Text() {
		t.Fatalf("assembled %d bytes, the model wrote %d", text.Len(), len(chat.Text()))
	}
	checkOrder(t, kinds, artifacts)
	if final == nil || final.Status.State != a2a03.TaskStateCompleted {
		t.Fatalf("final status %+v", final)
	}
	wantUsage(t, final.Metadata, chat)
	t.Logf("%s wire, %d deltas %s apart: first artifact update after %s, %d updates, stream over after %s",
		wire, chat.Deltas, chat.Gap, firstAt.Round(time.Millisecond), artifacts, time.Since(start).Round(time.Millisecond))
	if chat.Plain.Load() != 0 {
		t.Fatalf("%d plain model requests: the stream did not stream", chat.Plain.Load())
	}
}

// checkOrder: task, working, artifact updates of which only the last is
// marked lastChunk, then the final status (A2A 1.0 §3.5.2).
func checkOrder(t *testing.T, kinds []string, artifacts int) {
	t.Helper()
	if artifacts < 3 {
		t.Fatalf("%d artifact updates: the answer came whole (%v)", artifacts, kinds)
	}
	n := len(kinds)
	if n != artifacts+3 || kinds[0] != "task" || kinds[1] != "status:working" || kinds[n-1] != "status:completed" {
		t.Fatalf("event order %v", kinds)
	}
	for i, k := range kinds[2 : n-1] {
		if want := fmt.Sprintf("artifact:last=%v", i == artifacts-1); k != want {
			t.Fatalf("event %d is %s, want %s (%v)", i+2, k, want, kinds)
		}
	}
}

// The same over 1.0, both bindings, with an a2a-go/v2 client, on the
// OpenAI wire and on the Anthropic wire.
func TestStreamDeltasV1(t *testing.T) {
	for _, binding := range []a2a1.TransportProtocol{a2a1.TransportProtocolJSONRPC, a2a1.TransportProtocolHTTPJSON} {
		t.Run(string(binding), func(t *testing.T) {
			testutil.EachWire(t, func(t *testing.T, wire string) {
				chat := testutil.NewStreamingChatOn(t, wire, 200, 5*time.Millisecond)
				f := streamingFixture(t, chat)
				c, _, rec := f.v1Client(t, f.srv.URL, binding)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				var kinds []string
				var text strings.Builder
				artifacts := 0
				var final *a2a1.TaskStatusUpdateEvent
				var firstAt time.Duration
				start := time.Now()
				for ev, err := range c.SendStreamingMessage(ctx, v1Message("go", map[string]any{"receiver_id": "streamer"})) {
					must(t, err)
					if _, ok := ev.(*a2a1.TaskArtifactUpdateEvent); ok && artifacts == 0 {
						firstAt = time.Since(start)
					}
					switch e := ev.(type) {
					case *a2a1.Task:
						kinds = append(kinds, "task")
					case *a2a1.TaskStatusUpdateEvent:
						if e.Status.State == a2a1.TaskStateWorking {
							kinds = append(kinds, "status:working")
						} else {
							kinds = append(kinds, "status:"+strings.ToLower(strings.TrimPrefix(string(e.Status.State), "TASK_STATE_")))
							final = e
						}
					case *a2a1.TaskArtifactUpdateEvent:
						if artifacts == 0 && chat.Finished() != 0 {
							t.Error("the first artifact update reached the client after the model had written its whole answer")
						}
						if e.Append != (artifacts > 0) {
							t.Fatalf("artifact update %d: append %v", artifacts, e.Append)
						}
						kinds = append(kinds, fmt.Sprintf("artifact:last=%v", e.LastChunk))
						artifacts++
						text.WriteString(e.Artifact.Parts[0].Text())
					}
				}
				if text.String() != chat.Text() {
					t.Fatalf("assembled %d bytes, the model wrote %d", text.Len(), len(chat.Text()))
				}
				checkOrder(t, kinds, artifacts)
				if final == nil || final.Status.State != a2a1.TaskStateCompleted {
					t.Fatalf("final status %+v", final)
				}
				wantUsage(t, final.Metadata, chat)
				t.Logf("%s, %s wire, %d deltas %s apart: first artifact update after %s, %d updates",
					binding, wire, chat.Deltas, chat.Gap, firstAt.Round(time.Millisecond), artifacts)
				if want := map[a2a1.TransportProtocol]string{a2a1.TransportProtocolJSONRPC: "/a2a", a2a1.TransportProtocolHTTPJSON: "/a2a/message:stream"}[binding]; !strings.Contains(rec.seen(), want) {
					t.Fatalf("the client used %s, want %s", rec.seen(), want)
				}
			})
		})
	}
}

// A non-streaming send answers as before, with the usage in the task's
// metadata.
func TestSendCarriesUsage(t *testing.T) {
	chat := testutil.NewStreamingChat(t, 20, 0)
	f := streamingFixture(t, chat)
	c, _ := f.a2aClient(t, f.srv.URL, nil)
	task := sendTask(t, c, userMessage("go", map[string]any{"receiver_id": "streamer"}))
	if outputOf(t, task) != chat.Text() {
		t.Fatalf("output %q", outputOf(t, task))
	}
	wantUsage(t, task.Metadata, chat)
	v1c, _, _ := f.v1Client(t, f.srv.URL, a2a1.TransportProtocolJSONRPC)
	v1t := v1Send(t, v1c, v1Message("go", map[string]any{"receiver_id": "streamer"}))
	wantUsage(t, v1t.Metadata, chat)
}

// A client that stops reading a 10,000-delta stream does not hold the
// run: it completes (tasks/get says so, with the whole output) while the
// client reads nothing.
// Guards: the stream updates queued for a client that reads nothing (the run completes).
func TestStreamStuckClientRunCompletes(t *testing.T) {
	chat := testutil.NewStreamingChat(t, 10_000, 0)
	chat.Word = func(i int) string { return fmt.Sprintf("%-9d|", i) } // 100 kB an answer
	f := streamingFixture(t, chat)
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := d.Dial("tcp", f.srv.Listener.Addr().String())
	must(t, err)
	defer conn.Close()
	body := `{"jsonrpc":"2.0","id":1,"method":"message/stream","params":{"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"go"}],"metadata":{"receiver_id":"streamer"}}}}`
	fmt.Fprintf(conn, "POST /a2a HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", f.srv.Listener.Addr(), len(body), body)
	// The run's task is the only one listed; wait for it to complete.
	c, _ := f.a2aClient(t, f.srv.URL, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		list, err := c.ListTasks(ctx, &a2a03.ListTasksRequest{})
		must(t, err)
		if len(list.Tasks) == 1 && list.Tasks[0].Status.State.Terminal() {
			got, err := c.GetTask(ctx, &a2a03.TaskQueryParams{ID: list.Tasks[0].ID})
			must(t, err)
			if got.Status.State != a2a03.TaskStateCompleted || outputOf(t, got) != chat.Text() {
				t.Fatalf("task %s, %d bytes of output", got.Status.State, len(outputOf(t, got)))
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the run did not complete while its stream's client read nothing")
		case <-time.After(20 * time.Millisecond): // polling tasks/list: the state to wait for
		}
	}
}

// tasks/resubscribe on a running task follows its run from where it
// joins: artifact updates before the model finished, then the output
// afresh (append false: the client had only the part after it joined),
// the last chunk marked, and the final status with the usage.
func TestResubscribeFollowsRun(t *testing.T) {
	chat := testutil.NewStreamingChat(t, 400, 5*time.Millisecond)
	f := streamingFixture(t, chat)
	c, _ := f.a2aClient(t, f.srv.URL, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ids := make(chan a2a03.TaskID, 1)
	streamed := make(chan error, 1)
	go func() {
		var first error
		sent := false
		for ev, err := range c.SendStreamingMessage(ctx, userMessage("go", map[string]any{"receiver_id": "streamer"})) {
			if err != nil {
				first = err
				break
			}
			if a, ok := ev.(*a2a03.TaskArtifactUpdateEvent); ok && !sent {
				ids <- a.TaskID
				sent = true
			}
		}
		streamed <- first
	}()
	var id a2a03.TaskID
	select {
	case id = <-ids:
	case err := <-streamed:
		t.Fatalf("the stream ended before its first artifact update: %v", err)
	}
	var text strings.Builder
	live, lastChunks := 0, 0
	var final *a2a03.TaskStatusUpdateEvent
	for ev, err := range c.ResubscribeToTask(ctx, &a2a03.TaskIDParams{ID: id}) {
		must(t, err)
		switch e := ev.(type) {
		case *a2a03.TaskArtifactUpdateEvent:
			if chat.Finished() == 0 {
				live++
			}
			if !e.Append {
				text.Reset()
			}
			if e.LastChunk {
				lastChunks++
			}
			text.WriteString(e.Artifact.Parts[0].(a2a03.TextPart).Text)
		case *a2a03.TaskStatusUpdateEvent:
			if e.Final {
				final = e
			}
		}
	}
	if live == 0 {
		t.Fatal("no artifact update reached the resubscribed client while the model was writing")
	}
	if text.String() != chat.Text() || lastChunks != 1 {
		t.Fatalf("assembled %d of %d bytes, %d last chunks", text.Len(), len(chat.Text()), lastChunks)
	}
	if final == nil || final.Status.State != a2a03.TaskStateCompleted {
		t.Fatalf("final status %+v", final)
	}
	wantUsage(t, final.Metadata, chat)
	must(t, <-streamed)
}

// toolStreamModel streams a sentence, calls tool lookup, then streams its
// answer with the tool's result: a run of two model calls.
type toolStreamModel struct{}

func (m toolStreamModel) Generate(ctx context.Context, req *agent.Request) (*agent.Response, error) {
	return m.GenerateStream(ctx, req, func(agent.Delta) {})
}

func (toolStreamModel) GenerateStream(_ context.Context, req *agent.Request, emit func(agent.Delta)) (*agent.Response, error) {
	if last := req.Messages[len(req.Messages)-1]; last.Role == agent.RoleTool {
		text := "answer: " + last.Content
		emit(agent.Delta{Kind: agent.DeltaText, Text: "answer: "})
		emit(agent.Delta{Kind: agent.DeltaText, Text: last.Content})
		return &agent.Response{Content: text, Usage: agent.Usage{InputTokens: 5, OutputTokens: 2}}, nil
	}
	emit(agent.Delta{Kind: agent.DeltaText, Text: "let me look"})
	return &agent.Response{Content: "let me look", Usage: agent.Usage{InputTokens: 3, OutputTokens: 1, CachedInputTokens: 1},
		ToolCalls: []agent.ToolCall{{ID: "c1", Name: "lookup", Arguments: json.RawMessage(`{"q":"go"}`)}}}, nil
}

// Around a tool call the stream says so: the first call's text, a working
// status naming the tool, then the answer starting the artifact over, the
// last chunk marked, and the usage of both calls summed.
func TestStreamToolStatus(t *testing.T) {
	f := newFixture(t, a2a.Config{})
	must(t, f.eng.RegisterTool(axocoatl.Tool{Name: "lookup", Description: "Looks q up.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`),
		Call: func(context.Context, axocoatl.ToolCall) (axocoatl.ToolResult, error) {
			return axocoatl.ToolResult{Content: "found"}, nil
		}}))
	must(t, f.eng.AddAgent(agent.Spec{ID: "tooler", Tools: []string{"lookup"}}, toolStreamModel{}))
	c, _ := f.a2aClient(t, f.srv.URL, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var got []string
	var final *a2a03.TaskStatusUpdateEvent
	for ev, err := range c.SendStreamingMessage(ctx, userMessage("go", map[string]any{"receiver_id": "tooler"})) {
		must(t, err)
		switch e := ev.(type) {
		case *a2a03.Task:
			got = append(got, "task")
		case *a2a03.TaskStatusUpdateEvent:
			s := "status:" + string(e.Status.State)
			if e.Status.Message != nil {
				s += ":" + e.Status.Message.Parts[0].(a2a03.TextPart).Text
			}
			got = append(got, s)
			if e.Final {
				final = e
			}
		case *a2a03.TaskArtifactUpdateEvent:
			got = append(got, fmt.Sprintf("artifact:%q:append=%v:last=%v", e.Artifact.Parts[0].(a2a03.TextPart).Text, e.Append, e.LastChunk))
		}
	}
	want := []string{"task", "status:working", `artifact:"let me look":append=false:last=false`, "status:working:calling tool lookup",
		`artifact:"answer: found":append=false:last=true`, "status:completed"}
	// The answer's text goes out as it comes: when it went before the run
	// ended, an empty chunk closes the artifact.
	closed := slices.Clone(want)
	closed[4] = `artifact:"answer: found":append=false:last=false`
	closed = slices.Insert(closed, 5, `artifact:"":append=true:last=true`)
	if strings.Join(got, "\n") != strings.Join(want, "\n") && strings.Join(got, "\n") != strings.Join(closed, "\n") {
		t.Fatalf("events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	u := final.Metadata["usage"].(map[string]any)
	if u["input_tokens"] != 8.0 || u["output_tokens"] != 3.0 || u["cached_input_tokens"] != 1.0 {
		t.Fatalf("usage %v", u)
	}
}

// The same with 1.0 SubscribeToTask, an a2a-go/v2 client on both bindings.
func TestSubscribeToTaskFollowsRunV1(t *testing.T) {
	for _, binding := range []a2a1.TransportProtocol{a2a1.TransportProtocolJSONRPC, a2a1.TransportProtocolHTTPJSON} {
		t.Run(string(binding), func(t *testing.T) {
			chat := testutil.NewStreamingChat(t, 400, 5*time.Millisecond)
			f := streamingFixture(t, chat)
			c, _, _ := f.v1Client(t, f.srv.URL, binding)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			ids := make(chan a2a1.TaskID, 1)
			streamed := make(chan error, 1)
			go func() {
				var first error
				sent := false
				for ev, err := range c.SendStreamingMessage(ctx, v1Message("go", map[string]any{"receiver_id": "streamer"})) {
					if err != nil {
						first = err
						break
					}
					if a, ok := ev.(*a2a1.TaskArtifactUpdateEvent); ok && !sent {
						ids <- a.TaskID
						sent = true
					}
				}
				streamed <- first
			}()
			var id a2a1.TaskID
			select {
			case id = <-ids:
			case err := <-streamed:
				t.Fatalf("the stream ended before its first artifact update: %v", err)
			}
			var text strings.Builder
			live, lastChunks := 0, 0
			var final *a2a1.TaskStatusUpdateEvent
			for ev, err := range c.SubscribeToTask(ctx, &a2a1.SubscribeToTaskRequest{ID: id}) {
				must(t, err)
				switch e := ev.(type) {
				case *a2a1.TaskArtifactUpdateEvent:
					if chat.Finished() == 0 {
						live++
					}
					if !e.Append {
						text.Reset()
					}
					if e.LastChunk {
						lastChunks++
					}
					text.WriteString(e.Artifact.Parts[0].Text())
				case *a2a1.TaskStatusUpdateEvent:
					if e.Status.State.Terminal() {
						final = e
					}
				}
			}
			if live == 0 {
				t.Fatal("no artifact update reached the subscribed client while the model was writing")
			}
			if text.String() != chat.Text() || lastChunks != 1 {
				t.Fatalf("assembled %d of %d bytes, %d last chunks", text.Len(), len(chat.Text()), lastChunks)
			}
			if final == nil || final.Status.State != a2a1.TaskStateCompleted {
				t.Fatalf("final status %+v", final)
			}
			wantUsage(t, final.Metadata, chat)
			must(t, <-streamed)
		})
	}
}
