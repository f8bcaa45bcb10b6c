package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/lattice"
)

// getTimeline reads GET /api/runs/{task}/timeline of srv.
func getTimeline(t *testing.T, url, task string) (int, TimelineResponse) {
	t.Helper()
	res, err := http.Get(url + "/api/runs/" + task + "/timeline")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out TimelineResponse
	if res.StatusCode == http.StatusOK {
		if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
	}
	return res.StatusCode, out
}

// publishRun publishes an Engine event of task on e's bus, as the Engine
// would, and returns its id.
func publishRun(t *testing.T, e *axocoatl.Engine, typ, task string, extra map[string]any) string {
	t.Helper()
	p := map[string]any{"agent_id": "assistant", "task_id": task}
	for k, v := range extra {
		p[k] = v
	}
	ev, err := lattice.New(typ, "assistant", p)
	if err != nil {
		t.Fatal(err)
	}
	ev.Class = e.ClassOf(typ)
	if err := e.Bus().Publish(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	return ev.ID
}

// waitTimeline waits until the timelines took the event with id (events
// reach them on a subscription of their own).
func waitTimeline(t *testing.T, m *Module, task, id string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		if r := m.timelines.snapshot(task); r != nil && (len(r.events) > 0 && r.events[len(r.events)-1] == id || r.endEvent == id) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the timelines did not take event %s of %s", id, task)
		}
	}
}

// A run through the Engine with tracing off (the default install) has a
// timeline: the run and its model call, with the echo model's tokens.
//
// Guards: the defaults of bounds "timelines kept" and "rows of one run's
// timeline" (docs/bounds.md, run timelines): a zero Config keeps 200 runs
// of 256 rows.
func TestTimelineOfARun(t *testing.T) {
	srv, m, e := serveAPI(t, Config{})
	res, err := e.Execute(context.Background(), "assistant", "hello there")
	if err != nil {
		t.Fatal(err)
	}
	var tl TimelineResponse
	for deadline := time.Now().Add(10 * time.Second); tl.Status != "completed"; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no completed timeline: %+v", tl)
		}
		_, tl = getTimeline(t, srv.URL, res.TaskID)
	}
	if len(tl.Rows) != 2 || tl.Rows[0].Kind != "run" || tl.Rows[1].Kind != "model" || tl.Rows[1].Status != "ok" ||
		tl.Rows[1].Detail != axocoatl.FinishStop || tl.Rows[1].Tokens == nil || tl.Rows[1].Tokens.InputTokens != 2 ||
		tl.AgentID != "assistant" || tl.Source != "library" || tl.Usage == nil || tl.Usage.OutputTokens != 2 {
		t.Fatalf("timeline %+v", tl)
	}
	if m.timelines.maxRuns != DefaultTimelineRuns || m.timelines.maxRows != DefaultTimelineRows {
		t.Fatalf("zero Config keeps %d runs of %d rows, want %d of %d", m.timelines.maxRuns, m.timelines.maxRows, DefaultTimelineRuns, DefaultTimelineRows)
	}
}

// Guards: bounds "timelines kept" and "rows of one run's timeline"
// (docs/bounds.md, run timelines). With 3 runs of 4 rows: a fourth and
// fifth run make the first two forgotten (404); a run with 6 tool calls
// keeps 4 and says 2 were dropped, and its end is still taken; an error
// text of 10 KiB is cut; the events of a tool called outside a run show no
// model call running forever.
func TestTimelineBounds(t *testing.T) {
	srv, m, e := serveAPI(t, Config{TimelineRuns: 3, TimelineRows: 4})
	for _, task := range []string{"t0", "t1", "t2", "t3", "t4"} {
		waitTimeline(t, m, task, publishRun(t, e, axocoatl.EventAgentActivated, task, map[string]any{"source": "api"}))
	}
	for _, task := range []string{"t0", "t1"} {
		if code, _ := getTimeline(t, srv.URL, task); code != http.StatusNotFound {
			t.Errorf("%s, older than the last 3 runs: %d", task, code)
		}
	}
	for _, task := range []string{"t2", "t3", "t4"} {
		if code, _ := getTimeline(t, srv.URL, task); code != http.StatusOK {
			t.Errorf("%s: %d", task, code)
		}
	}
	publishRun(t, e, axocoatl.EventToolCalled, "t4", map[string]any{"tool": "first"})
	publishRun(t, e, axocoatl.EventToolResult, "t4", map[string]any{"tool": "first", "ok": false, "duration_ms": 1, "error": strings.Repeat("é", 5<<10)})
	for range 5 {
		publishRun(t, e, axocoatl.EventToolCalled, "t4", map[string]any{"tool": "x"})
	}
	waitTimeline(t, m, "t4", publishRun(t, e, axocoatl.EventTaskCompleted, "t4", map[string]any{"duration_ms": 5}))
	_, tl := getTimeline(t, srv.URL, "t4")
	if len(tl.Rows) != 5 || tl.Dropped != 2 || tl.Status != "completed" {
		t.Fatalf("%d rows (want the run and 4), dropped %d (want 2), status %s", len(tl.Rows), tl.Dropped, tl.Status)
	}
	first := tl.Rows[1]
	if first.Name != "first" || first.Status != "error" || len(first.Error) > timelineErrorBytes+len("…") || !strings.HasPrefix(first.Error, "éé") {
		t.Fatalf("first call %s %s, error of %d bytes", first.Name, first.Status, len(first.Error))
	}
	if got := len(m.timelines.snapshot("t4").events); got > 4 {
		t.Fatalf("%d event ids kept for a run of 4 rows", got)
	}
	// A tool called outside a run (Engine.CallTool with a task id) is no
	// run waiting on its model: nothing is shown running.
	publishRun(t, e, axocoatl.EventToolCalled, "outside", map[string]any{"tool": "x"})
	waitTimeline(t, m, "outside", publishRun(t, e, axocoatl.EventToolResult, "outside", map[string]any{"tool": "x", "ok": true, "duration_ms": 1}))
	if _, tl := getTimeline(t, srv.URL, "outside"); len(tl.Rows) != 2 || tl.Rows[1].Kind != "tool" || tl.Rows[1].Status != "ok" {
		t.Fatalf("a call outside a run: %+v", tl.Rows)
	}
}

// BenchmarkTimelineIngest is what one event of a run costs the timelines
// (decoding its payload, placing its row): the price every model and tool
// call pays on the subscriber's goroutine, never on the run's.
func BenchmarkTimelineIngest(b *testing.B) {
	tl := &timelines{maxRuns: DefaultTimelineRuns, maxRows: DefaultTimelineRows, runs: map[string]*runRecord{}}
	ev, err := lattice.New(axocoatl.EventModelResult, "assistant", map[string]any{"agent_id": "assistant", "task_id": "t",
		"call": 1, "ok": true, "finish_reason": "stop", "duration_ms": 12, "model": "gpt-4o-mini",
		"usage": map[string]int{"input_tokens": 120, "output_tokens": 40, "cached_input_tokens": 0}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i%DefaultTimelineRows == 0 { // a fresh run before the bound of rows
			tl.runs = map[string]*runRecord{}
			tl.order = tl.order[:0]
		}
		i++
		tl.add(ev)
	}
}

// BenchmarkTimelineAnswer is GET /api/runs/{id}/timeline's work for a run
// at its bound of rows (256) plus 16 webhook deliveries: the copy under
// the lock, the placing and sorting, and the JSON.
func BenchmarkTimelineAnswer(b *testing.B) {
	tl := &timelines{maxRuns: DefaultTimelineRuns, maxRows: DefaultTimelineRows, runs: map[string]*runRecord{}}
	start := time.Now()
	r := &runRecord{task: "t", agent: "assistant", status: "completed", start: start, end: start.Add(time.Second), durationMS: 1000}
	for i := range DefaultTimelineRows {
		at := start.Add(time.Duration(i) * 3 * time.Millisecond)
		r.rows = append(r.rows, rec{kind: "tool", name: "mcp__fs__read_file", status: "ok", start: at, end: at.Add(2 * time.Millisecond)})
	}
	tl.runs["t"] = r
	var ds []WebhookDelivery
	for range 16 {
		ds = append(ds, WebhookDelivery{Webhook: "alerts", EventType: "TaskCompleted", Status: "delivered", CreatedAt: start.Add(time.Second),
			Attempts: []WebhookAttempt{{Start: start.Add(time.Second), StatusCode: 200, Latency: time.Millisecond}}})
	}
	b.ReportAllocs()
	for b.Loop() {
		out := tl.snapshot("t").timeline(time.Now(), ds)
		if _, err := json.Marshal(out); err != nil {
			b.Fatal(err)
		}
	}
}

// thinkingModel blocks each call until its ctx ends, after saying it started.
type thinkingModel struct{ started chan struct{} }

func (m thinkingModel) Generate(ctx context.Context, _ *agent.Request) (*agent.Response, error) {
	m.started <- struct{}{}
	<-ctx.Done()
	return nil, ctx.Err()
}

// A run cancelled while its model call is under way: while it runs the
// timeline shows that call running; after, the run canceled and the call
// ended in error, nothing left open. Runs and reads at once are safe
// (under -race).
func TestTimelineCancelAndConcurrency(t *testing.T) {
	srv, _, e := serveAPI(t, Config{})
	gate := thinkingModel{started: make(chan struct{}, 1)}
	if err := e.AddAgent(agent.Spec{ID: "slow"}, gate); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan axocoatl.Result, 1)
	go func() {
		res, _ := e.ExecuteRequest(ctx, axocoatl.Request{AgentID: "slow", Input: "x", TaskID: "slow-1"})
		ended <- res
	}()
	<-gate.started
	var tl TimelineResponse
	for deadline := time.Now().Add(10 * time.Second); len(tl.Rows) < 2; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no running timeline: %+v", tl)
		}
		_, tl = getTimeline(t, srv.URL, "slow-1")
	}
	if tl.Status != "running" || tl.Rows[1].Kind != "model" || tl.Rows[1].Status != "running" {
		t.Fatalf("while the model thinks: %+v", tl)
	}
	cancel()
	<-ended
	for deadline := time.Now().Add(10 * time.Second); tl.Status == "running"; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the cancel never reached the timeline: %+v", tl)
		}
		_, tl = getTimeline(t, srv.URL, "slow-1")
	}
	if tl.Status != "canceled" || len(tl.Rows) != 2 || tl.Rows[1].Status != "error" || tl.Rows[1].Detail != axocoatl.FinishError {
		t.Fatalf("after the cancel: %+v", tl)
	}

	var wg sync.WaitGroup
	tasks := make(chan string, 64)
	for range 4 {
		wg.Go(func() {
			for range 8 {
				res, err := e.Execute(context.Background(), "assistant", "hi")
				if err != nil {
					t.Error(err)
					return
				}
				tasks <- res.TaskID
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			for range 16 {
				select {
				case task := <-tasks:
					getTimeline(t, srv.URL, task)
				case <-time.After(10 * time.Second):
					t.Error("no run ended within 10s")
					return
				}
			}
		})
	}
	wg.Wait()
}
