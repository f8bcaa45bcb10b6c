package a2a

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/axocoatl/axocoatl-go/internal/a2awire"
)

// sse writes one JSON-RPC response per event as a single `data:` line.
// After the first failed write (the client left) it writes nothing more.
// mu serializes the event writer and the keep-alive goroutine. An event is
// flushed at once, or held (unflushed) to go out with the next flush: a
// quick run's working status and output then cost the client one read, not
// three.
type sse struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	rc      *http.ResponseController
	failed  bool
	pending bool // written, not flushed
}

func newSSE(w http.ResponseWriter) *sse {
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w, rc: http.NewResponseController(w)}
}

// send writes one JSON-RPC event of generation g: a result, or an error.
func (s *sse) send(id json.RawMessage, result any, rerr *rpcError, g generation, flush bool) {
	if s.failed {
		return
	}
	b, err := encodeResponse(id, result, rerr, g)
	if err != nil {
		b, _ = encodeResponse(id, nil, rpcErr(a2awire.CodeInternalError, "encoding the event failed"), g)
	}
	s.data(b, flush)
}

// data writes b (one line of JSON) as one SSE event.
func (s *sse) data(b []byte, flush bool) {
	s.write(a2awire.AppendEvent(make([]byte, 0, len(b)+8), b), flush)
}

func (s *sse) write(b []byte, flush bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed {
		return
	}
	if _, err := s.w.Write(b); err != nil {
		s.failed = true
		return
	}
	s.pending = true
	if flush {
		s.flushLocked()
	}
}

// gone reports whether a write failed (the client left, or Close ended
// the stream): nothing more is written.
func (s *sse) gone() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

// flush sends what was held.
func (s *sse) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushLocked()
}

func (s *sse) flushLocked() {
	if s.failed || !s.pending {
		return
	}
	s.pending = false
	if err := s.rc.Flush(); err != nil {
		s.failed = true
	}
}

// heldFor is how long a held event may wait for the next flush while its
// run goes on.
const heldFor = 5 * time.Millisecond

// closeWriteGrace is how long a stream may still write once Close began:
// enough for a reading client to get the final (canceled) event, bounded
// for one that stopped reading.
const closeWriteGrace = time.Second

// endOnClose makes Close end the stream: a client that stopped reading
// (its socket full) would otherwise hold the writer in Write for as long as
// its connection lives, and Close waiting for it. The returned stop must be
// called when the stream is done.
func (s *sse) endOnClose(ctx context.Context) (stop func() bool) {
	return context.AfterFunc(ctx, func() {
		// Writes still blocked after the grace fail; send stops after that.
		_ = s.rc.SetWriteDeadline(time.Now().Add(closeWriteGrace))
	})
}

// keepAlive flushes what is held once the run has lasted heldFor, and
// writes an SSE comment every interval (if positive) while the run is
// silent, so that proxies do not cut a long stream (clients skip comment
// lines). The returned stop ends the goroutine before it returns.
func (s *sse) keepAlive(interval time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		held := time.NewTimer(heldFor)
		defer held.Stop()
		var tick <-chan time.Time
		if interval > 0 {
			t := time.NewTicker(interval)
			defer t.Stop()
			tick = t.C
		}
		for {
			select {
			case <-done:
				return
			case <-held.C:
				s.flush()
			case <-tick:
				s.write([]byte(": keep-alive\n\n"), true)
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// out is where a stream's events go: JSON-RPC responses of one generation
// (id is the request's), or for the 1.0 REST binding bare StreamResponse
// objects.
type out struct {
	s    *sse
	g    generation
	id   json.RawMessage
	rest bool
}

// event sends ev at once.
func (o *out) event(ev any) { o.write(ev, true) }

// hold writes ev to go out with the next flush (an event, or keepAlive's
// once the run has lasted heldFor).
func (o *out) hold(ev any) { o.write(ev, false) }

func (o *out) write(ev any, flush bool) {
	if o.s.gone() {
		return // the client left: nothing to encode for (a large output is thousands of chunks)
	}
	o.s.data(o.encode(ev), flush)
}

// encode is ev as the data of one SSE event: a JSON-RPC response of the
// stream's generation, or for REST the bare object.
func (o *out) encode(ev any) []byte {
	if !o.rest {
		b, err := encodeResponse(o.id, ev, nil, o.g)
		if err != nil {
			b, _ = encodeResponse(o.id, nil, rpcErr(a2awire.CodeInternalError, "encoding the event failed"), o.g)
		}
		return b
	}
	b, err := json.Marshal(ev)
	if err != nil {
		b = restErrorJSON(rpcErr(a2awire.CodeInternalError, "encoding the event failed"))
	}
	return b
}

// taskEvent is the task as the first event of a stream: no history, no
// output (that follows in chunks).
func (o *out) taskEvent(t *task) any {
	if o.g == gen10 {
		return a2a1.StreamResponse{Event: t.snapshotV1(0, false)}
	}
	return t.snapshot(0, false)
}

func (o *out) statusEvent(t *task, final bool) any {
	if o.g == gen10 {
		return a2a1.StreamResponse{Event: t.statusEventV1()}
	}
	return t.statusEvent(final)
}

// artifactEvent is a chunk of the output: appended to what the client has
// of it (appendTo), or starting it over.
func (o *out) artifactEvent(t *task, appendTo, last bool, text string) any {
	if o.g == gen10 {
		return a2a1.StreamResponse{Event: &a2a1.TaskArtifactUpdateEvent{
			TaskID:    a2a1.TaskID(t.id),
			ContextID: t.contextID,
			Append:    appendTo,
			LastChunk: last,
			Artifact: &a2a1.Artifact{
				ID:    a2a1.ArtifactID(outputArtifactID),
				Name:  "output",
				Parts: a2a1.ContentParts{a2a1.NewTextPart(text)},
			},
		}}
	}
	return &a2a03.TaskArtifactUpdateEvent{
		TaskID:    t.id,
		ContextID: t.contextID,
		Append:    appendTo,
		LastChunk: last,
		Artifact: &a2a03.Artifact{
			ID:    outputArtifactID,
			Name:  "output",
			Parts: a2a03.ContentParts{a2a03.TextPart{Text: text}},
		},
	}
}

// messageStream answers message/stream: the task (submitted), a status
// update (working), then on success the output as artifact chunks, and a
// final status update, after which the response ends. The run goes on if the
// client leaves; tasks/resubscribe or tasks/get can pick it up.
func (h *Handler) messageStream(w http.ResponseWriter, r *http.Request, req rpcRequest, pathAgent string) {
	ctx := r.Context()
	var p a2a03.MessageSendParams
	if rerr := decodeParams(req.Params, &p); rerr != nil {
		h.answer(w, req, nil, rerr)
		return
	}
	sr := sendFromV03(&p, int64(len(req.Params)))
	sr.req = r
	h.stream(ctx, sr, pathAgent, func(t *task, rerr *rpcError) *out {
		if rerr != nil {
			h.answer(w, req, nil, rerr)
			return nil
		}
		return &out{s: newSSE(w), g: req.gen, id: req.ID}
	})
}

// stream starts the task of sr and streams it to the out that open returns
// (open is called once: with the error when the task could not start, and
// then returns nil). The same sequence serves both generations and bindings.
func (h *Handler) stream(ctx context.Context, sr *sendRequest, pathAgent string, open func(*task, *rpcError) *out) {
	if err := h.join(); err != nil {
		open(nil, rpcErr(a2awire.CodeInternalError, "%v", err))
		return
	}
	defer h.runs.Done()
	t, ctx, rerr := h.startTask(ctx, sr, pathAgent)
	if rerr != nil {
		open(nil, rerr)
		return
	}
	o := open(t, nil)
	if ctx == nil { // the message answered the task: follow it from here
		h.follow(sr.req, t, o)
		return
	}
	defer o.s.endOnClose(h.ctx)()
	o.event(o.taskEvent(t)) // at once: the client learns the task's id
	t.setWorking()
	o.hold(o.statusEvent(t, false))
	stop := o.s.keepAlive(h.cfg.StreamKeepAlive)
	l := startLive(o, t)
	// A refused turn ends rejected: the stream says why. The run has its
	// own goroutine: the stream ends when the task waits for input.
	if _, v, asked := awaitRun(reqContext(sr), t, h.runDetached(ctx, t, l.onEvent)); asked {
		l.finish("", false)
		stop()
		o.event(o.interruptEvent(t, v))
		return
	}
	v := t.view()
	whole := l.finish(v.output, v.state == a2a03.TaskStateCompleted)
	stop()
	if !v.state.Terminal() {
		return // the client left
	}
	h.sendEnd(o, t, whole)
}

// tasksResubscribe answers tasks/resubscribe: the task as it is now, then,
// once it has ended, its output and the final status update.
func (h *Handler) tasksResubscribe(w http.ResponseWriter, r *http.Request, req rpcRequest, pathAgent string) {
	ctx := r.Context()
	var p a2a03.TaskIDParams
	if rerr := decodeParams(req.Params, &p); rerr != nil {
		h.answer(w, req, nil, rerr)
		return
	}
	t, rerr := h.lookup(ctx, p.ID, pathAgent)
	if rerr != nil {
		h.answer(w, req, nil, rerr)
		return
	}
	h.follow(r, t, &out{s: newSSE(w), g: req.gen, id: req.ID})
}

// follow streams a stored task to o: as it is now, then, once it has ended,
// its output and the final status update.
func (h *Handler) follow(r *http.Request, t *task, o *out) {
	defer o.s.endOnClose(h.ctx)()
	// Joined before the task event goes out, so that the client misses
	// nothing after it; a task that ended or runs elsewhere has no run
	// to follow here (the end is sent from the store).
	sub, err := h.eng.FollowRun(r.Context(), string(t.id))
	o.event(o.taskEvent(t))
	// The stream ends when the task waits for input, as when it ends.
	ctx, interrupt := context.WithCancel(r.Context())
	defer interrupt()
	var asked *view
	var watch sync.WaitGroup
	watch.Go(func() {
		if v, ok := t.settled(ctx); ok && v.state == a2a03.TaskStateInputRequired {
			asked = &v
			interrupt()
		}
	})
	stop := o.s.keepAlive(h.cfg.StreamKeepAlive)
	whole := false
	if err == nil {
		l := startLive(o, t)
		for {
			ev, err := sub.Next(ctx)
			if err != nil {
				break // io.EOF: the run ended; or the client left, or input is required
			}
			l.onEvent(ev)
		}
		sub.Close()
		if ctx.Err() != nil && r.Context().Err() == nil {
			watch.Wait() // the input it asks for ended the loop
			l.finish("", false)
			stop()
			o.event(o.interruptEvent(t, *asked))
			return
		}
		select { // the run ended; the task's state follows at once
		case <-t.done:
		case <-r.Context().Done():
		}
		v := t.view()
		whole = l.finish(v.output, v.state == a2a03.TaskStateCompleted)
	}
	select {
	case <-t.done:
	case <-ctx.Done():
	}
	interrupt()
	watch.Wait()
	stop()
	switch {
	case asked != nil && !t.view().state.Terminal():
		o.event(o.interruptEvent(t, *asked))
	case r.Context().Err() == nil:
		h.sendEnd(o, t, whole)
	}
}

// sendEnd ends a finished task's stream: when it completed and the client
// does not have the whole output streamed already (whole), the output
// afresh in chunks that keep each SSE line small; then the final status
// update.
func (h *Handler) sendEnd(o *out, t *task, whole bool) {
	v := t.view()
	if v.state == a2a03.TaskStateCompleted {
		if !whole {
			chunks := chunk(v.output, maxChunk)
			for i, c := range chunks {
				o.hold(o.artifactEvent(t, i > 0, i == len(chunks)-1, c))
			}
		}
	}
	o.event(o.statusEvent(t, true))
}

// statusEvent is the task's current status as a status-update event.
func (t *task) statusEvent(final bool) *a2a03.TaskStatusUpdateEvent {
	v := t.view()
	return &a2a03.TaskStatusUpdateEvent{
		TaskID:    t.id,
		ContextID: t.contextID,
		Status:    t.status(v),
		Final:     final,
		Metadata:  v.metadata(),
	}
}

// chunk splits s into pieces of at most n bytes on UTF-8 boundaries; an
// empty s is one empty chunk, so a completed task always has its artifact.
func chunk(s string, n int) []string {
	if len(s) <= n {
		return []string{s}
	}
	out := make([]string, 0, len(s)/n+1)
	for len(s) > n {
		i := n
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		if i == 0 {
			i = n
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}
