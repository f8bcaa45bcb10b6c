package a2a

import (
	"bytes"
	"crypto/sha256"
	"hash"
	"sync"
	"time"
	"unicode/utf8"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/internal/a2awire"
	"github.com/axocoatl/axocoatl-go/internal/jsonio"
)

// Bounds of a stream's live updates (docs/a2a.md, Streaming).
const (
	// maxLiveItems bounds the updates queued for a stream's writer (text
	// batches and tool statuses); maxLiveText the text they hold. A client
	// slower than the run (or one that stopped reading) fills them; what
	// comes past them is dropped and the end of the stream sends the whole
	// output afresh: the run is never slowed, and the client still gets
	// the exact answer.
	maxLiveItems = 64
	maxLiveText  = 64 << 10
	// keepTextCap is the largest text buffer a writer hands back for
	// reuse: a batch that grew past it is freed, not kept for the stream.
	keepTextCap = 1 << 10
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
// and ended by finish, does the writes. The writer sends what is queued
// as soon as it is woken; what arrives while it writes coalesces into the
// next update (one event for all the deltas of a busy write, never a
// fixed delay), so a client reading as fast as the model writes gets each
// delta at once, and a slow one gets fewer, larger updates.
type live struct {
	o *out
	t *task

	mu       sync.Mutex
	items    []liveItem
	spare    []liveItem // the writer's last batch, handed back for reuse
	text     int        // bytes queued in items
	lost     bool       // an update was dropped: the end resends the output
	nextCall bool       // the next text starts a model call's answer
	peak     int        // the most text ever queued (tests check the bound)

	wake chan struct{}
	stop chan struct{}
	wg   sync.WaitGroup

	// Written by the writer only, then by finish after it ended: what the
	// client has of the artifact since it last started over, and the
	// encoding of a text artifact update (tmpl: the event around its
	// text, per append/lastChunk; buf: the event being written).
	sent    bool
	sentN   int
	sentSum hash.Hash
	tmpl    [4]*artifactTemplate
	buf     []byte
}

// artifactTemplate is the encoded SSE event of a text artifact update
// around its text: pre, the JSON string of the text, post.
type artifactTemplate struct{ pre, post []byte }

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
		} else if !l.addText(ev.Delta.Text, l.nextCall) {
			break
		}
		l.nextCall = false
		l.text += len(ev.Delta.Text)
		l.peak = max(l.peak, l.text)
	case agent.RunToolStarted:
		if len(l.items) >= maxLiveItems {
			l.lost = true
			break
		}
		l.items = append(l.items, liveItem{tool: ev.ToolName})
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

// addText queues a text batch unless the queue is full (then the stream
// has lost an update), reusing a slot's buffer of an earlier batch; l.mu
// held.
func (l *live) addText(text string, fresh bool) bool {
	n := len(l.items)
	if n >= maxLiveItems {
		l.lost = true
		return false
	}
	if n < cap(l.items) {
		l.items = l.items[:n+1]
		it := &l.items[n]
		it.text, it.tool, it.fresh = append(it.text[:0], text...), "", fresh
		return true
	}
	l.items = append(l.items, liveItem{text: []byte(text), fresh: fresh})
	return true
}

// take returns what is queued; the writer hands the batch back (done)
// once it is written.
func (l *live) take() []liveItem {
	l.mu.Lock()
	defer l.mu.Unlock()
	items := l.items
	l.items, l.spare, l.text = l.spare[:0], nil, 0
	return items
}

// done hands a written batch back for the queue to reuse.
func (l *live) done(items []liveItem) {
	for i := range items {
		if cap(items[i].text) > keepTextCap {
			items[i].text = nil
		}
		items[i].tool = ""
	}
	l.mu.Lock()
	l.spare = items[:0]
	l.mu.Unlock()
}

// write is the writer goroutine: woken by onEvent, it sends what is
// queued and flushes, and again while more came during the write; then it
// waits for the next wake-up.
func (l *live) write() {
	for {
		select {
		case <-l.wake:
		case <-l.stop:
			return
		}
		for {
			items := l.take()
			if len(items) == 0 {
				l.done(items)
				break
			}
			for _, it := range items {
				l.send(it)
			}
			l.o.s.flush()
			l.done(items)
			select {
			case <-l.stop:
				return
			default:
			}
		}
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

// emit writes text as artifact chunks small enough for one SSE line
// (cut on UTF-8 boundaries, as [chunk] does); last marks the final one
// lastChunk. An empty text is one empty chunk.
func (l *live) emit(text []byte, appendTo, last bool) {
	for first := true; first || len(text) > 0; first = false {
		c := text
		if len(c) > maxChunk {
			i := maxChunk
			for i > 0 && !utf8.RuneStart(c[i]) {
				i--
			}
			if i == 0 {
				i = maxChunk
			}
			c = c[:i]
		}
		text = text[len(c):]
		l.artifact(c, appendTo || !first, last && len(text) == 0)
	}
}

// artifact writes one text artifact update, to go out with the next
// flush. It is the event artifactEvent gives, encoded once per stream and
// kind (append, lastChunk) around a placeholder; the text goes in its
// place, so a delta costs no allocation.
func (l *live) artifact(text []byte, appendTo, last bool) {
	k := 0
	if appendTo {
		k |= 1
	}
	if last {
		k |= 2
	}
	if l.tmpl[k] == nil {
		l.tmpl[k] = l.template(appendTo, last)
	}
	tp := l.tmpl[k]
	if l.o.s.gone() {
		return
	}
	if tp.pre == nil || len(text) == 0 {
		// No template (the task's ids hold the placeholder), or the empty
		// closing chunk: encoded whole.
		l.o.hold(l.o.artifactEvent(l.t, appendTo, last, string(text)))
		return
	}
	b := append(l.buf[:0], tp.pre...)
	b = jsonio.AppendString(b, text)
	b = append(b, tp.post...)
	l.o.s.write(b, false)
	if cap(b) <= 2*maxChunk {
		l.buf = b
	}
}

// placeholder stands for the text in a template: a string nothing else of
// the event holds (the ids are checked), encoded as quoted below.
const (
	placeholder       = "\x00"
	placeholderQuoted = `"\u0000"`
)

// template encodes the artifact update of this stream's kind with the
// placeholder for its text; a template with nil pre when the placeholder
// is not found exactly once (then each update is encoded whole).
func (l *live) template(appendTo, last bool) *artifactTemplate {
	b := l.o.encode(l.o.artifactEvent(l.t, appendTo, last, placeholder))
	ev := a2awire.AppendEvent(nil, b)
	i := bytes.Index(ev, []byte(placeholderQuoted))
	if i < 0 || bytes.Count(ev, []byte(placeholderQuoted)) != 1 {
		return &artifactTemplate{}
	}
	return &artifactTemplate{pre: ev[:i:i], post: ev[i+len(placeholderQuoted):]}
}

// finish ends the writer and sends what it had left. When the task
// completed and what the client has of the artifact is a prefix of the
// output (all of it, or less: text past the bounds was dropped, or the
// model did not stream), finish sends the rest, the final chunk marked
// lastChunk (an empty closing chunk when the client has it all already),
// and reports done; otherwise the end of the stream sends the output
// afresh.
func (l *live) finish(output string, completed bool) (done bool) {
	close(l.stop)
	l.wg.Wait()
	items := l.take()
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
		// Nothing queued: the rest (an empty closing chunk when the client
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
