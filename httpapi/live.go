package httpapi

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/internal/jsonio"
	"github.com/axocoatl/axocoatl-go/lattice"
)

// Live runs on the event stream (docs/http-api.md, "Live runs on the
// WebSocket"): a client starts a run over its socket ({"cmd":"execute"})
// or follows one by task id ({"cmd":"follow"}, [axocoatl.Engine.FollowRun])
// and gets its text as it is written, its tool calls and its end, beside
// the lattice events.
//
// The run side is the Engine's fan-out: each run this socket follows is
// read by one goroutine (a follow's pump, or the Engine's own delivery
// goroutine for a run started here), which moves its events into the
// run's pending frames here and wakes the socket's writer. Consecutive
// text deltas merge into one pending delta; the writer takes everything
// pending at once, so a socket slower than the model gets fewer, larger
// delta frames. Pending text is bounded per run (wsDeltaBytes): past it
// the reader waits for the writer, and meanwhile the Engine's own bounded
// listener queue coalesces (and, far behind, drops, reported in run_end):
// the model is never slowed, memory never grows past the bounds.
const (
	// wsMaxLive bounds the runs one socket follows or has started and
	// not yet delivered to their last frame.
	wsMaxLive = 16
	// wsDeltaBytes bounds the text pending for one run of a socket, and
	// the text of one delta frame.
	wsDeltaBytes = 16 << 10
	// wsRunItems bounds the other frames (tool calls, usage) pending for
	// one run of a socket.
	wsRunItems = 64
	// wsRefBytes bounds the ref of an execute command (echoed back).
	wsRefBytes = 128
	// wsTaskIDBytes bounds the task id of a follow command, and the
	// agent id of an execute (both may be echoed in an error).
	wsTaskIDBytes = 128
)

// Frames of live runs.
type (
	runStartedFrame struct {
		Kind    string `json:"kind"` // run_started
		Ref     string `json:"ref,omitempty"`
		TaskID  string `json:"task_id"`
		AgentID string `json:"agent_id"`
	}
	followingFrame struct {
		Kind   string `json:"kind"` // following
		TaskID string `json:"task_id"`
	}
	resultFrame struct {
		Kind   string          `json:"kind"` // result
		Ref    string          `json:"ref,omitempty"`
		TaskID string          `json:"task_id"`
		Result ExecuteResponse `json:"result"`
	}
	runErrorFrame struct {
		Kind   string      `json:"kind"` // run_error
		Ref    string      `json:"ref,omitempty"`
		TaskID string      `json:"task_id,omitempty"`
		Status int         `json:"status"`
		Error  ErrorDetail `json:"error"`
	}
	runEndFrame struct {
		Kind       string `json:"kind"` // run_end
		TaskID     string `json:"task_id"`
		Unfollowed bool   `json:"unfollowed,omitempty"`
		Dropped    uint64 `json:"dropped"`
	}
)

// liveItem is one pending frame of a run: coalesced text, a run event
// (tool call, usage), or a control frame (run_started, following, the
// last one).
type liveItem struct {
	text  []byte
	ev    agent.RunEvent
	frame any
}

// liveRun is a run this socket follows or started.
type liveRun struct {
	task string
	// Guarded by live.mu.
	items  []liveItem
	text   int  // bytes of text in items
	queued bool // in live.dirty
	final  bool // the last frame is in items
	// room is signalled when the writer took the items.
	room chan struct{}
	// cancel ends a follow's pump (unfollow); nil for a run started here.
	cancel context.CancelFunc
}

// live is the socket's live runs.
type live struct {
	mu    sync.Mutex
	runs  map[string]*liveRun // by task id, until their last frame is taken
	dirty []*liveRun          // runs with pending items, in the order they got them
	wake  chan struct{}
	// wg counts the pumps and runs of this socket: the socket's handler
	// waits for them before it returns.
	wg sync.WaitGroup
}

func newLive() *live {
	return &live{runs: make(map[string]*liveRun), wake: make(chan struct{}, 1)}
}

// check says why task cannot join the socket's runs (nil: it can).
func (l *live) check(task string) *ErrorDetail {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.checkLocked(task)
}

func (l *live) checkLocked(task string) *ErrorDetail {
	if _, dup := l.runs[task]; dup {
		return &ErrorDetail{Code: "already_following", Message: "this socket follows task " + jsonio.Quote(task) + " already", TaskID: task}
	}
	if len(l.runs) >= wsMaxLive {
		return &ErrorDetail{Code: "too_many_runs", TaskID: task,
			Message: "this socket follows " + strconv.Itoa(wsMaxLive) + " runs already (the most one socket may follow or start at once): wait for one to end, or unfollow one"}
	}
	return nil
}

// register adds a run with its first frame; an error when the socket has
// wsMaxLive runs already or has this task.
func (l *live) register(task string, first any) (*liveRun, *ErrorDetail) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if fail := l.checkLocked(task); fail != nil {
		return nil, fail
	}
	r := &liveRun{task: task, room: make(chan struct{}, 1)}
	l.runs[task] = r
	l.queueLocked(r, liveItem{frame: first})
	l.signal()
	return r, nil
}

// queueLocked appends it to r's items and marks r dirty; l.mu held.
func (l *live) queueLocked(r *liveRun, it liveItem) {
	r.items = append(r.items, it)
	if !r.queued {
		r.queued = true
		l.dirty = append(l.dirty, r)
	}
}

func (l *live) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// add moves one event of r into its pending frames, waiting (within ctx)
// for the writer while r's bounds are reached. Tool-call deltas are not
// sent (tool_call_started names the call).
func (l *live) add(ctx context.Context, r *liveRun, ev agent.RunEvent) {
	text := ev.Kind == agent.RunDelta && ev.Delta.Kind == agent.DeltaText
	switch {
	case ev.Kind == agent.RunDelta && !text:
		return
	case text && ev.Delta.Text == "":
		return
	}
	for {
		l.mu.Lock()
		if r.final {
			l.mu.Unlock()
			return
		}
		var last *liveItem
		if n := len(r.items); n > 0 && r.items[n-1].text != nil {
			last = &r.items[n-1]
		}
		switch {
		case text && (r.text == 0 || r.text+len(ev.Delta.Text) <= wsDeltaBytes):
			if last != nil {
				last.text = append(last.text, ev.Delta.Text...)
			} else {
				l.queueLocked(r, liveItem{text: append(make([]byte, 0, max(len(ev.Delta.Text), 256)), ev.Delta.Text...)})
			}
			r.text += len(ev.Delta.Text)
		case !text && len(r.items) < wsRunItems:
			l.queueLocked(r, liveItem{ev: ev})
		default:
			// Full: wait for the writer to take what is pending.
			l.mu.Unlock()
			select {
			case <-r.room:
				continue
			case <-ctx.Done():
				return
			}
		}
		l.mu.Unlock()
		l.signal()
		return
	}
}

// end queues r's last frame (never waiting: one per run).
func (l *live) end(r *liveRun, last any) {
	l.mu.Lock()
	if !r.final {
		r.final = true
		l.queueLocked(r, liveItem{frame: last})
	}
	l.mu.Unlock()
	l.signal()
}

// take hands the writer every pending frame, run by run. A run whose last
// frame is taken leaves the socket's runs.
func (l *live) take(into []liveBatch) []liveBatch {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.dirty {
		into = append(into, liveBatch{task: r.task, items: r.items})
		r.items, r.text, r.queued = nil, 0, false
		if r.final && l.runs[r.task] == r {
			delete(l.runs, r.task)
		}
		select {
		case r.room <- struct{}{}:
		default:
		}
	}
	clear(l.dirty)
	l.dirty = l.dirty[:0]
	return into
}

type liveBatch struct {
	task  string
	items []liveItem
}

// unfollow ends the follow of task; false when this socket does not
// follow it (or started it: such a run ends with its result).
func (l *live) unfollow(task string) bool {
	l.mu.Lock()
	r := l.runs[task]
	l.mu.Unlock()
	if r == nil || r.cancel == nil {
		return false
	}
	r.cancel()
	return true
}

// follow answers a follow command: the run's frames from now on, then
// run_end. The error is the frame to answer with.
func (s *stream) follow(ctx context.Context, l *live, task string) *ErrorDetail {
	switch {
	case task == "":
		return &ErrorDetail{Code: "bad_request", Message: `"task_id" is required`}
	case len(task) > wsTaskIDBytes:
		return &ErrorDetail{Code: "bad_request", Message: `"task_id" longer than ` + strconv.Itoa(wsTaskIDBytes) + " bytes"}
	}
	// The socket's room first: a full socket never takes a listener of
	// the run. (Commands are handled one at a time, and runs only leave
	// meanwhile, so the room is still there when the run is registered.)
	if fail := l.check(task); fail != nil {
		return fail
	}
	sub, err := s.m.eng.FollowRun(ctx, task)
	if err != nil {
		code := "not_running"
		if errors.Is(err, axocoatl.ErrTooManyListeners) {
			code = "too_many_listeners"
		}
		return &ErrorDetail{Code: code, Message: err.Error(), TaskID: task}
	}
	r, fail := l.register(task, followingFrame{Kind: "following", TaskID: task})
	if fail != nil {
		sub.Close()
		return fail
	}
	pctx, cancel := context.WithCancel(ctx)
	r.cancel = cancel
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer cancel()
		defer sub.Close()
		var err error
		for {
			var ev agent.RunEvent
			if ev, err = sub.Next(pctx); err != nil {
				break
			}
			l.add(pctx, r, ev)
		}
		l.end(r, runEndFrame{Kind: "run_end", TaskID: task, Unfollowed: !errors.Is(err, io.EOF) && ctx.Err() == nil, Dropped: sub.Dropped()})
	}()
	return nil
}

// execute answers an execute command: run_started, the run's frames, then
// result or run_error. The run is bound to the socket: it is cancelled
// when the socket closes, as an execute is when its client hangs up.
func (s *stream) execute(ctx context.Context, l *live, f clientFrame) *runErrorFrame {
	bad := func(msg string) *runErrorFrame {
		return &runErrorFrame{Kind: "run_error", Ref: f.Ref, Status: 400, Error: ErrorDetail{Code: "bad_request", Message: msg}}
	}
	switch {
	case len(f.Ref) > wsRefBytes:
		return bad(`"ref" longer than ` + strconv.Itoa(wsRefBytes) + " bytes")
	case f.AgentID == "":
		return bad(`"agent_id" is required`)
	case len(f.AgentID) > wsTaskIDBytes:
		return bad(`"agent_id" longer than ` + strconv.Itoa(wsTaskIDBytes) + " bytes")
	case f.Input == nil:
		return bad(`"input" is required`)
	}
	// As the caller sees it: an agent its globs leave out is not found,
	// and a caller who may not run gets 403, both before run_started (no
	// task id, no sign that the agent exists).
	if _, err := s.m.eng.AgentFor(ctx, f.AgentID); err != nil {
		return &runErrorFrame{Kind: "run_error", Ref: f.Ref, Status: 404, Error: ErrorDetail{Code: "not_found", Message: "agent " + jsonio.Quote(f.AgentID) + " not found"}}
	}
	if who := axocoatl.IdentityFrom(ctx); !who.Can(axocoatl.ScopeExecute) {
		return &runErrorFrame{Kind: "run_error", Ref: f.Ref, Status: 403, Error: ErrorDetail{Code: "forbidden",
			Message: "agent " + f.AgentID + ": " + axocoatl.ErrForbidden.Error() + ": " + who.Name + " has no " + string(axocoatl.ScopeExecute) + " scope"}}
	}
	task := lattice.NewID(time.Now())
	r, fail := l.register(task, runStartedFrame{Kind: "run_started", Ref: f.Ref, TaskID: task, AgentID: f.AgentID})
	if fail != nil {
		return &runErrorFrame{Kind: "run_error", Ref: f.Ref, Status: 429, Error: ErrorDetail{Code: fail.Code, Message: fail.Message}}
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		out, failed := s.m.runExecute(ctx, f.AgentID, *f.Input, f.ConversationID, task,
			func(ev agent.RunEvent) { l.add(ctx, r, ev) })
		if failed != nil {
			l.end(r, runErrorFrame{Kind: "run_error", Ref: f.Ref, TaskID: task, Status: failed.status, Error: failed.body.Error})
			return
		}
		l.end(r, resultFrame{Kind: "result", Ref: f.Ref, TaskID: task, Result: out})
	}()
	return nil
}

// liveWriter encodes the frames of live runs; its buffer is reused.
type liveWriter struct {
	buf []byte
}

// frames calls write with each frame of b, in order: text as delta
// frames of at most wsDeltaBytes of text each (cut on a UTF-8 boundary),
// run events by hand (no reflection per delta), control frames with
// marshal.
func (w *liveWriter) frames(b liveBatch, write func([]byte) error, marshal func(any) error) error {
	for _, it := range b.items {
		switch {
		case it.text != nil:
			for t := it.text; len(t) > 0; {
				n := len(t)
				if n > wsDeltaBytes {
					n = wsDeltaBytes
					for n > 0 && !utf8.RuneStart(t[n]) {
						n--
					}
					if n == 0 {
						n = wsDeltaBytes
					}
				}
				buf := append(w.buf[:0], `{"kind":"delta","task_id":`...)
				buf = jsonio.AppendString(buf, b.task)
				buf = append(buf, `,"text":`...)
				buf = jsonio.AppendString(buf, string(t[:n]))
				w.buf = append(buf, '}')
				if err := write(w.buf); err != nil {
					return err
				}
				t = t[n:]
			}
		case it.frame != nil:
			if err := marshal(it.frame); err != nil {
				return err
			}
		default:
			if buf, ok := w.event(b.task, it.ev); ok {
				if err := write(buf); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (w *liveWriter) event(task string, ev agent.RunEvent) ([]byte, bool) {
	b := w.buf[:0]
	switch ev.Kind {
	case agent.RunToolStarted:
		b = append(b, `{"kind":"tool_call_started","task_id":`...)
		b = jsonio.AppendString(b, task)
		b = append(b, `,"id":`...)
		b = jsonio.AppendString(b, ev.ToolCallID)
		b = append(b, `,"name":`...)
		b = jsonio.AppendString(b, ev.ToolName)
	case agent.RunToolFinished:
		b = append(b, `{"kind":"tool_call_finished","task_id":`...)
		b = jsonio.AppendString(b, task)
		b = append(b, `,"id":`...)
		b = jsonio.AppendString(b, ev.ToolCallID)
		b = append(b, `,"name":`...)
		b = jsonio.AppendString(b, ev.ToolName)
		b = append(b, `,"is_error":`...)
		b = strconv.AppendBool(b, ev.IsError)
		b = append(b, `,"duration_ms":`...)
		b = strconv.AppendInt(b, ev.Duration.Milliseconds(), 10)
	case agent.RunModelUsage:
		b = append(b, `{"kind":"usage","task_id":`...)
		b = jsonio.AppendString(b, task)
		b = append(b, `,"usage":{"input_tokens":`...)
		b = strconv.AppendInt(b, ev.Usage.InputTokens, 10)
		b = append(b, `,"output_tokens":`...)
		b = strconv.AppendInt(b, ev.Usage.OutputTokens, 10)
		if ev.Usage.CachedInputTokens != 0 {
			b = append(b, `,"cached_input_tokens":`...)
			b = strconv.AppendInt(b, ev.Usage.CachedInputTokens, 10)
		}
		b = append(b, '}')
	default:
		return nil, false
	}
	w.buf = append(b, '}')
	return w.buf, true
}
