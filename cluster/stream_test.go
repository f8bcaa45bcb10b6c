package cluster_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	natsgo "github.com/nats-io/nats.go"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/builtin"
	"github.com/axocoatl/axocoatl-go/agent/provider/openai"
	"github.com/axocoatl/axocoatl-go/cluster"
	"github.com/axocoatl/axocoatl-go/httpapi"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
)

// manyDeltas is the length of the tests' long answers: the race detector
// makes each delta ~10 times slower.
func manyDeltas() int {
	if testutil.RaceEnabled {
		return 2_000
	}
	return 10_000
}

// streamingPair is daemon A (no agents) and daemon B hosting "streamer",
// the provider of chat's wire (openai or anthropic) streaming from chat,
// on one embedded nats-server.
func streamingPair(t *testing.T, chat *testutil.StreamingChat) (a, b *node, url string) {
	t.Helper()
	ns := startNATS(t, -1)
	model, err := builtin.New(chat.Wire, provider.Config{BaseURL: chat.URL, APIKey: "sk-test", Timeout: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	b = newNode(t, ns.ClientURL(), "node-b", patient, map[string]agent.Model{"streamer": model})
	a = newNode(t, ns.ClientURL(), "node-a", patient, nil)
	eventually(t, "A lists streamer on B", 10*time.Second, func() bool { return lists(a.e, "streamer", "node-b") })
	return a, b, ns.ClientURL()
}

// recorder collects what a Request.OnEvent is told.
type recorder struct {
	mu        sync.Mutex
	text      strings.Builder
	deltas    int
	usage     agent.Usage
	firstAt   time.Duration
	lateFirst bool // the first delta came after the model had finished
}

// The acceptance of issue 26 for the cluster: a caller on A of an agent
// that lives only on B gets the deltas as B's model writes them (the first
// before the model has finished), the assembled text is the model's, the
// usage arrives in an event and in the Result, and a FollowRun on A joins
// the remote run. On the OpenAI wire and on the Anthropic wire.
func TestDeltasAcrossDaemons(t *testing.T) {
	testutil.EachWire(t, testDeltasAcrossDaemons)
}

func testDeltasAcrossDaemons(t *testing.T, wire string) {
	chat := testutil.NewStreamingChatOn(t, wire, 200, 5*time.Millisecond)
	a, _, _ := streamingPair(t, chat)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var rec recorder
	start := time.Now()
	followed := make(chan string, 1)
	var once sync.Once
	res, err := a.e.ExecuteRequest(ctx, axocoatl.Request{AgentID: "streamer", Input: "go", TaskID: "t-stream", OnEvent: func(ev agent.RunEvent) {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		switch ev.Kind {
		case agent.RunDelta:
			if ev.Delta.Kind != agent.DeltaText {
				t.Errorf("delta of kind %d", ev.Delta.Kind)
			}
			if rec.deltas == 0 {
				rec.firstAt = time.Since(start)
				rec.lateFirst = chat.Finished() != 0
			}
			rec.deltas++
			rec.text.WriteString(ev.Delta.Text)
		case agent.RunModelUsage:
			rec.usage = rec.usage.Add(ev.Usage)
		}
		once.Do(func() {
			// Another listener on A joins the remote run while it goes.
			sub, err := a.e.FollowRun(context.Background(), "t-stream")
			if err != nil {
				t.Errorf("FollowRun on the caller's daemon: %v", err)
				followed <- ""
				return
			}
			go func() {
				defer sub.Close()
				var b strings.Builder
				for {
					ev, err := sub.Next(ctx)
					if err != nil {
						if !errors.Is(err, io.EOF) {
							t.Errorf("FollowRun: %v", err)
						}
						followed <- b.String()
						return
					}
					b.WriteString(ev.Delta.Text)
				}
			}()
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.lateFirst {
		t.Error("the first delta reached the caller after the model had written its whole answer")
	}
	if rec.text.String() != chat.Text() || res.Output != chat.Text() {
		t.Fatalf("assembled %d bytes, output %d bytes, the model wrote %d", rec.text.Len(), len(res.Output), len(chat.Text()))
	}
	want := agent.Usage{InputTokens: chat.Prompt, OutputTokens: chat.Completion, CachedInputTokens: chat.Cached}
	if rec.usage != want || res.Usage != want {
		t.Fatalf("usage: events %+v, result %+v, want %+v", rec.usage, res.Usage, want)
	}
	if chat.Plain.Load() != 0 {
		t.Fatalf("%d plain model requests: B did not stream", chat.Plain.Load())
	}
	if got := <-followed; got == "" || !strings.HasSuffix(chat.Text(), got) {
		t.Fatalf("FollowRun on A got %q, not the end of the answer", got)
	}
	t.Logf("%s wire, %d deltas %s apart: the first on A after %s, %d OnEvent deltas, run over after %s",
		wire, chat.Deltas, chat.Gap, rec.firstAt.Round(time.Millisecond), rec.deltas, time.Since(start).Round(time.Millisecond))
}

// A run whose caller does not listen is not streamed: B asks its model
// for a plain answer, as before events, and no event frame is sent.
func TestRemoteRunNobodyListensIsNotStreamed(t *testing.T) {
	chat := testutil.NewStreamingChat(t, 20, 0)
	a, _, url := streamingPair(t, chat)
	frames := watchFrames(t, url)
	res, err := a.e.Execute(context.Background(), "streamer", "go")
	if err != nil || res.Output != chat.Text() {
		t.Fatalf("%+v, %v", res, err)
	}
	if chat.Plain.Load() != 1 {
		t.Fatalf("%d plain model requests, want 1", chat.Plain.Load())
	}
	if n := frames.count.Load(); n != 0 {
		t.Fatalf("%d event frames for a caller that does not listen", n)
	}
}

// frameWatch counts the event frames any daemon sends, as a NATS client
// on every inbox sees them.
type frameWatch struct {
	count    atomic.Int64
	maxBytes atomic.Int64
	bad      atomic.Int64
}

func watchFrames(t *testing.T, url string) *frameWatch {
	t.Helper()
	nc, err := natsgo.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	w := &frameWatch{}
	if _, err := nc.Subscribe("_INBOX.>", func(msg *natsgo.Msg) {
		if len(msg.Data) == 0 || msg.Data[0] != 'E' {
			return
		}
		w.count.Add(1)
		if n := int64(len(msg.Data)); n > w.maxBytes.Load() {
			w.maxBytes.Store(n)
		}
		if _, _, ok := cluster.EventFrame(msg.Data); !ok {
			w.bad.Add(1)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return w
}

// wholeAnswer is a model that does not stream: its answer reaches a
// listener as one delta, of size bytes (multi-byte runes).
type wholeAnswer struct{ text string }

func (m wholeAnswer) Generate(context.Context, *agent.Request) (*agent.Response, error) {
	return &agent.Response{Content: m.text}, nil
}

// Guards: bound "one event frame of a remote run" (16 KiB, docs/bounds.md,
// lattice and cluster). A 300 kB delta (one answer of a model that does
// not stream, multi-byte runes) reaches the caller on A cut across frames
// of at most 16 KiB each, on rune boundaries, and assembles into the
// answer.
func TestEventFrameBytesBounded(t *testing.T) {
	ns := startNATS(t, -1)
	text := strings.Repeat("añ€😀", 30_000) // 10 bytes, 4 runes: 300 kB
	newNode(t, ns.ClientURL(), "node-b", patient, map[string]agent.Model{"whole": wholeAnswer{text}})
	a := newNode(t, ns.ClientURL(), "node-a", patient, nil)
	eventually(t, "A lists whole on B", 10*time.Second, func() bool { return lists(a.e, "whole", "node-b") })
	frames := watchFrames(t, ns.ClientURL())
	var mu sync.Mutex
	var got strings.Builder
	pieces := 0
	badRune := false
	res, err := a.e.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "whole", Input: "go", OnEvent: func(ev agent.RunEvent) {
		mu.Lock()
		defer mu.Unlock()
		if ev.Kind == agent.RunDelta {
			pieces++
			if !utf8.ValidString(ev.Delta.Text) {
				badRune = true
			}
			got.WriteString(ev.Delta.Text)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got.String() != text || res.Output != text {
		t.Fatalf("assembled %d bytes, output %d, the model wrote %d", got.Len(), len(res.Output), len(text))
	}
	if badRune {
		t.Fatal("a delta was cut inside a rune")
	}
	if n, limit := frames.maxBytes.Load(), int64(16<<10); n > limit || n < limit/2 || cluster.MaxFrameBytes != limit {
		t.Fatalf("the largest event frame is %d bytes, want at most %d (and full ones)", n, limit)
	}
	if frames.count.Load() < int64(len(text)/cluster.MaxFrameBytes) || frames.bad.Load() != 0 {
		t.Fatalf("%d frames (%d malformed) for %d bytes", frames.count.Load(), frames.bad.Load(), len(text))
	}
	t.Logf("%d bytes in %d frames (largest %d bytes), %d deltas on A", len(text), frames.count.Load(), frames.maxBytes.Load(), pieces)
}

// Guards: bound "event frames of a remote run" (one at once, then one
// per 1 ms, docs/bounds.md, lattice and cluster). A fast model's 10,000
// deltas go to the caller batched: far fewer frames than deltas, and the
// caller still assembles the whole answer.
func TestEventFramesCoalesced(t *testing.T) {
	chat := testutil.NewStreamingChat(t, manyDeltas(), 0)
	a, _, url := streamingPair(t, chat)
	frames := watchFrames(t, url)
	var mu sync.Mutex
	var got strings.Builder
	start := time.Now()
	res, err := a.e.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "streamer", Input: "go", OnEvent: func(ev agent.RunEvent) {
		mu.Lock()
		defer mu.Unlock()
		got.WriteString(ev.Delta.Text)
	}})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got.String() != chat.Text() || res.Output != chat.Text() {
		t.Fatalf("assembled %d bytes, output %d, the model wrote %d", got.Len(), len(res.Output), len(chat.Text()))
	}
	n := frames.count.Load()
	// One frame per millisecond the run lasted, plus the full ones, plus
	// one: at most.
	if limit := took.Milliseconds() + int64(len(chat.Text())/cluster.MaxFrameBytes) + 2; n > limit || n > int64(chat.Deltas)/4 {
		t.Fatalf("%d event frames for %d deltas in %s: not coalesced (limit %d)", n, chat.Deltas, took, min(limit, int64(chat.Deltas)/4))
	}
	t.Logf("%d deltas in %d frames, %s", chat.Deltas, n, took.Round(time.Millisecond))
}

// Guards: bound "a caller of a remote run that stops reading" (its
// listener queue on the caller's daemon, docs/bounds.md, lattice and
// cluster). The caller's OnEvent on A blocks from the first event on: B's
// run still runs to its end (B publishes TaskCompleted while A's caller is
// stuck), another remote run of A's completes meanwhile (the stuck caller
// holds up no goroutine of A's cluster module), and once the caller reads
// again A's run ends with the answer.
func TestStuckCallerDoesNotBlockRemoteRun(t *testing.T) {
	chat := testutil.NewStreamingChat(t, manyDeltas(), 0)
	a, b, _ := streamingPair(t, chat)
	release := make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	defer free() // a failing test must not leave A's run stuck
	var calls atomic.Int64
	done := make(chan struct{})
	var res axocoatl.Result
	var err error
	go func() {
		defer close(done)
		res, err = a.e.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "streamer", Input: "go", OnEvent: func(agent.RunEvent) {
			if calls.Add(1) == 1 {
				<-release
			}
		}})
	}()
	select {
	case ev := <-b.local.Events():
		if ev.Type != axocoatl.EventTaskCompleted {
			t.Fatalf("B's run: %s", ev.Type)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("B's run did not end while A's caller was stuck")
	}
	if calls.Load() != 1 {
		t.Fatalf("%d OnEvent calls while the first was blocked", calls.Load())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if other, err := a.e.Execute(ctx, "streamer", "again"); err != nil || other.Output != chat.Text() {
		t.Fatalf("another remote run while a caller is stuck: %d bytes, %v", len(other.Output), err)
	}
	select {
	case <-done:
		t.Fatal("A's run ended before its caller read")
	default:
	}
	free()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("A's run did not end once its caller read again")
	}
	if err != nil || res.Output != chat.Text() {
		t.Fatalf("%d bytes, %v", len(res.Output), err)
	}
	if chat.Plain.Load() != 1 {
		t.Fatalf("%d plain model requests, want 1 (the run nobody listened to)", chat.Plain.Load())
	}
	t.Logf("%d OnEvent calls for %d deltas (coalesced on A)", calls.Load(), chat.Deltas)
}

// A daemon of a version before events answers a task that asks for them
// as malformed; the caller sends it again as that daemon reads it, and the
// run (not streamed) succeeds. Both older versions: before conversations
// (0x01 frames only) and after (0x02 without the events flag).
func TestEventsToOlderDaemon(t *testing.T) {
	for _, tc := range []struct {
		name   string
		accept func(b []byte) bool
	}{
		{"before conversations", func(b []byte) bool { return b[0] == 0x01 }},
		{"before events", func(b []byte) bool {
			events, ok := cluster.TaskWantsEvents(b)
			return ok && !events
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := startNATS(t, -1)
			a := newNode(t, ns.ClientURL(), "node-a", patient, nil)
			old, err := natsgo.Connect(ns.ClientURL())
			if err != nil {
				t.Fatal(err)
			}
			defer old.Close()
			var seen []string
			var mu sync.Mutex
			sub, err := old.Subscribe("ct-cluster.exec.far", func(msg *natsgo.Msg) {
				events, _ := cluster.TaskWantsEvents(msg.Data)
				mu.Lock()
				seen = append(seen, fmt.Sprintf("%#x events=%v", msg.Data[0], events))
				mu.Unlock()
				if !tc.accept(msg.Data) {
					_ = msg.Respond(cluster.DoneBody("failed", "cluster: malformed task request"))
					return
				}
				_ = msg.Respond([]byte{'D', 0, 0, 'o', 'k'})
			})
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Unsubscribe()
			_ = old.Publish("ct-cluster.announce", []byte(`{"node":"old","ttl_ms":60000,"agents":[{"id":"far"}]}`))
			_ = old.Flush()
			eventually(t, "A lists far on old", 5*time.Second, func() bool { return lists(a.e, "far", "old") })
			var events atomic.Int64
			res, err := a.e.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "far", Input: "x", OnEvent: func(agent.RunEvent) { events.Add(1) }})
			if err != nil || res.Output != "ok" {
				t.Fatalf("a listened task to an older daemon: %+v, %v", res, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seen) != 2 || seen[0] != "0x2 events=true" {
				t.Fatalf("frames sent: %v", seen)
			}
			if events.Load() != 0 {
				t.Fatalf("%d events from a daemon that sends none", events.Load())
			}
		})
	}
}

// Event frames from anyone but the run (a peer on NATS that learned the
// inbox) are read strictly: malformed ones are dropped, their events up
// to the fault aside, and a frame after the run's end reaches nobody.
func TestHostileEventFrames(t *testing.T) {
	ns := startNATS(t, -1)
	a := newNode(t, ns.ClientURL(), "node-a", patient, nil)
	fake, err := natsgo.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	hostile := [][]byte{
		{'E'}, {'E', 1, 't'}, {'E', 1, 't', 200}, {'E', 1, 'z', 0}, {'E', 1, 'f', 0, 0, 2, 0}, {'E', 1, 'u', 1, 2},
		{'E', 1, 'a', 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		{'E', 1, 'c', 0x80, 0x80, 0x80, 0x01, 0, 0}, // index 2^21: too far
		{'U', 1}, {'U', 0, 0, 0, 0, 'Z'},
	}
	replies := make(chan string, 1)
	sub, err := fake.Subscribe("ct-cluster.exec.far", func(msg *natsgo.Msg) {
		replies <- msg.Reply
		for _, h := range hostile {
			_ = fake.Publish(msg.Reply, h)
		}
		_ = fake.Publish(msg.Reply, cluster.EncodeEvents(1, agent.RunEvent{Kind: agent.RunDelta, Delta: agent.Delta{Kind: agent.DeltaText, Text: "fine"}}))
		_ = fake.Publish(msg.Reply, []byte{'U', 1, 1, 2, 0, 'D', 0, 0, 'o', 'k'})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	_ = fake.Publish("ct-cluster.announce", []byte(`{"node":"fake","ttl_ms":60000,"agents":[{"id":"far"}]}`))
	_ = fake.Flush()
	eventually(t, "A lists far", 5*time.Second, func() bool { return lists(a.e, "far", "fake") })
	var mu sync.Mutex
	var got []agent.RunEvent
	res, err := a.e.ExecuteRequest(context.Background(), axocoatl.Request{AgentID: "far", Input: "x", OnEvent: func(ev agent.RunEvent) {
		mu.Lock()
		got = append(got, ev)
		mu.Unlock()
	}})
	if err != nil || res.Output != "ok" || res.Usage != (agent.Usage{InputTokens: 1, OutputTokens: 2}) {
		t.Fatalf("%+v, %v", res, err)
	}
	// After the end: nobody listens any more, nothing panics.
	_ = fake.Publish(<-replies, cluster.EncodeEvents(2, agent.RunEvent{Kind: agent.RunDelta, Delta: agent.Delta{Kind: agent.DeltaText, Text: "late"}}))
	_ = fake.Flush()
	mu.Lock()
	defer mu.Unlock()
	var text strings.Builder
	for _, ev := range got {
		text.WriteString(ev.Delta.Text)
	}
	if text.String() != "fine" {
		t.Fatalf("events %+v", got)
	}
}

// Every kind of event crosses the wire as it was.
func TestEventFrameRoundTrip(t *testing.T) {
	events := []agent.RunEvent{
		{Kind: agent.RunDelta, Delta: agent.Delta{Kind: agent.DeltaText, Text: "héllo"}},
		{Kind: agent.RunDelta, Delta: agent.Delta{Kind: agent.DeltaText}},
		{Kind: agent.RunDelta, Delta: agent.Delta{Kind: agent.DeltaToolCall, ToolCallIndex: 2, ToolCallID: "call-1", ToolName: "probe"}},
		{Kind: agent.RunDelta, Delta: agent.Delta{Kind: agent.DeltaToolArguments, ToolCallIndex: 2, Arguments: `{"a":1}`}},
		{Kind: agent.RunToolStarted, ToolCallID: "call-1", ToolName: "probe"},
		{Kind: agent.RunToolFinished, ToolCallID: "call-1", ToolName: "probe", IsError: true, Duration: 1500 * time.Microsecond},
		{Kind: agent.RunModelUsage, Usage: agent.Usage{InputTokens: 10, OutputTokens: 20, CachedInputTokens: 3}},
	}
	seq, got, ok := cluster.EventFrame(cluster.EncodeEvents(7, events...))
	if !ok || seq != 7 || len(got) != len(events) {
		t.Fatalf("seq %d, ok %v, %d events", seq, ok, len(got))
	}
	for i := range events {
		if got[i] != events[i] {
			t.Fatalf("event %d: %+v, want %+v", i, got[i], events[i])
		}
	}
	// Every truncation is read as malformed or as fewer events, never a
	// panic.
	b := cluster.EncodeEvents(7, events...)
	for n := 1; n < len(b); n++ {
		if _, evs, ok := cluster.EventFrame(b[:n]); ok && len(evs) >= len(events) {
			t.Fatalf("truncated to %d bytes: read whole", n)
		}
	}
}

// BenchmarkRemoteFirstDelta is the time to the first delta across the
// cluster: alternately, a caller on daemon A runs B's streaming agent
// (openai provider, testutil.StreamingChat on loopback, 20 deltas) with a
// Request.OnEvent until its first text delta; the same run on B itself
// (a local caller); and the same streamed chat request straight to the
// model server until its first content chunk. Medians; it fails when the
// remote first delta comes more than 2 ms after the model's.
func BenchmarkRemoteFirstDelta(b *testing.B) {
	chat := testutil.NewStreamingChat(b, 20, 0)
	ns := startNATS(b, -1)
	model, err := openai.New(provider.Config{BaseURL: chat.URL, APIKey: "sk-test", Timeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	nb := newNode(b, ns.ClientURL(), "node-b", fast, map[string]agent.Model{"streamer": model})
	na := newNode(b, ns.ClientURL(), "node-a", fast, nil)
	for deadline := time.Now().Add(10 * time.Second); !lists(na.e, "streamer", "node-b"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("A does not list streamer on B")
		}
	}
	ctx := context.Background()
	run := func(e *axocoatl.Engine) time.Duration {
		var first time.Duration
		start := time.Now()
		if _, err := e.ExecuteRequest(ctx, axocoatl.Request{AgentID: "streamer", Input: "go", OnEvent: func(ev agent.RunEvent) {
			if first == 0 && ev.Kind == agent.RunDelta {
				first = time.Since(start)
			}
		}}); err != nil {
			b.Fatal(err)
		}
		if first == 0 {
			b.Fatal("no delta")
		}
		return first
	}
	client := &http.Client{}
	direct := func() time.Duration {
		d, err := testutil.ModelFirstDelta(client, chat.URL)
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	var remote, local, models []time.Duration
	n := 0
	for b.Loop() {
		steps := []func(){
			func() { remote = append(remote, run(na.e)) },
			func() { local = append(local, run(nb.e)) },
			func() { models = append(models, direct()) },
		}
		for i := range steps {
			steps[(i+n)%len(steps)]()
		}
		n++
	}
	r, l, m := testutil.Median(remote), testutil.Median(local), testutil.Median(models)
	b.ReportMetric(float64(m.Microseconds()), "model-first-delta-µs")
	b.ReportMetric(float64(l.Microseconds()), "local-first-delta-µs")
	b.ReportMetric(float64(r.Microseconds()), "remote-first-delta-µs")
	b.ReportMetric(float64((r - m).Microseconds()), "added-µs")
	if n >= 20 && r-m > 2*time.Millisecond {
		b.Fatalf("the first delta across the cluster came %s after the model's (medians %s and %s over %d runs); the bar is 2ms", r-m, r, m, n)
	}
}

// The same across the cluster through a door: an HTTP client of A's API
// (execute with Accept: text/event-stream) of the agent that lives only
// on B gets the deltas as B's model writes them, and the result event
// carries the whole answer and its usage. On the OpenAI wire and on the
// Anthropic wire.
func TestSSEExecuteAcrossDaemons(t *testing.T) {
	testutil.EachWire(t, testSSEExecuteAcrossDaemons)
}

func testSSEExecuteAcrossDaemons(t *testing.T, wire string) {
	chat := testutil.NewStreamingChatOn(t, wire, 200, 5*time.Millisecond)
	a, _, _ := streamingPair(t, chat)
	api, err := httpapi.New(httpapi.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.e.Use(context.Background(), api); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(func() { api.Shutdown(context.Background()); srv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/api/agents/streamer/execute", strings.NewReader(`{"input":"go"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	start := time.Now()
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var text strings.Builder
	var result httpapi.ExecuteResponse
	var firstAt time.Duration
	deltas, name := 0, ""
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && name == "delta":
			if deltas == 0 {
				firstAt = time.Since(start)
				if chat.Finished() != 0 {
					t.Error("the first delta reached the HTTP client after the model had written its whole answer")
				}
			}
			deltas++
			var d struct{ Text string }
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d); err != nil {
				t.Fatal(err)
			}
			text.WriteString(d.Text)
		case strings.HasPrefix(line, "data: ") && name == "result":
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &result); err != nil {
				t.Fatal(err)
			}
		}
	}
	if text.String() != chat.Text() || result.Output != chat.Text() {
		t.Fatalf("assembled %d bytes, output %d bytes, the model wrote %d", text.Len(), len(result.Output), len(chat.Text()))
	}
	if deltas < 2 {
		t.Fatalf("%d delta events: the answer came whole", deltas)
	}
	want := agent.Usage{InputTokens: chat.Prompt, OutputTokens: chat.Completion, CachedInputTokens: chat.Cached}
	if result.Usage != want {
		t.Fatalf("usage %+v, want %+v", result.Usage, want)
	}
	t.Logf("%s wire, HTTP SSE on A: the first delta after %s, %d delta events", wire, firstAt.Round(time.Millisecond), deltas)
}
