package mcpserver

import (
	"context"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axocoatl/axocoatl-go/agent"
)

// Bounds of the text a call's progress carries (a tools/call with a
// progressToken: the agent's answer as the model writes it).
const (
	// ProgressTextBytes bounds the message of a text progress notification:
	// the last 4 KiB of the answer so far, cut on a UTF-8 boundary (so
	// possibly a few bytes less). It is also what the reporter keeps of the
	// answer, whatever its length.
	ProgressTextBytes = 4 << 10
	// ProgressTextInterval is the shortest time between two text progress
	// notifications: the deltas in between are coalesced into the next
	// one, never one notification per token.
	ProgressTextInterval = 200 * time.Millisecond
)

// progressBuffer bounds the tool messages one call's progress reporter
// has not sent yet. A burst of tool events beyond it costs progress
// messages, never the run.
const progressBuffer = 64

// answerTail is the end of the answer a run's model is writing, as its
// text deltas arrive ([axocoatl.Request].OnEventSync), and the run's tool
// calls started and finished, not yet reported; the progress reporter
// reads the text at most every [ProgressTextInterval], the tool messages
// as they come. The lock is held for an append or a copy, never across
// I/O.
type answerTail struct {
	mu  sync.Mutex
	buf []byte
	// tools are the messages of tool events not yet sent (at most
	// progressBuffer; dropped counts those beyond).
	tools   []string
	dropped int
	// fresh: a model call ended, so the next text starts a new answer.
	fresh bool
	// seq counts the text deltas; sent is seq as of the last notification.
	seq  uint64
	wake chan struct{}
}

func newAnswerTail() *answerTail { return &answerTail{wake: make(chan struct{}, 1)} }

// observe is the run's [axocoatl.Request].OnEventSync: called on the
// model's goroutine, one call at a time, it must not block (it does not: a
// short lock, an append to at most 2*ProgressTextBytes and a non-blocking
// send).
func (a *answerTail) observe(ev agent.RunEvent) {
	switch {
	case ev.Kind == agent.RunToolStarted || ev.Kind == agent.RunToolFinished:
		msg := "calling tool " + ev.ToolName
		if ev.Kind == agent.RunToolFinished {
			msg = "tool " + ev.ToolName + " done"
			if ev.IsError {
				msg = "tool " + ev.ToolName + " failed"
			}
		}
		a.mu.Lock()
		if len(a.tools) < progressBuffer {
			a.tools = append(a.tools, msg)
		} else {
			a.dropped++
		}
		a.mu.Unlock()
		a.signal()
		return
	case ev.Kind == agent.RunModelUsage:
		a.mu.Lock()
		a.fresh = true
		a.mu.Unlock()
		return
	case ev.Kind != agent.RunDelta || ev.Delta.Kind != agent.DeltaText || ev.Delta.Text == "":
		return
	}
	a.mu.Lock()
	if a.fresh {
		a.buf, a.fresh = a.buf[:0], false
	}
	a.buf = append(a.buf, ev.Delta.Text...)
	// Keep at most twice the bound, so a long answer costs
	// 2*ProgressTextBytes of memory and an amortised copy.
	if len(a.buf) > 2*ProgressTextBytes {
		n := copy(a.buf, a.buf[len(a.buf)-ProgressTextBytes:])
		a.buf = a.buf[:n]
	}
	a.seq++
	a.mu.Unlock()
	a.signal()
}

// signal wakes the reporter, never blocking.
func (a *answerTail) signal() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// takeTools returns the tool messages not sent yet, in order.
func (a *answerTail) takeTools() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.tools) == 0 {
		return nil
	}
	out := a.tools
	a.tools = nil
	return out
}

// take returns the text so far (its last ProgressTextBytes, from a rune
// start) and whether it grew since the last take.
func (a *answerTail) take(last *uint64) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.seq == *last {
		return "", false
	}
	*last = a.seq
	return lastRunes(a.buf, ProgressTextBytes), true
}

// held is how many bytes of text the tail holds (for the bound's test).
func (a *answerTail) held() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.buf)
}

// lastRunes is the end of b, at most max bytes, starting on a rune: a cut
// inside a multi-byte character drops its leading continuation bytes.
func lastRunes(b []byte, max int) string {
	if len(b) > max {
		b = b[len(b)-max:]
		for i := 0; i < utf8.UTFMax && len(b) > 0 && !utf8.RuneStart(b[0]); i++ {
			b = b[1:]
		}
	}
	return string(b)
}

// reportProgress sends notifications/progress for the call with this token
// while the run goes: once when it starts, for each tool the run calls and
// finishes, every ProgressInterval, and the text of the answer so far at
// most every [ProgressTextInterval] (text, fed with both by the run's
// OnEventSync: no subscription to the lattice, whose tool events of every
// task each reporter would decode).
// All come from one goroutine, so the progress value increases. stop ends
// the reporter and returns after its last notification (the answer's last
// text among them), so none can follow the call's result.
func (s *Server) reportProgress(ctx context.Context, ss *mcp.ServerSession, token any, agentID, taskID string, text *answerTail) (stop func()) {
	// Notifications go out with the request's ctx: its values are how the
	// go-sdk routes them to the call's own HTTP stream, and it ends only
	// when the call is cancelled. finish says the run is over.
	finish := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var progress float64
		notify := func(msg string) {
			progress++
			err := ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: progress, Message: msg})
			if err != nil && ctx.Err() == nil {
				s.log.Debug("progress notification failed", "task", taskID, "error", err)
			}
		}
		notify(fmt.Sprintf("agent %s started task %s", agentID, taskID))

		var tick <-chan time.Time
		if s.cfg.ProgressInterval > 0 {
			t := time.NewTicker(s.cfg.ProgressInterval)
			defer t.Stop()
			tick = t.C
		}
		// Text: a wake starts the coalescing timer unless one runs; when
		// it fires the text so far goes out (one notification for all the
		// deltas of the interval), and the next wake re-arms it.
		var (
			sentSeq  uint64
			textWake <-chan struct{}
			textDue  <-chan time.Time
			textT    *time.Timer
			lastText time.Time
		)
		if text != nil {
			textWake = text.wake
			defer func() {
				if textT != nil {
					textT.Stop()
				}
			}()
		}
		// sendTools reports the run's tool events not sent yet: they come
		// with the text through the run's observer, in the run's order,
		// and go at once (never through the text's timer); sending them
		// before any text keeps "calling tool" ahead of the answer it
		// led to.
		sendTools := func() {
			for _, msg := range text.takeTools() {
				notify(msg)
			}
		}
		sendText := func() {
			sendTools()
			if msg, grew := text.take(&sentSeq); grew {
				notify(msg)
				lastText = time.Now()
			}
		}
		start := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-finish:
				// The run's OnEventSync calls are over (ExecuteRequest
				// returned): its tool events and its text are whole.
				if text != nil {
					sendText()
				}
				return
			case <-textWake:
				sendTools()
				if textDue == nil {
					wait := ProgressTextInterval - time.Since(lastText)
					if wait <= 0 {
						// The first text, or the first after a quiet
						// interval: at once, not through a timer.
						sendText()
						continue
					}
					if textT == nil {
						textT = time.NewTimer(wait)
					} else {
						textT.Reset(wait)
					}
					textDue = textT.C
				}
			case <-textDue:
				textDue = nil
				sendText()
			case <-tick:
				notify(fmt.Sprintf("agent %s running for %s", agentID, time.Since(start).Round(time.Second)))
			}
		}
	}()
	return func() {
		close(finish)
		<-done
	}
}
