package a2aremote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/internal/retry"
	"github.com/axocoatl/axocoatl-go/internal/textsafe"
)

// The causes a call's context ends with, besides its caller's.
var (
	errDeadline = errors.New("a2a call deadline")
	errStopping = errors.New("a2a remote module stopping")
)

// pollMin and pollMax bound the GetTask polling of a task the answer left
// running (a remote that does not stream, or a stream that ended early).
const (
	pollMin = 50 * time.Millisecond
	pollMax = time.Second
)

// drainGrace bounds reading a stream past its final event.
const drainGrace = 100 * time.Millisecond

// idGrace is how long a stream is read after its call ended (cancelled,
// timed out) to learn the id of the task to cancel.
const idGrace = 2 * time.Second

// call sends the input to the remote agent and waits for its task's end.
func (r *remote) call(ctx context.Context, call axocoatl.ToolCall) (axocoatl.ToolResult, error) {
	input, err := axocoatl.ParseInput(call.Arguments)
	if err != nil {
		return axocoatl.ToolResult{}, fmt.Errorf("a2a agent %s: %w", r.cfg.Name, err)
	}
	ctx, span := r.startSpan(ctx)
	res, err := r.callTraced(ctx, input)
	endSpan(span, err, res.IsError)
	return res, err
}

// callTraced is call, once its span started.
func (r *remote) callTraced(ctx context.Context, input string) (axocoatl.ToolResult, error) {
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r.mu.Lock()
	c, streaming, findable, why, stopping := r.client, r.streaming, r.findable, r.lastErr, r.stopping
	var id uint64
	if c != nil && !stopping {
		// Registered under mu: Stop cannot miss it (cheaper than a
		// context.AfterFunc on the module's life, per call).
		r.lastCall++
		id = r.lastCall
		r.inflight[id] = cancel
		r.calls.Add(1)
	}
	r.mu.Unlock()
	switch {
	case stopping:
		return axocoatl.ToolResult{}, fmt.Errorf("%w: a2a agent %s", ErrStopped, r.cfg.Name)
	case c == nil:
		return axocoatl.ToolResult{}, fmt.Errorf("%w: %s: %s", ErrUnavailable, r.cfg.Name, why)
	}
	defer r.callDone(id)

	timeout := r.cfg.timeout()
	timer := time.AfterFunc(timeout, func() { cancel(errDeadline) })
	defer timer.Stop()

	select {
	case r.sem <- struct{}{}:
		defer func() { <-r.sem }()
	case <-cctx.Done():
		return axocoatl.ToolResult{}, r.ended(ctx, cctx, timeout, fmt.Sprintf("waiting for a free slot (max_concurrent %d)", cap(r.sem)), nil)
	}

	req := &a2a1.SendMessageRequest{Message: a2a1.NewMessage(a2a1.MessageRoleUser, a2a1.NewTextPart(input))}
	var t taskState
	t.limit = r.cfg.maxOutput()
	var streamErr error
	switch {
	case findable:
		// The cheapest call is a blocking SendMessage (a stream costs both
		// sides more: 1.5x on our own server). Its task's id arrives only
		// with the answer, so the message names a new context, by which
		// a call that ends early finds the task to cancel.
		req.Message.ContextID = req.Message.ID // new and unique: it names a new context too
		res, err := c.SendMessage(cctx, req)
		if err != nil {
			streamErr = err
			if cctx.Err() != nil {
				t.id = r.find(ctx, c, req.Message.ContextID)
			}
		} else {
			t.apply(res)
		}
	case streaming:
		streamErr = r.stream(cctx, c, req, &t)
	default:
		res, err := c.SendMessage(cctx, req)
		if err != nil {
			streamErr = err
		} else {
			t.apply(res)
		}
	}
	// The answer left the task running (a remote that does not stream
	// answers when it likes; a stream may end before the final event):
	// poll it to its end.
	if streamErr == nil && !t.done && t.id != "" {
		streamErr = r.poll(cctx, c, &t)
	}
	if streamErr == nil && !t.done {
		streamErr = errors.New("the answer ended before the task did, and named no task to follow")
	}
	if streamErr != nil {
		return axocoatl.ToolResult{}, r.ended(ctx, cctx, timeout, "", func() { r.cancelRemote(ctx, c, t) }, streamErr)
	}
	return r.result(t)
}

// callDone takes a call off the list Stop cancels.
func (r *remote) callDone(id uint64) {
	r.mu.Lock()
	delete(r.inflight, id)
	r.mu.Unlock()
	r.calls.Done()
}

// stream reads the streamed answer into t. The stream outlives cctx by up
// to idGrace while the task's id is still unknown: a run cancelled right
// after sending would otherwise drop the stream before its first event,
// leaving a task running at the remote that nobody can cancel.
func (r *remote) stream(cctx context.Context, c *a2aclient.Client, req *a2a1.SendMessageRequest, t *taskState) error {
	sctx, cancelStream := context.WithCancel(context.WithoutCancel(cctx))
	defer cancelStream()
	var idKnown atomic.Bool
	streamDone := make(chan struct{})
	defer close(streamDone)
	stopWatch := context.AfterFunc(cctx, func() {
		if !idKnown.Load() {
			grace := time.NewTimer(idGrace)
			defer grace.Stop()
			select {
			case <-grace.C:
			case <-streamDone:
			}
		}
		cancelStream()
	})
	defer stopWatch()
	final := false
	for ev, err := range c.SendStreamingMessage(sctx, req) {
		if final {
			// After the final event the stream is read to its end (the
			// remote closes it, or drainGrace passes) so that the
			// connection is kept for the next call; what comes is ignored.
			if err != nil {
				return nil
			}
			continue
		}
		if err != nil {
			return err
		}
		if t.apply(ev) {
			final = true
			drain := time.AfterFunc(drainGrace, cancelStream)
			defer drain.Stop()
			continue
		}
		if t.id != "" {
			idKnown.Store(true)
			if cctx.Err() != nil {
				return cctx.Err()
			}
		}
	}
	if !final && cctx.Err() != nil {
		return cctx.Err()
	}
	return nil
}

// ended explains a call that did not reach the task's end: the caller's
// cancellation, the timeout, the module's stop, or err (a transport error,
// a bound). Nobody will read the remote task's result: cancelRemote (which
// does nothing when no task is known to be running) is called first.
func (r *remote) ended(ctx, cctx context.Context, timeout time.Duration, what string, cancelRemote func(), errs ...error) error {
	err := errors.Join(errs...)
	cause := context.Cause(cctx)
	gaveUp := cctx.Err() != nil
	if cancelRemote != nil {
		cancelRemote()
	}
	where := ""
	if what != "" {
		where = " " + what
	}
	switch {
	case gaveUp && cause == errStopping:
		return fmt.Errorf("%w: a2a agent %s: call cancelled%s", ErrStopped, r.cfg.Name, where)
	case gaveUp && cause == errDeadline:
		return fmt.Errorf("%w: a2a agent %s: no answer within %s%s: %w", ErrTimeout, r.cfg.Name, timeout, where, context.DeadlineExceeded)
	case gaveUp && ctx.Err() != nil:
		// The caller cancelled (its run ended): checkable with
		// errors.Is(err, context.Canceled).
		return fmt.Errorf("a2a agent %s: call cancelled%s: %w", r.cfg.Name, where, ctx.Err())
	}
	return r.bound(fmt.Errorf("a2a agent %s: %w", r.cfg.Name, r.red.Error(err)))
}

// bound cuts the text of a call's error to [AgentConfig].MaxOutputBytes: a
// remote's own words in it (a JSON-RPC error's message, an HTTP status line) reach
// the model as its answer would, within the same bound. The error's kinds
// stay checkable with [errors.Is].
func (r *remote) bound(err error) error {
	msg, limit := err.Error(), r.cfg.maxOutput()
	if len(msg) <= limit {
		return err
	}
	kept := textsafe.Cut(msg, limit)
	return &boundedError{msg: kept + fmt.Sprintf("\n[error cut: %d more bytes over max_output_bytes (%d)]", len(msg)-len(kept), limit), err: err}
}

type boundedError struct {
	msg string
	err error
}

func (e *boundedError) Error() string { return e.msg }
func (e *boundedError) Unwrap() error { return e.err }

// cancelRemote cancels the task the call started, if it is known and not
// over, with a fresh context bounded by [CancelTimeout] (the call's own has
// ended).
func (r *remote) cancelRemote(ctx context.Context, c *a2aclient.Client, t taskState) {
	if t.id == "" || t.done {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CancelTimeout)
	defer cancel()
	if _, err := c.CancelTask(cctx, &a2a1.CancelTaskRequest{ID: t.id}); err != nil {
		r.log.Warn("a2a agent: cancelling the remote task failed", "agent", r.cfg.Name, "task", t.id, "error", r.red.Error(err))
		return
	}
	r.log.Info("a2a agent: remote task cancelled", "agent", r.cfg.Name, "task", t.id)
}

// canFind reports whether the remote lists tasks by context: a ListTasks
// for a context nobody used answers, empty.
func (r *remote) canFind(ctx context.Context, c *a2aclient.Client) bool {
	lctx, cancel := context.WithTimeout(ctx, CancelTimeout)
	defer cancel()
	res, err := c.ListTasks(lctx, &a2a1.ListTasksRequest{ContextID: a2a1.NewContextID(), PageSize: 1})
	if err != nil {
		r.log.Debug("a2a agent does not list tasks by context: calls stream", "agent", r.cfg.Name, "error", r.red.Error(err))
		return false
	}
	return len(res.Tasks) == 0
}

// find looks up the running task of a call's context, for a call that
// ended before its answer (the task may not exist yet at the remote: it is
// looked for up to idGrace, as a stream is read to learn it).
func (r *remote) find(ctx context.Context, c *a2aclient.Client, contextID string) a2a1.TaskID {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), idGrace)
	defer cancel()
	for d := 10 * time.Millisecond; ; d = min(2*d, 200*time.Millisecond) {
		res, err := c.ListTasks(fctx, &a2a1.ListTasksRequest{ContextID: contextID, PageSize: 1})
		if err == nil && len(res.Tasks) > 0 && !res.Tasks[0].Status.State.Terminal() {
			return res.Tasks[0].ID
		}
		if err == nil && len(res.Tasks) > 0 || !retry.Sleep(fctx, d) {
			return "" // over already, or not found in time
		}
	}
}

// poll follows a running task with GetTask until it ends or ctx does.
func (r *remote) poll(ctx context.Context, c *a2aclient.Client, t *taskState) error {
	d := pollMin
	for !t.done {
		if !retry.Sleep(ctx, d) {
			return ctx.Err()
		}
		d = min(2*d, pollMax)
		task, err := c.GetTask(ctx, &a2a1.GetTaskRequest{ID: t.id})
		if err != nil {
			return fmt.Errorf("following task %s: %w", t.id, err)
		}
		t.apply(task)
	}
	return nil
}

// result maps the task's end to what the model sees.
func (r *remote) result(t taskState) (axocoatl.ToolResult, error) {
	text := r.red.String(t.text())
	switch t.state {
	case "", a2a1.TaskStateCompleted: // "": the agent answered with a message
		return axocoatl.ToolResult{Content: text}, nil
	case a2a1.TaskStateInputRequired:
		return axocoatl.ToolResult{Content: "The remote agent needs more input to go on: " + text}, nil
	}
	reason := text
	if reason == "" {
		reason = "no reason given"
	}
	return axocoatl.ToolResult{}, fmt.Errorf("%w: a2a agent %s: task %s ended %s: %s", ErrTaskFailed, r.cfg.Name, t.id, stateName(t.state), reason)
}

func stateName(s a2a1.TaskState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "TASK_STATE_"))
}

// taskState gathers a call's events: the task's id and state, its
// artifacts' text and its last status or reply message, the text kept
// within limit bytes.
type taskState struct {
	id        a2a1.TaskID
	state     a2a1.TaskState
	done      bool
	artifacts []*artifactText // pointers: a Builder must not be copied once used
	byID      map[a2a1.ArtifactID]*artifactText
	used      int    // bytes of artifact text kept
	message   string // the reply message, or the last status message
	limit     int
	dropped   int // bytes of artifact text over limit
}

type artifactText struct {
	id   a2a1.ArtifactID
	text strings.Builder
}

// apply takes one event; it reports whether the task is over.
func (t *taskState) apply(ev a2a1.Event) bool {
	switch e := ev.(type) {
	case *a2a1.Message:
		// A Message ends the exchange (a2a.proto; a2a-go/v2's servers treat
		// it as final): it is the whole answer even when it names the task
		// of its execution context, which the remote may never have
		// created, so there is nothing to follow or cancel.
		t.message = partsText(e.Parts)
		if e.TaskID != "" && t.id == "" {
			t.id = e.TaskID
		}
		if !t.state.Terminal() {
			t.state = "" // answered by a message, see result
		}
		t.done = true
	case *a2a1.Task:
		t.id = e.ID
		t.artifacts, t.byID, t.used = t.artifacts[:0], nil, 0
		t.dropped = 0
		for _, a := range e.Artifacts {
			if a != nil { // "artifacts":[null] is valid JSON of every generation
				t.addArtifact(a, false)
			}
		}
		t.status(e.Status)
	case *a2a1.TaskStatusUpdateEvent:
		if t.id == "" {
			t.id = e.TaskID
		}
		t.status(e.Status)
	case *a2a1.TaskArtifactUpdateEvent:
		if t.id == "" {
			t.id = e.TaskID
		}
		if e.Artifact != nil {
			t.addArtifact(e.Artifact, e.Append)
		}
	}
	return t.done
}

func (t *taskState) status(s a2a1.TaskStatus) {
	t.state = s.State
	if s.Message != nil {
		if m := partsText(s.Message.Parts); m != "" {
			t.message = m
		}
	}
	switch s.State {
	case a2a1.TaskStateCompleted, a2a1.TaskStateFailed, a2a1.TaskStateCanceled, a2a1.TaskStateRejected,
		a2a1.TaskStateInputRequired, a2a1.TaskStateAuthRequired:
		t.done = true
	}
}

func (t *taskState) addArtifact(a *a2a1.Artifact, appendTo bool) {
	// Found by id in a map and the kept bytes counted as they come: a
	// remote may send ~100,000 artifacts within max_response_bytes, and a
	// walk over all of them per event cost minutes of CPU.
	at := t.byID[a.ID]
	if at == nil {
		if t.byID == nil {
			t.byID = make(map[a2a1.ArtifactID]*artifactText)
		}
		at = &artifactText{id: a.ID}
		t.byID[a.ID] = at
		t.artifacts = append(t.artifacts, at)
	} else if !appendTo {
		t.used -= at.text.Len()
		at.text.Reset()
	}
	s := partsText(a.Parts)
	if room := t.limit - t.used; len(s) > room {
		t.dropped += len(s) - max(room, 0)
		s = textsafe.Cut(s, max(room, 0))
	}
	at.text.WriteString(s)
	t.used += len(s)
}

// text is the answer: the artifacts' text, else the message's, with a note
// when [AgentConfig].MaxOutputBytes cut it.
func (t *taskState) text() string {
	var out string
	if len(t.artifacts) == 1 { // the usual answer, without building a list
		out = t.artifacts[0].text.String()
	} else {
		var parts []string
		for _, x := range t.artifacts {
			if s := x.text.String(); s != "" {
				parts = append(parts, s)
			}
		}
		out = strings.Join(parts, "\n")
	}
	if out == "" || (t.state != "" && t.state != a2a1.TaskStateCompleted && t.message != "") {
		out = t.message
	}
	if len(out) > t.limit {
		t.dropped += len(out) - t.limit
		out = textsafe.Cut(out, t.limit)
	}
	if t.dropped > 0 {
		out += fmt.Sprintf("\n[output cut: %d more bytes over max_output_bytes (%d)]", t.dropped, t.limit)
	}
	return out
}

// partsText is the text of parts: text as is, data as JSON, files as a
// line saying what they are.
func partsText(parts a2a1.ContentParts) string {
	if len(parts) == 1 && parts[0] != nil {
		if text, ok := parts[0].Content.(a2a1.Text); ok {
			return string(text) // the usual answer, without building a list
		}
	}
	var out []string
	for _, p := range parts {
		if p == nil {
			continue
		}
		switch c := p.Content.(type) {
		case a2a1.Text:
			out = append(out, string(c))
		case a2a1.Data:
			b, err := json.Marshal(c.Value)
			if err == nil {
				out = append(out, string(b))
			}
		case a2a1.Raw:
			out = append(out, fmt.Sprintf("[file %s: %s, %d bytes]", p.Filename, orUnknown(p.MediaType), len(c)))
		case a2a1.URL:
			out = append(out, fmt.Sprintf("[file %s: %s at %s]", p.Filename, orUnknown(p.MediaType), string(c)))
		}
	}
	return strings.Join(out, "\n")
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown type"
	}
	return s
}
