package a2a_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
	v1client "github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/axocoatl/axocoatl-go/a2a"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/internal/jsonio"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

// modelFirstDelta is the time from a streamed chat request sent straight
// to chat to its first content chunk (the model's own first delta).
func modelFirstDelta(b *testing.B, client *http.Client, chat *testutil.StreamingChat) time.Duration {
	d, err := testutil.ModelFirstDelta(client, chat.URL)
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// streamDoor is one client of a streamed send: it sends "go" to agent
// streamer and returns when its first artifact update came and the text
// the updates assembled.
type streamDoor struct {
	name string
	open func(b *testing.B, f *fixture) func(ctx context.Context) (first time.Duration, text string, err error)
}

func streamDoors() []streamDoor {
	v1 := func(binding a2a1.TransportProtocol) func(*testing.B, *fixture) func(context.Context) (time.Duration, string, error) {
		return func(b *testing.B, f *fixture) func(context.Context) (time.Duration, string, error) {
			c, _, _ := f.v1Client(b, f.srv.URL, binding)
			return func(ctx context.Context) (time.Duration, string, error) {
				start := time.Now()
				var first time.Duration
				var text strings.Builder
				for ev, err := range c.SendStreamingMessage(ctx, v1Message("go", map[string]any{"receiver_id": "streamer"})) {
					if err != nil {
						return 0, "", err
					}
					if a, ok := ev.(*a2a1.TaskArtifactUpdateEvent); ok {
						if first == 0 {
							first = time.Since(start)
						}
						if !a.Append {
							text.Reset()
						}
						text.WriteString(a.Artifact.Parts[0].Text())
					}
				}
				return first, text.String(), nil
			}
		}
	}
	return []streamDoor{
		{"a2a-1.0-jsonrpc", v1(a2a1.TransportProtocolJSONRPC)},
		{"a2a-1.0-httpjson", v1(a2a1.TransportProtocolHTTPJSON)},
		{"a2a-0.3", func(b *testing.B, f *fixture) func(context.Context) (time.Duration, string, error) {
			c, _ := f.a2aClient(b, f.srv.URL, nil)
			return func(ctx context.Context) (time.Duration, string, error) {
				start := time.Now()
				var first time.Duration
				var text strings.Builder
				for ev, err := range c.SendStreamingMessage(ctx, userMessage("go", map[string]any{"receiver_id": "streamer"})) {
					if err != nil {
						return 0, "", err
					}
					if a, ok := ev.(*a2a03.TaskArtifactUpdateEvent); ok {
						if first == 0 {
							first = time.Since(start)
						}
						if !a.Append {
							text.Reset()
						}
						text.WriteString(a.Artifact.Parts[0].(a2a03.TextPart).Text)
					}
				}
				return first, text.String(), nil
			}
		}},
	}
}

// BenchmarkStreamFirstDelta compares the time to the first delta through
// each A2A door (a2a-go/v2's stream over JSON-RPC and HTTP+JSON, a2a-go
// v0.3's message/stream: the task, the Engine, the openai provider
// streaming from an httptest OpenAI-wire server, the run's fan-out, the
// stream's writer, to the client's first artifact update) with the
// model's own (the same streamed chat request straight to the model
// server, to its first content chunk), alternating the two over
// loopback; it fails when a door's median is more than 2 ms above the
// model's (issue #26's bar).
func BenchmarkStreamFirstDelta(b *testing.B) {
	for _, door := range streamDoors() {
		b.Run("door="+door.name, func(b *testing.B) {
			chat := testutil.NewStreamingChat(b, 20, 0)
			f := streamingFixture(b, chat)
			send := door.open(b, f)
			ctx := context.Background()
			viaDoor := func() time.Duration {
				first, text, err := send(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if text != chat.Text() {
					b.Fatalf("assembled %q, the model wrote %q", text, chat.Text())
				}
				return first
			}
			testutil.FirstDelta(b, "the door's first delta", viaDoor, func() time.Duration { return modelFirstDelta(b, f.client, chat) }, 2*time.Millisecond)
		})
	}
}

// relay is the bare SSE relay of BenchmarkStreamThroughput: it asks the
// model server for its streamed answer and writes each delta, as it
// comes, as one A2A 1.0 JSON-RPC artifact update (the task first, the
// completed status last) and flushes it; nothing else (no task store, no
// Engine, no coalescing).
func relay(chat *testutil.StreamingChat, client *http.Client) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mreq, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, chat.URL+"/chat/completions", strings.NewReader(`{"model":"m1","stream":true,"messages":[{"role":"user","content":"go"}]}`))
		mreq.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(mreq)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		event := func(ev any) []byte {
			res, _ := json.Marshal(ev)
			return fmt.Appendf(nil, `data: {"jsonrpc":"2.0","id":%s,"result":%s}`+"\n\n", req.ID, res)
		}
		now := time.Now()
		_, _ = w.Write(event(a2a1.StreamResponse{Event: &a2a1.Task{ID: "relay", ContextID: "ctx",
			Status: a2a1.TaskStatus{State: a2a1.TaskStateSubmitted, Timestamp: &now}}}))
		_ = rc.Flush()
		// Each delta: the artifact update around its text, encoded once.
		tmpl := event(a2a1.StreamResponse{Event: &a2a1.TaskArtifactUpdateEvent{TaskID: "relay", ContextID: "ctx", Append: true,
			Artifact: &a2a1.Artifact{ID: "output", Name: "output", Parts: a2a1.ContentParts{a2a1.NewTextPart("\x00")}}}})
		i := bytes.Index(tmpl, []byte(`"\u0000"`))
		pre, post := tmpl[:i:i], tmpl[i+len(`"\u0000"`):]
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		buf := make([]byte, 0, 512)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
			if !ok || bytes.Equal(data, []byte("[DONE]")) {
				continue
			}
			chunk.Choices = nil // json keeps an absent field's old value
			if json.Unmarshal(data, &chunk) != nil || len(chunk.Choices) == 0 || chunk.Choices[0].Delta.Content == "" {
				continue
			}
			buf = append(jsonio.AppendString(append(buf[:0], pre...), chunk.Choices[0].Delta.Content), post...)
			if _, err := w.Write(buf); err != nil || rc.Flush() != nil {
				return
			}
		}
		_, _ = w.Write(event(a2a1.StreamResponse{Event: &a2a1.TaskStatusUpdateEvent{TaskID: "relay", ContextID: "ctx",
			Status: a2a1.TaskStatus{State: a2a1.TaskStateCompleted, Timestamp: &now}}}))
		_ = rc.Flush()
	}
}

// BenchmarkStreamThroughput streams a 10,000-delta answer (the model
// server writing as fast as it can) through A2A 1.0 SendStreamingMessage
// over JSON-RPC, read by an a2a-go/v2 client to its end, and, alternately
// in the same run, the same deltas through the bare SSE relay above, read
// by the same client; it reports both throughputs (deltas/s, medians) and
// their ratio, and fails below 0.8 (issue #26's bar).
func BenchmarkStreamThroughput(b *testing.B) {
	const deltas = 10_000
	chat := testutil.NewStreamingChat(b, deltas, 0)
	f := streamingFixture(b, chat)
	door := streamDoors()[0].open(b, f)
	rsrv := httptest.NewServer(relay(chat, f.client))
	b.Cleanup(rsrv.Close)
	rc, err := v1client.NewFromEndpoints(context.Background(),
		[]*a2a1.AgentInterface{a2a1.NewAgentInterface(rsrv.URL, a2a1.TransportProtocolJSONRPC)}, v1client.WithJSONRPCTransport(f.client))
	must(b, err)
	b.Cleanup(func() { _ = rc.Destroy() })
	ctx := context.Background()
	want := chat.Text()
	viaDoor := func() time.Duration {
		start := time.Now()
		_, text, err := door(ctx)
		took := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if text != want {
			b.Fatalf("the door assembled %d bytes, the model wrote %d", len(text), len(want))
		}
		return took
	}
	viaRelay := func() time.Duration {
		start := time.Now()
		var text strings.Builder
		for ev, err := range rc.SendStreamingMessage(ctx, v1Message("go", nil)) {
			if err != nil {
				b.Fatal(err)
			}
			if a, ok := ev.(*a2a1.TaskArtifactUpdateEvent); ok {
				text.WriteString(a.Artifact.Parts[0].Text())
			}
		}
		took := time.Since(start)
		if text.String() != want {
			b.Fatalf("the relay assembled %d bytes, the model wrote %d", text.Len(), len(want))
		}
		return took
	}
	doorTimes, relayTimes := testutil.PairedTimes(b, viaDoor, viaRelay)
	n := len(doorTimes)
	d, r := testutil.Median(doorTimes), testutil.Median(relayTimes)
	ratio := r.Seconds() / d.Seconds() // throughput door ÷ relay
	b.ReportMetric(deltas/d.Seconds(), "door-deltas/s")
	b.ReportMetric(deltas/r.Seconds(), "relay-deltas/s")
	b.ReportMetric(ratio, "door÷relay")
	if n >= 5 && ratio < 0.8 {
		b.Fatalf("the door streamed %d deltas in %s, the relay in %s (medians of %d): %.2f× the relay's throughput, the bar is 0.8×", deltas, d, r, n, ratio)
	}
}

// lockstepModel streams n deltas "tok "; with ack set it waits, after
// each, until the client read an artifact update (so that every delta
// is an event of its own: the door's worst case, nothing coalesced).
type lockstepModel struct {
	n    int
	ack  chan struct{}
	text string
}

func (m *lockstepModel) Generate(context.Context, *agent.Request) (*agent.Response, error) {
	return &agent.Response{Content: m.text}, nil
}

func (m *lockstepModel) GenerateStream(ctx context.Context, _ *agent.Request, emit func(agent.Delta)) (*agent.Response, error) {
	for range m.n {
		emit(agent.Delta{Kind: agent.DeltaText, Text: "tok "})
		if m.ack != nil {
			select {
			case <-m.ack:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	return &agent.Response{Content: m.text}, nil
}

// BenchmarkStreamAllocsPerDelta counts the allocations per delta of a
// 10,000-delta answer from the model's emit through the Engine's fan-out,
// the door's writer and its encoding, to the client's socket, end to end
// per door (the model in process; the client reads the raw stream, so
// that its own decoding is not counted). flood: the model writes as fast
// as it can (the writer coalesces what comes while it writes); lockstep:
// the model waits for the client to read each delta's update, so every
// delta is an event of its own. It fails past 4 allocations per delta
// (issue #26's bar).
func BenchmarkStreamAllocsPerDelta(b *testing.B) {
	const perRun = 10_000
	doors := []struct{ name, path, body, version string }{
		{"a2a-1.0-jsonrpc", "/a2a", `{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"go"}],"metadata":{"receiver_id":"flood"}}}}`, "1.0"},
		{"a2a-1.0-httpjson", "/a2a/message:stream", `{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"go"}],"metadata":{"receiver_id":"flood"}}}`, "1.0"},
		{"a2a-0.3", "/a2a", `{"jsonrpc":"2.0","id":1,"method":"message/stream","params":{"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"go"}],"metadata":{"receiver_id":"flood"}}}}`, ""},
	}
	for _, door := range doors {
		for _, mode := range []string{"flood", "lockstep"} {
			b.Run("door="+door.name+"/mode="+mode, func(b *testing.B) {
				f := newFixture(b, a2a.Config{})
				m := &lockstepModel{n: perRun, text: strings.Repeat("tok ", perRun)}
				if mode == "lockstep" {
					m.ack = make(chan struct{}, 1)
				}
				must(b, f.eng.AddAgent(agent.Spec{ID: "flood"}, m))
				rd := bufio.NewReaderSize(nil, 64<<10)
				events := 0
				run := func() {
					req, _ := http.NewRequest(http.MethodPost, f.srv.URL+door.path, strings.NewReader(door.body))
					req.Header.Set("Content-Type", "application/json")
					if door.version != "" {
						req.Header.Set("A2A-Version", door.version)
					}
					resp, err := f.client.Do(req)
					if err != nil {
						b.Fatal(err)
					}
					defer resp.Body.Close()
					rd.Reset(resp.Body)
					completed := false
					for {
						line, err := rd.ReadSlice('\n')
						if err == io.EOF {
							break
						}
						if err != nil {
							b.Fatal(err)
						}
						switch {
						case bytes.Contains(line, []byte(`"artifactUpdate"`)) || bytes.Contains(line, []byte(`"artifact-update"`)):
							events++
							if m.ack != nil {
								select {
								case m.ack <- struct{}{}:
								default:
								}
							}
						case bytes.Contains(line, []byte(`TASK_STATE_COMPLETED`)) || bytes.Contains(line, []byte(`"state":"completed"`)):
							completed = true
						}
					}
					if !completed {
						b.Fatal("the stream ended without the completed status")
					}
					if m.ack != nil {
						select { // the closing chunk's ack
						case <-m.ack:
						default:
						}
					}
				}
				run() // the connection and the templates warm
				events = 0
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				b.ResetTimer()
				for b.Loop() {
					run()
				}
				b.StopTimer()
				runtime.ReadMemStats(&after)
				deltas := float64(b.N) * perRun
				allocs := float64(after.Mallocs-before.Mallocs) / deltas
				b.ReportMetric(allocs, "allocs/delta")
				b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/deltas, "B/delta")
				b.ReportMetric(float64(events)/deltas, "events/delta")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/deltas, "ns/delta")
				if mode == "lockstep" && float64(events) < deltas {
					b.Fatalf("%d artifact updates for %.0f deltas in lockstep", events, deltas)
				}
				if allocs > 4 {
					b.Fatalf("%.2f allocations per delta, the bar is 4", allocs)
				}
			})
		}
	}
}
