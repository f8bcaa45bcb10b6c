package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/internal/testutil"
	"github.com/axocoatl/axocoatl-go/lattice"
)

// liveFrame is any frame of the event stream, live-run frames included.
type liveFrame struct {
	Kind       string          `json:"kind"`
	Ref        string          `json:"ref"`
	TaskID     string          `json:"task_id"`
	AgentID    string          `json:"agent_id"`
	Text       string          `json:"text"`
	ID         string          `json:"id"`
	Name       string          `json:"name"`
	IsError    bool            `json:"is_error"`
	DurationMS *int64          `json:"duration_ms"`
	Status     int             `json:"status"`
	Usage      *agent.Usage    `json:"usage"`
	Result     ExecuteResponse `json:"result"`
	Error      ErrorDetail     `json:"error"`
	Dropped    uint64          `json:"dropped"`
	Unfollowed bool            `json:"unfollowed"`
	Event      lattice.Event   `json:"event"`
	raw        []byte
	at         time.Time
}

func readLive(t *testing.T, ctx context.Context, conn *websocket.Conn) liveFrame {
	t.Helper()
	typ, data, err := conn.Read(ctx)
	if err != nil {
		t.Fatalf("read frame: %v", err)
	}
	if typ != websocket.MessageText || !utf8.Valid(data) {
		t.Fatalf("frame type %v, valid UTF-8 %v", typ, utf8.Valid(data))
	}
	var f liveFrame
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("frame %q: %v", data, err)
	}
	f.raw, f.at = data, time.Now()
	return f
}

// readUntil reads frames, skipping lattice events and the deltas, tool
// calls and usage of runs, until one of kind.
func readUntil(t *testing.T, ctx context.Context, conn *websocket.Conn, kind string) liveFrame {
	t.Helper()
	for {
		f := readLive(t, ctx, conn)
		if f.Kind == kind {
			return f
		}
		switch f.Kind {
		case "event", "ready", "delta", "usage", "tool_call_started", "tool_call_finished":
		default:
			t.Fatalf("frame %s before %s", f.raw, kind)
		}
	}
}

func send(t *testing.T, ctx context.Context, conn *websocket.Conn, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	if err := conn.Write(ctx, websocket.MessageText, b); err != nil {
		t.Fatal(err)
	}
}

// liveRunOf reads the frames of one run (skipping lattice events) to its
// last one: result, run_error or run_end.
type liveRunRead struct {
	frames []liveFrame
	text   strings.Builder
	deltas int
	last   liveFrame
}

func readRun(t *testing.T, ctx context.Context, conn *websocket.Conn, task string, onDelta func(liveFrame)) *liveRunRead {
	t.Helper()
	r := &liveRunRead{}
	for {
		f := readLive(t, ctx, conn)
		if f.Kind == "event" || f.TaskID != task && f.Kind != "error" {
			continue
		}
		r.frames = append(r.frames, f)
		switch f.Kind {
		case "delta":
			if onDelta != nil {
				onDelta(f)
			}
			r.deltas++
			r.text.WriteString(f.Text)
		case "result", "run_error", "run_end":
			r.last = f
			return r
		case "error":
			if f.Error.TaskID != task {
				t.Fatalf("error frame %s", f.raw)
			}
		}
	}
}

// Acceptance (#26): a run started over the socket streams to a
// coder/websocket client as the model writes it: the first delta before
// the model has finished, the text assembled from the deltas equal to the
// model's, then the result with the usage; on the OpenAI wire and on the
// Anthropic wire.
func TestWebSocketExecuteStreams(t *testing.T) {
	testutil.EachWire(t, testWebSocketExecuteStreams)
}

func testWebSocketExecuteStreams(t *testing.T, wire string) {
	chat := testutil.NewStreamingChatOn(t, wire, 200, 5*time.Millisecond)
	srv, _ := serveStreaming(t, chat, agent.Spec{}, axocoatl.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := dialStream(t, ctx, srv)
	conn.SetReadLimit(4 << 20)
	readUntil(t, ctx, conn, "ready")
	send(t, ctx, conn, map[string]any{"cmd": "execute", "ref": "r1", "agent_id": "streamer", "input": "go"})
	started := readUntil(t, ctx, conn, "run_started")
	if started.Ref != "r1" || started.TaskID == "" || started.AgentID != "streamer" {
		t.Fatalf("run_started %s", started.raw)
	}
	var firstAfter time.Duration
	run := readRun(t, ctx, conn, started.TaskID, func(f liveFrame) {
		if firstAfter == 0 {
			firstAfter = time.Since(started.at)
			if chat.Finished() != 0 {
				t.Error("the first delta reached the client after the model had written its whole answer")
			}
		}
	})
	if run.last.Kind != "result" || run.last.Ref != "r1" {
		t.Fatalf("last frame %s", run.last.raw)
	}
	if got := run.text.String(); got != chat.Text() || run.last.Result.Output != chat.Text() {
		t.Fatalf("assembled %d bytes, output %d, the model wrote %d", len(got), len(run.last.Result.Output), len(chat.Text()))
	}
	if run.deltas < 2 {
		t.Fatalf("%d delta frames: the answer came whole", run.deltas)
	}
	want := agent.Usage{InputTokens: 123, OutputTokens: 200, CachedInputTokens: 23}
	if run.last.Result.Usage != want || run.last.Result.TaskID != started.TaskID || run.last.Result.Status != "completed" {
		t.Fatalf("result %s", run.last.raw)
	}
	var usage []agent.Usage
	for _, f := range run.frames {
		if f.Kind == "usage" {
			usage = append(usage, *f.Usage)
		}
	}
	if len(usage) != 1 || usage[0] != want {
		t.Fatalf("usage frames %+v", usage)
	}
	if chat.Plain.Load() != 0 {
		t.Fatal("the socket's run asked the model for a plain answer: it was not followed from its start")
	}
	t.Logf("%s wire: first delta %s after run_started; %d delta frames for 200 deltas", wire, firstAfter, run.deltas)
}

// A second socket follows the run of the first by its task id (seen in
// AgentActivated): following, the deltas from where it joined (a suffix
// of the answer), run_end; the run's own socket still gets everything.
// follow of a task not running, unfollow of one not followed and a bad
// execute get error frames; the stream goes on.
func TestWebSocketFollow(t *testing.T) {
	chat := testutil.NewStreamingChat(t, 200, 5*time.Millisecond)
	srv, _ := serveStreaming(t, chat, agent.Spec{}, axocoatl.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, b := dialStream(t, ctx, srv), dialStream(t, ctx, srv)
	a.SetReadLimit(4 << 20)
	b.SetReadLimit(4 << 20)
	readUntil(t, ctx, a, "ready")
	readUntil(t, ctx, b, "ready")

	send(t, ctx, b, map[string]any{"cmd": "follow", "task_id": "nope"})
	if f := readUntil(t, ctx, b, "error"); f.Error.Code != "not_running" || f.Error.TaskID != "nope" {
		t.Fatalf("follow of an unknown task: %s", f.raw)
	}
	send(t, ctx, b, map[string]any{"cmd": "unfollow", "task_id": "nope"})
	if f := readUntil(t, ctx, b, "error"); f.Error.Code != "not_following" {
		t.Fatalf("unfollow of a task not followed: %s", f.raw)
	}
	for _, tc := range []struct {
		frame  map[string]any
		status int
		code   string
	}{
		{map[string]any{"cmd": "execute", "ref": "x", "input": "go"}, 400, "bad_request"},
		{map[string]any{"cmd": "execute", "ref": "x", "agent_id": "streamer"}, 400, "bad_request"},
		{map[string]any{"cmd": "execute", "ref": "x", "agent_id": "ghost", "input": "go"}, 404, "not_found"},
		{map[string]any{"cmd": "execute", "ref": strings.Repeat("r", 129), "agent_id": "streamer", "input": "go"}, 400, "bad_request"},
	} {
		send(t, ctx, b, tc.frame)
		f := readUntil(t, ctx, b, "run_error")
		if f.Status != tc.status || f.Error.Code != tc.code {
			t.Fatalf("%v: %s", tc.frame, f.raw)
		}
	}

	// Refused by the Engine: acknowledged, then the error, as HTTP gives it.
	send(t, ctx, b, map[string]any{"cmd": "execute", "ref": "y", "agent_id": "streamer", "input": "go", "conversation_id": "bad id!"})
	if f := readUntil(t, ctx, b, "run_started"); f.Ref != "y" {
		t.Fatalf("run_started %s", f.raw)
	}
	if f := readUntil(t, ctx, b, "run_error"); f.Ref != "y" || f.Status != 400 || f.Error.Code != "bad_request" || f.TaskID == "" {
		t.Fatalf("a bad conversation id: %s", f.raw)
	}

	send(t, ctx, a, map[string]any{"cmd": "execute", "agent_id": "streamer", "input": "go"})
	task := readUntil(t, ctx, a, "run_started").TaskID
	// b learns of the run from the lattice, as any client would.
	for {
		f := readLive(t, ctx, b)
		if f.Kind == "event" && f.Event.Type == axocoatl.EventAgentActivated && strings.Contains(string(f.Event.Payload), task) {
			break
		}
	}
	send(t, ctx, b, map[string]any{"cmd": "follow", "task_id": task})
	if f := readUntil(t, ctx, b, "following"); f.TaskID != task {
		t.Fatalf("following %s", f.raw)
	}
	send(t, ctx, b, map[string]any{"cmd": "follow", "task_id": task})
	followed := readRun(t, ctx, b, task, nil)
	own := readRun(t, ctx, a, task, nil)
	if own.last.Kind != "result" || own.text.String() != chat.Text() {
		t.Fatalf("the run's own socket: %s, %d bytes", own.last.raw, own.text.Len())
	}
	if followed.last.Kind != "run_end" || followed.last.Dropped != 0 || followed.last.Unfollowed {
		t.Fatalf("the follower's last frame %s", followed.last.raw)
	}
	if followed.deltas == 0 || !strings.HasSuffix(chat.Text(), followed.text.String()) {
		t.Fatalf("the follower got %d deltas, %q: not a suffix of the answer", followed.deltas, followed.text.String())
	}
	// The second follow of the same task was refused, in the follower's
	// frames before run_end.
	refused := false
	for _, f := range followed.frames {
		refused = refused || f.Kind == "error" && f.Error.Code == "already_following"
	}
	if !refused {
		t.Fatal("a second follow of the same task was not refused")
	}
}

// A run's tool calls and each model call's usage reach the socket in the
// run's order, between run_started and result.
func TestWebSocketToolCalls(t *testing.T) {
	srv, _, e := serveAPI(t, Config{})
	if err := e.RegisterTool(axocoatl.Tool{Name: "probe", Call: func(context.Context, axocoatl.ToolCall) (agent.ToolResult, error) {
		return agent.ToolResult{Content: "fine"}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	if err := e.AddAgent(agent.Spec{ID: "streamer"}, toolStreamer{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := dialStream(t, ctx, srv)
	conn.SetReadLimit(4 << 20)
	readUntil(t, ctx, conn, "ready")
	send(t, ctx, conn, map[string]any{"cmd": "execute", "agent_id": "streamer", "input": "go"})
	task := readUntil(t, ctx, conn, "run_started").TaskID
	run := readRun(t, ctx, conn, task, nil)
	var kinds []string
	for _, f := range run.frames {
		s := f.Kind
		switch f.Kind {
		case "tool_call_started":
			s += " " + f.ID + " " + f.Name
		case "tool_call_finished":
			s += fmt.Sprintf(" %s %s %v %v", f.ID, f.Name, f.IsError, f.DurationMS != nil)
		case "delta":
			s += " " + f.Text
		case "result":
			s += " " + f.Result.Output
		}
		kinds = append(kinds, s)
	}
	want := []string{"usage", "tool_call_started call-1 probe", "tool_call_finished call-1 probe false true", "delta probed: fine", "usage", "result probed: fine"}
	if strings.Join(kinds, "\n") != strings.Join(want, "\n") {
		t.Fatalf("frames:\n%s\nwant:\n%s", strings.Join(kinds, "\n"), strings.Join(want, "\n"))
	}
}

// holdModel answers "done" once released, or fails with its context.
type holdModel struct{ release chan struct{} }

func (g holdModel) Generate(ctx context.Context, _ *agent.Request) (*agent.Response, error) {
	select {
	case <-g.release:
		return &agent.Response{Content: "done"}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Guards: bound "runs one socket follows or has started at once" (16,
// docs/bounds.md, event stream). 16 runs started on one socket are served;
// the 17th execute is refused with too_many_runs (429) and a follow with
// an error frame, without taking a listener of the run; once the runs end
// (their results delivered) the socket takes runs again. A socket that
// closes cancels the runs it started.
func TestWebSocketMaxLiveRuns(t *testing.T) {
	srv, _, e := serveAPI(t, Config{})
	gate := holdModel{release: make(chan struct{})}
	if err := e.AddAgent(agent.Spec{ID: "gated"}, gate); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := dialStream(t, ctx, srv)
	conn.SetReadLimit(4 << 20)
	readUntil(t, ctx, conn, "ready")
	for i := range wsMaxLive {
		send(t, ctx, conn, map[string]any{"cmd": "execute", "ref": fmt.Sprint(i), "agent_id": "gated", "input": "go"})
		readUntil(t, ctx, conn, "run_started")
	}
	send(t, ctx, conn, map[string]any{"cmd": "execute", "ref": "over", "agent_id": "gated", "input": "go"})
	if f := readUntil(t, ctx, conn, "run_error"); f.Ref != "over" || f.Status != 429 || f.Error.Code != "too_many_runs" {
		t.Fatalf("the 17th run: %s", f.raw)
	}
	// A run of another socket: this one may not follow it either.
	other := dialStream(t, ctx, srv)
	other.SetReadLimit(4 << 20)
	readUntil(t, ctx, other, "ready")
	send(t, ctx, other, map[string]any{"cmd": "execute", "agent_id": "gated", "input": "go"})
	otherTask := readUntil(t, ctx, other, "run_started").TaskID
	send(t, ctx, conn, map[string]any{"cmd": "follow", "task_id": otherTask})
	if f := readUntil(t, ctx, conn, "error"); f.Error.Code != "too_many_runs" {
		t.Fatalf("a follow past the bound: %s", f.raw)
	}
	close(gate.release)
	for range wsMaxLive {
		if f := readUntil(t, ctx, conn, "result"); f.Result.Output != "done" {
			t.Fatalf("result %s", f.raw)
		}
	}
	send(t, ctx, conn, map[string]any{"cmd": "execute", "ref": "again", "agent_id": "gated", "input": "go"})
	if f := readUntil(t, ctx, conn, "run_started"); f.Ref != "again" {
		t.Fatalf("after the runs ended: %s", f.raw)
	}
	readUntil(t, ctx, conn, "result")
	readUntil(t, ctx, other, "result")

	// Closing a socket cancels its runs.
	sub, err := e.Bus().Subscribe(lattice.Filter{Types: []string{axocoatl.EventAgentFailed, axocoatl.EventTaskCompleted}}, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	blocked := holdModel{release: make(chan struct{})}
	if err := e.AddAgent(agent.Spec{ID: "blocked"}, blocked); err != nil {
		t.Fatal(err)
	}
	send(t, ctx, other, map[string]any{"cmd": "execute", "agent_id": "blocked", "input": "go"})
	readUntil(t, ctx, other, "run_started")
	other.Close(websocket.StatusNormalClosure, "")
	select {
	case ev := <-sub.Events():
		if ev.Type != axocoatl.EventAgentFailed || !strings.Contains(string(ev.Payload), `"canceled":true`) {
			t.Fatalf("the run of a closed socket: %s %s", ev.Type, ev.Payload)
		}
	case <-ctx.Done():
		t.Fatal("the run of a closed socket did not end")
	}
}

// bigDelta emits its whole answer as one delta of n bytes (multi-byte
// runes, so that a cut must find a boundary).
type bigDelta struct{ text string }

func (m bigDelta) Generate(context.Context, *agent.Request) (*agent.Response, error) {
	return &agent.Response{Content: m.text}, nil
}

func (m bigDelta) GenerateStream(_ context.Context, _ *agent.Request, emit func(agent.Delta)) (*agent.Response, error) {
	emit(agent.Delta{Kind: agent.DeltaText, Text: m.text})
	return &agent.Response{Content: m.text}, nil
}

// Guards: bound "text of one delta frame" (16 KiB, docs/bounds.md, event
// stream). One 100 KiB delta reaches the socket as delta frames of at most
// 16 KiB of text each, cut on UTF-8 boundaries, that add up to it.
func TestWebSocketDeltaFrameBound(t *testing.T) {
	srv, _, e := serveAPI(t, Config{})
	text := strings.Repeat("ab€d", 100<<10/6)
	if err := e.AddAgent(agent.Spec{ID: "big"}, bigDelta{text: text}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := dialStream(t, ctx, srv)
	conn.SetReadLimit(4 << 20)
	readUntil(t, ctx, conn, "ready")
	send(t, ctx, conn, map[string]any{"cmd": "execute", "agent_id": "big", "input": "go"})
	task := readUntil(t, ctx, conn, "run_started").TaskID
	run := readRun(t, ctx, conn, task, nil)
	for _, f := range run.frames {
		if f.Kind == "delta" && (len(f.Text) > wsDeltaBytes || !utf8.ValidString(f.Text)) {
			t.Fatalf("a delta frame of %d bytes of text (valid UTF-8: %v)", len(f.Text), utf8.ValidString(f.Text))
		}
	}
	if run.text.String() != text || run.deltas < len(text)/wsDeltaBytes {
		t.Fatalf("%d frames, %d bytes of %d", run.deltas, run.text.Len(), len(text))
	}
}

// Guards: bound "text pending per run of a socket" (16 KiB, docs/bounds.md,
// event stream). A socket that does not read while the model writes 5,000
// deltas (50 kB) gets them coalesced: once it reads, far fewer delta
// frames than deltas, none over 16 KiB of text, adding up to the answer
// (what waited past the socket's 16 KiB waited in the Engine's listener
// queue, coalesced too). The model was not slowed: the run completed
// while the socket read nothing.
func TestWebSocketSlowReaderCoalesced(t *testing.T) {
	chat := testutil.NewStreamingChat(t, 5000, 0)
	chat.Word = func(i int) string { return fmt.Sprintf("%-9d|", i) }
	srv, e := serveStreaming(t, chat, agent.Spec{}, axocoatl.Options{HTTP: axocoatl.HTTPOptions{WriteTimeout: 5 * time.Minute}})
	sub, err := e.Bus().Subscribe(lattice.Filter{Types: []string{axocoatl.EventTaskCompleted, axocoatl.EventAgentFailed}}, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	conn := dialSmallStream(t, ctx, srv.URL)
	readUntil(t, ctx, conn, "ready")
	send(t, ctx, conn, map[string]any{"cmd": "execute", "agent_id": "streamer", "input": "go"})
	waitCompleted(t, sub, 1, 2*time.Minute)
	task := readUntil(t, ctx, conn, "run_started").TaskID
	run := readRun(t, ctx, conn, task, nil)
	for _, f := range run.frames {
		if f.Kind == "delta" && len(f.Text) > wsDeltaBytes {
			t.Fatalf("a delta frame of %d bytes of text: pending text unbounded", len(f.Text))
		}
	}
	if run.last.Kind != "result" || run.text.String() != chat.Text() {
		t.Fatalf("%s; assembled %d bytes of %d", run.last.Kind, run.text.Len(), len(chat.Text()))
	}
	if run.deltas > chat.Deltas/4 {
		t.Fatalf("%d delta frames for %d deltas: not coalesced", run.deltas, chat.Deltas)
	}
	t.Logf("%d delta frames for %d deltas", run.deltas, chat.Deltas)
}

// 40 sockets that start 10,000-delta runs and stop reading: the runs
// complete and what the sockets hold is bounded.
// Guards: bound "text pending per run of a socket" (with the Engine's
// listener queue, what a stuck socket holds).
func TestWebSocketStuckClientsBounded(t *testing.T) {
	clients := 40
	if testutil.RaceEnabled {
		clients = 10
	}
	chat := testutil.NewStreamingChat(t, 10_000, 0)
	chat.Word = func(i int) string { return fmt.Sprintf("%-9d|", i) }
	srv, e := serveStreaming(t, chat, agent.Spec{}, axocoatl.Options{HTTP: axocoatl.HTTPOptions{WriteTimeout: 5 * time.Minute}})
	sub, err := e.Bus().Subscribe(lattice.Filter{Types: []string{axocoatl.EventTaskCompleted, axocoatl.EventAgentFailed}}, 128)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	conns := make([]*websocket.Conn, clients)
	for i := range conns {
		conns[i] = dialSmallStream(t, ctx, srv.URL)
		readUntil(t, ctx, conns[i], "ready")
		send(t, ctx, conns[i], map[string]any{"cmd": "execute", "agent_id": "streamer", "input": "go"})
	}
	waitCompleted(t, sub, clients, 3*time.Minute)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	// Each socket holds its run's result (the 100 kB output), the
	// TaskCompleted events of the lattice (shared), its 16 KiB of pending
	// text and its listener queue in the Engine (256 events, 64 KiB).
	if limit := int64(clients)*(1<<20) + 8<<20; grown > limit {
		t.Fatalf("the heap grew %d MiB with %d stuck sockets; the test allows %d MiB", grown>>20, clients, limit>>20)
	}
	t.Logf("heap grew %.1f MiB for %d stuck sockets of 10,000-delta answers", float64(grown)/(1<<20), clients)
	for _, c := range conns {
		c.CloseNow()
	}
}

// BenchmarkWebSocketFirstDelta compares the time to the first delta
// through the WebSocket door (an execute command on an open socket, to
// its first delta frame) with the model's own (the same streamed chat
// request sent straight to the model server, to its first content
// chunk), alternating the two, over loopback; it fails when the door's
// median is more than 2 ms above the model's (issue #26's bar).
func BenchmarkWebSocketFirstDelta(b *testing.B) {
	chat := testutil.NewStreamingChat(b, 20, 0)
	srv, _ := serveStreaming(b, chat, agent.Spec{}, axocoatl.Options{})
	ctx := context.Background()
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/api/events", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(16 << 20)
	kind := func() (string, error) {
		_, data, err := conn.Read(ctx)
		if err != nil {
			return "", err
		}
		var f struct{ Kind string }
		return f.Kind, json.Unmarshal(data, &f)
	}
	cmd := []byte(`{"cmd":"execute","agent_id":"streamer","input":"go"}`)
	door := func() time.Duration {
		start := time.Now()
		if err := conn.Write(ctx, websocket.MessageText, cmd); err != nil {
			b.Fatal(err)
		}
		var d time.Duration
		for {
			k, err := kind()
			if err != nil {
				b.Fatal(err)
			}
			if k == "delta" && d == 0 {
				d = time.Since(start)
			}
			if k == "result" || k == "run_error" {
				break
			}
		}
		if d == 0 {
			b.Fatal("no delta frame")
		}
		return d
	}
	model := func() time.Duration {
		d, err := testutil.ModelFirstDelta(srv.Client(), chat.URL)
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	if k, err := kind(); err != nil || k != "ready" {
		b.Fatalf("first frame %q %v", k, err)
	}
	testutil.FirstDelta(b, "the socket's first delta", door, model, 2*time.Millisecond)
}

// Guards: bound "text pending per run of a socket" (16 KiB) and the 64
// other frames pending per run. A run's reader adds text until 16 KiB
// wait for the writer; the next delta waits (here: its context is done,
// so it is not added) until the writer takes what is pending, then goes
// in. The same for tool-call and usage frames past 64.
func TestLivePendingBounds(t *testing.T) {
	l := newLive()
	r, fail := l.register("t1", followingFrame{Kind: "following", TaskID: "t1"})
	if fail != nil {
		t.Fatal(fail)
	}
	live, done := context.Background(), func() context.Context {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx
	}()
	text := func(s string) agent.RunEvent {
		return agent.RunEvent{Kind: agent.RunDelta, Delta: agent.Delta{Kind: agent.DeltaText, Text: s}}
	}
	piece := strings.Repeat("x", 1<<10)
	for range wsDeltaBytes >> 10 {
		l.add(live, r, text(piece))
	}
	l.add(done, r, text(piece))
	if r.text != wsDeltaBytes {
		t.Fatalf("%d bytes of text pending, want %d: the bound did not hold the reader", r.text, wsDeltaBytes)
	}
	batches := l.take(nil)
	if len(batches) != 1 || len(batches[0].items) != 2 || len(batches[0].items[1].text) != wsDeltaBytes {
		t.Fatalf("taken %+v", batches)
	}
	l.add(done, r, text(piece)) // room again: added without waiting
	if r.text != len(piece) {
		t.Fatalf("after the writer took the text: %d bytes pending", r.text)
	}
	l.take(nil)
	usage := agent.RunEvent{Kind: agent.RunModelUsage}
	for range wsRunItems {
		l.add(live, r, usage)
	}
	l.add(done, r, usage)
	if len(r.items) != wsRunItems {
		t.Fatalf("%d frames pending, want %d", len(r.items), wsRunItems)
	}
}
