package httpapi

import (
	"context"
	"encoding/json"
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

// readUntil reads frames, skipping lattice events, until one of kind.
func readUntil(t *testing.T, ctx context.Context, conn *websocket.Conn, kind string) liveFrame {
	t.Helper()
	for {
		f := readLive(t, ctx, conn)
		if f.Kind == kind {
			return f
		}
		if f.Kind != "event" && f.Kind != "ready" {
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
// model's, then the result with the usage.
func TestWebSocketExecuteStreams(t *testing.T) {
	chat := testutil.NewStreamingChat(t, 200, 5*time.Millisecond)
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
	t.Logf("first delta %s after run_started; %d delta frames for 200 deltas", firstAfter, run.deltas)
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
