package a2a

import (
	"bytes"
	"crypto/sha256"
	"hash"
	"sync"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/axocoatl/axocoatl-go/agent"
)

// Bounds of a stream's live updates (docs/a2a.md, Streaming).
const (
	// streamTick is how long the deltas of a stream coalesce: after each
	// update the writer waits a tick, and what arrived meanwhile goes out
	// as one artifact update, so that a model writing a token a
	// millisecond costs the client one event per tick, not one per token.
	streamTick = 20 * time.Millisecond
	// maxLiveItems bounds the updates queued for a stream's writer (text
	// batches and tool statuses); maxLiveText the text they hold. A client
	// slower than the run (or one that stopped reading) fills them; what
	// comes past them is dropped and the end of the stream sends the whole
	// output afresh: the run is never slowed, and the client still gets
	// the exact answer.
	maxLiveItems = 64
	maxLiveText  = 64 << 10
)

// liveItem is one queued update: text of the answer, or a tool call
// starting (tool set).
type liveItem struct {
	text  []byte
	tool  string
	fresh bool // text starts a model call's answer: the artifact starts over
}

// live turns a run's events ([axocoatl.Request].OnEvent) into A2A stream
// events: artifact updates of the output as the model writes it, and a
// working status naming each tool called. onEvent only queues (bounded,
// under a short lock, no I/O): one writer goroutine, owned by the stream
// and ended by finish, does the writes.
type live struct {
	o *out
	t *task

	mu       sync.Mutex
	items    []liveItem
	text     int  // bytes queued in items
	lost     bool // an update was dropped: the end resends the output
	nextCall bool // the next text starts a model call's answer
	peak     int  // the most text ever queued (tests check the bound)

	wake chan struct{}
	stop chan struct{}
	wg   sync.WaitGroup

	// Written by the writer only, then by finish after it ended: what the
	// client has of the artifact since it last started over, and the text
	// batch held back.
	sent    bool
	sentN   int
	sentSum hash.Hash
	held    *liveItem
}

func startLive(o *out, t *task) *live {
	l := &live{o: o, t: t, nextCall: true, wake: make(chan struct{}, 1), stop: make(chan struct{}), sentSum: sha256.New()}
	l.wg.Go(l.write)
	return l
}

// onEvent queues ev for the writer. It never blocks on the client.
func (l *live) onEvent(ev agent.RunEvent) {
	l.mu.Lock()
	switch ev.Kind {
	case agent.RunDelta:
		if ev.Delta.Kind != agent.DeltaText || ev.Delta.Text == "" || l.lost {
			break
		}
		if l.text+len(ev.Delta.Text) > maxLiveText {
			l.lost = true
			break
		}
		if n := len(l.items); n > 0 && l.items[n-1].tool == "" && !l.nextCall {
			l.items[n-1].text = append(l.items[n-1].text, ev.Delta.Text...)
		} else if !l.add(liveItem{text: []byte(ev.Delta.Text), fresh: l.nextCall}) {
			break
		}
		l.nextCall = false
		l.text += len(ev.Delta.Text)
		l.peak = max(l.peak, l.text)
	case agent.RunToolStarted:
		l.add(liveItem{tool: ev.ToolName})
	case agent.RunModelUsage:
		// The model call ended: the text of the next one is its own answer.
		l.nextCall = true
	}
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// add queues it unless the queue is full (then the stream has lost an
// update); l.mu held.
func (l *live) add(it liveItem) bool {
	if len(l.items) >= maxLiveItems {
		l.lost = true
		return false
	}
	l.items = append(l.items, it)
	return true
}

func (l *live) take() []liveItem {
	l.mu.Lock()
	defer l.mu.Unlock()
	items := l.items
	l.items, l.text = nil, 0
	return items
}

// write is the writer goroutine: at each wake-up it waits a tick, so that
// the deltas arriving meanwhile coalesce, then sends what was queued. The
// last text batch is held back until more comes (then it goes out, not
// the last) or the run ends (finish sends it marked lastChunk): a client
// gets no empty closing chunk, and a run of one batch one event.
func (l *live) write() {
	tick := time.NewTimer(streamTick)
	defer tick.Stop()
	for {
		select {
		case <-l.wake:
		case <-l.stop:
			return
		}
		tick.Reset(streamTick)
		select {
		case <-tick.C:
		case <-l.stop:
			return
		}
		items := l.take()
		if l.held != nil {
			items = append([]liveItem{*l.held}, items...)
			l.held = nil
		}
		if n := len(items); n > 0 && items[n-1].tool == "" {
			last := items[n-1]
			l.held, items = &last, items[:n-1]
		}
		for _, it := range items {
			l.send(it)
		}
		l.o.s.flush()
	}
}

// send writes one update.
func (l *live) send(it liveItem) {
	if it.tool != "" {
		l.o.hold(l.o.toolStatusEvent(l.t, it.tool))
		return
	}
	appendTo := l.commit(it)
	l.emit(it.text, appendTo, false)
}

// commit records that the client gets it (text), and reports whether it
// appends to what the client has.
func (l *live) commit(it liveItem) (appendTo bool) {
	if it.fresh {
		l.sent, l.sentN = false, 0
		l.sentSum.Reset()
	}
	appendTo, l.sent = l.sent, true
	l.sentN += len(it.text)
	l.sentSum.Write(it.text)
	return appendTo
}

// emit writes text as artifact chunks small enough for one SSE line;
// last marks the final one lastChunk.
func (l *live) emit(text []byte, appendTo, last bool) {
	chunks := chunk(string(text), maxChunk)
	for i, c := range chunks {
		l.o.hold(l.o.artifactEvent(l.t, appendTo || i > 0, last && i == len(chunks)-1, c))
	}
}

// finish ends the writer and sends what it had left. When the task
// completed and what the client has of the artifact is a prefix of the
// output (all of it, or less: text past the bounds was dropped, or the
// model did not stream), finish sends the rest, the final chunk marked
// lastChunk, and reports done; otherwise the end of the stream sends the
// output afresh.
func (l *live) finish(output string, completed bool) (done bool) {
	close(l.stop)
	l.wg.Wait()
	items := l.take()
	if l.held != nil {
		items = append([]liveItem{*l.held}, items...)
		l.held = nil
	}
	var last *liveItem
	if n := len(items); n > 0 && items[n-1].tool == "" {
		last, items = &items[n-1], items[:n-1]
	}
	for _, it := range items {
		l.send(it)
	}
	if last == nil && !completed {
		return false
	}
	appendTo := l.sent
	if last != nil {
		appendTo = l.commit(*last)
	}
	prefix := completed && l.sentN <= len(output)
	if prefix {
		want := sha256.Sum256([]byte(output[:l.sentN]))
		prefix = bytes.Equal(l.sentSum.Sum(nil), want[:])
	}
	rest := ""
	if prefix {
		rest = output[l.sentN:]
	}
	switch {
	case last != nil:
		l.emit(last.text, appendTo, prefix && rest == "")
		if prefix && rest != "" {
			l.emit([]byte(rest), true, true)
		}
	case prefix:
		// Nothing held: the rest (an empty closing chunk when the client
		// has it all, or the whole output of a model that did not stream).
		l.emit([]byte(rest), l.sent, true)
	}
	return prefix
}

// toolStatusEvent is a working status update naming the tool the run calls.
func (o *out) toolStatusEvent(t *task, tool string) any {
	text := "calling tool " + cut(tool, 256)
	now := time.Now()
	if o.g == gen10 {
		return a2a1.StreamResponse{Event: &a2a1.TaskStatusUpdateEvent{
			TaskID:    a2a1.TaskID(t.id),
			ContextID: t.contextID,
			Status: a2a1.TaskStatus{State: a2a1.TaskStateWorking, Timestamp: &now, Message: &a2a1.Message{
				ID: string(t.id) + "-tool", ContextID: t.contextID, TaskID: a2a1.TaskID(t.id),
				Role: a2a1.MessageRoleAgent, Parts: a2a1.ContentParts{a2a1.NewTextPart(text)},
			}},
		}}
	}
	return &a2a03.TaskStatusUpdateEvent{
		TaskID:    t.id,
		ContextID: t.contextID,
		Status: a2a03.TaskStatus{State: a2a03.TaskStateWorking, Timestamp: &now, Message: &a2a03.Message{
			ID: string(t.id) + "-tool", ContextID: t.contextID, TaskID: t.id,
			Role: a2a03.MessageRoleAgent, Parts: a2a03.ContentParts{a2a03.TextPart{Text: text}},
		}},
	}
}
