package httpapi

import (
	"encoding/json"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/internal/jsonio"
)

// wantsSSE reports whether the client asked for execute's answer as an
// event stream (Accept: text/event-stream).
func wantsSSE(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == "text/event-stream" {
				return true
			}
		}
	}
	return false
}

// sseExecute writes one execute's answer as Server-Sent Events
// (docs/http-api.md): delta, tool_call_started, tool_call_finished, then
// result or error. Its onEvent is the run's [axocoatl.Request].OnEvent,
// called by the Engine from one goroutine and never after ExecuteRequest
// returns, after which the handler writes the last event: the writes are
// never concurrent.
//
// Each write goes through the Engine's guard, which arms a write deadline
// (server.write_timeout): a client that stops reading fails a write after
// it, and the stream writes nothing more (the run goes on, unslowed: the
// Engine coalesces the deltas this writer is too slow for). The stream
// starts (200 and its headers) at the run's first event, so that an error
// before any is the usual JSON error with its status.
type sseExecute struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
	failed  bool
	buf     []byte // reused for every event: no allocation per delta
}

func newSSEExecute(w http.ResponseWriter) *sseExecute {
	return &sseExecute{w: w, rc: http.NewResponseController(w), buf: make([]byte, 0, 512)}
}

func (s *sseExecute) start() {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // a proxy must not hold the deltas back
	s.w.WriteHeader(http.StatusOK)
}

// onEvent writes one run event; tool-call argument deltas are not sent
// (the tool_call_started event names the call).
func (s *sseExecute) onEvent(ev agent.RunEvent) {
	if s.failed {
		return
	}
	b := s.buf[:0]
	switch ev.Kind {
	case agent.RunDelta:
		if ev.Delta.Kind != agent.DeltaText {
			return
		}
		b = append(b, "event: delta\ndata: {\"text\":"...)
		b = jsonio.AppendString(b, ev.Delta.Text)
	case agent.RunToolStarted:
		b = append(b, "event: tool_call_started\ndata: {\"id\":"...)
		b = jsonio.AppendString(b, ev.ToolCallID)
		b = append(b, ",\"name\":"...)
		b = jsonio.AppendString(b, ev.ToolName)
	case agent.RunToolFinished:
		b = append(b, "event: tool_call_finished\ndata: {\"id\":"...)
		b = jsonio.AppendString(b, ev.ToolCallID)
		b = append(b, ",\"name\":"...)
		b = jsonio.AppendString(b, ev.ToolName)
		b = append(b, ",\"is_error\":"...)
		b = strconv.AppendBool(b, ev.IsError)
		b = append(b, ",\"duration_ms\":"...)
		b = strconv.AppendInt(b, ev.Duration.Milliseconds(), 10)
	default:
		return
	}
	b = append(b, "}\n\n"...)
	s.buf = b
	s.write(b)
}

// final writes the result or error event, v as JSON.
func (s *sseExecute) final(name string, v any) {
	if s.failed {
		return
	}
	data, err := json.Marshal(v)
	if err != nil {
		return
	}
	b := append(s.buf[:0], "event: "...)
	b = append(b, name...)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	s.write(append(b, "\n\n"...))
}

func (s *sseExecute) write(b []byte) {
	s.start()
	if _, err := s.w.Write(b); err != nil {
		s.failed = true
		return
	}
	if err := s.rc.Flush(); err != nil {
		s.failed = true
	}
}
