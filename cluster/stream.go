package cluster

import (
	"encoding/binary"
	"sync"
	"time"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/internal/textsafe"
)

// The events of a run on this daemon for a caller on another that listens
// (a task with flagEvents, wire.go) travel to the caller's inbox as it
// goes, in 'E' frames:
//
//	'E' | uvarint(seq) | event...      seq: 1, 2, … per task
//
//	event: 't' | str(text)                                    a text delta
//	       'c' | uvarint(index) | str(call id) | str(tool)    a tool call begins
//	       'a' | uvarint(index) | str(arguments)              a piece of its arguments
//	       's' | str(call id) | str(tool)                     a tool call runs
//	       'f' | str(call id) | str(tool) | 0 or 1 (error) | uvarint(µs)   … and returned
//	       'u' | uvarint(input) | uvarint(output) | uvarint(cached input)  a model call's usage
//
// A frame holds at most maxFrameBytes (or NATS max_payload, if smaller): a
// longer text or arguments delta is cut (on a UTF-8 boundary) across
// frames, which the caller's concatenation undoes. The first event goes at
// once; then a frame goes when it is full or frameWindow after the one
// before, whichever is first, so that a fast model's deltas are batched
// (a frame per millisecond at most, beyond the full ones) and a slow one's
// each go at once.
//
// The forwarder runs on the Engine's delivery goroutine of the run's
// events ([axocoatl.Request].OnEvent), never the model's: a publish that
// NATS cannot take at once holds up only that goroutine, and the run's
// fan-out queue (bounded, coalescing text) takes up the slack. On the
// caller's daemon the frames are read on the inbox's dispatch goroutine
// and handed to the caller's run fan-out, which never blocks either: a
// caller that stops reading gets its text coalesced there and slows
// neither daemon.
const (
	maxFrameBytes = 16 << 10
	frameWindow   = time.Millisecond
	// maxNameBytes bounds a tool call's id and tool name in a frame
	// (longer ones are cut on a UTF-8 boundary): any event fits a frame.
	maxNameBytes = 1 << 10
	// frameSlack is what a frame's header and one record's header take.
	frameSlack = 1 + 2*binary.MaxVarintLen64
)

const (
	evText      = 't'
	evToolCall  = 'c'
	evArguments = 'a'
	evStarted   = 's'
	evFinished  = 'f'
	evUsage     = 'u'
)

// forwarder sends a run's events to its caller in 'E' frames.
type forwarder struct {
	m     *Module
	reply string
	limit int // bytes per frame

	mu     sync.Mutex
	buf    []byte // the frame being filled: header and events
	seq    uint64 // frames sent
	last   time.Time
	timer  *time.Timer
	armed  bool
	closed bool
}

func (m *Module) newForwarder(reply string) *forwarder {
	f := &forwarder{m: m, reply: reply, limit: maxFrameBytes}
	if p := m.maxPayload() - 64; p < int64(f.limit) {
		f.limit = int(max(p, 4*maxNameBytes))
	}
	f.timer = time.AfterFunc(time.Hour, f.fire)
	f.timer.Stop()
	return f
}

// onEvent is the run's [axocoatl.Request].OnEvent.
func (f *forwarder) onEvent(ev agent.RunEvent) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || !f.encode(ev) {
		return
	}
	switch {
	case len(f.buf) >= f.limit-frameSlack, time.Since(f.last) >= frameWindow:
		f.flushLocked()
	case !f.armed:
		f.armed = true
		f.timer.Reset(frameWindow - time.Since(f.last))
	}
}

// encode appends ev to the frame being filled (sending it first if ev
// does not fit); false: an event of a kind this version does not send.
func (f *forwarder) encode(ev agent.RunEvent) bool {
	switch ev.Kind {
	case agent.RunDelta:
		switch ev.Delta.Kind {
		case agent.DeltaText:
			f.pieces(evText, 0, ev.Delta.Text)
		case agent.DeltaToolCall:
			f.room(2 + binary.MaxVarintLen64 + 2*(maxNameBytes+binary.MaxVarintLen64))
			f.buf = append(f.buf, evToolCall)
			f.buf = binary.AppendUvarint(f.buf, uint64(max(ev.Delta.ToolCallIndex, 0)))
			f.buf = appendStr(f.buf, textsafe.Cut(ev.Delta.ToolCallID, maxNameBytes))
			f.buf = appendStr(f.buf, textsafe.Cut(ev.Delta.ToolName, maxNameBytes))
		case agent.DeltaToolArguments:
			f.pieces(evArguments, ev.Delta.ToolCallIndex, ev.Delta.Arguments)
		default:
			return false
		}
	case agent.RunToolStarted, agent.RunToolFinished:
		f.room(3 + binary.MaxVarintLen64 + 2*(maxNameBytes+binary.MaxVarintLen64))
		code := byte(evStarted)
		if ev.Kind == agent.RunToolFinished {
			code = evFinished
		}
		f.buf = append(f.buf, code)
		f.buf = appendStr(f.buf, textsafe.Cut(ev.ToolCallID, maxNameBytes))
		f.buf = appendStr(f.buf, textsafe.Cut(ev.ToolName, maxNameBytes))
		if code == evFinished {
			isErr := byte(0)
			if ev.IsError {
				isErr = 1
			}
			f.buf = append(f.buf, isErr)
			f.buf = binary.AppendUvarint(f.buf, uint64(max(ev.Duration.Microseconds(), 0)))
		}
	case agent.RunModelUsage:
		f.room(1 + 3*binary.MaxVarintLen64)
		f.buf = append(f.buf, evUsage)
		f.buf = binary.AppendUvarint(f.buf, uint64(max(ev.Usage.InputTokens, 0)))
		f.buf = binary.AppendUvarint(f.buf, uint64(max(ev.Usage.OutputTokens, 0)))
		f.buf = binary.AppendUvarint(f.buf, uint64(max(ev.Usage.CachedInputTokens, 0)))
	default:
		return false
	}
	return true
}

// pieces appends a text or arguments delta, cut across frames to fit.
func (f *forwarder) pieces(code byte, index int, s string) {
	for first := true; first || s != ""; first = false {
		f.room(frameSlack + 2*binary.MaxVarintLen64 + 16)
		free := f.limit - len(f.buf) - (1 + 2*binary.MaxVarintLen64)
		piece := textsafe.Cut(s, free)
		f.buf = append(f.buf, code)
		if code == evArguments {
			f.buf = binary.AppendUvarint(f.buf, uint64(max(index, 0)))
		}
		f.buf = appendStr(f.buf, piece)
		s = s[len(piece):]
	}
}

// room starts a frame if none is being filled, and sends the one being
// filled first if n more bytes would not fit it.
func (f *forwarder) room(n int) {
	if len(f.buf) > 0 && len(f.buf)+n > f.limit {
		f.flushLocked()
	}
	if len(f.buf) == 0 {
		f.buf = append(f.buf, answerEvents)
		f.buf = binary.AppendUvarint(f.buf, f.seq+1)
	}
}

// flushLocked sends the frame being filled (NATS copies it: the buffer is
// reused).
func (f *forwarder) flushLocked() {
	if len(f.buf) == 0 {
		return
	}
	if err := f.m.publish(f.reply, "", f.buf); err != nil {
		f.m.log.Debug("events not sent", "error", err)
	}
	f.seq++
	f.buf = f.buf[:0]
	f.last = time.Now()
}

// fire sends what the window gathered.
func (f *forwarder) fire() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed = false
	if !f.closed {
		f.flushLocked()
	}
}

// close sends what is left; it returns the frames sent in all. No frame
// goes after it.
func (f *forwarder) close() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	f.timer.Stop()
	f.flushLocked()
	return f.seq
}

// readEvents calls emit with each event of an 'E' frame's body (after its
// code) and returns the frame's seq; ok false: malformed (the events
// before the fault were emitted).
func readEvents(b []byte, emit func(agent.RunEvent)) (seq uint64, ok bool) {
	s := string(b) // one copy, which the events' strings share
	seq, n := uvarint(s)
	if n <= 0 {
		return 0, false
	}
	s = s[n:]
	for s != "" {
		code := s[0]
		s = s[1:]
		var ev agent.RunEvent
		switch code {
		case evText:
			ev = agent.RunEvent{Kind: agent.RunDelta, Delta: agent.Delta{Kind: agent.DeltaText}}
			if ev.Delta.Text, s, ok = readStr(s); !ok {
				return seq, false
			}
		case evToolCall, evArguments:
			i, n := uvarint(s)
			if n <= 0 || i > 1<<20 {
				return seq, false
			}
			s = s[n:]
			ev = agent.RunEvent{Kind: agent.RunDelta, Delta: agent.Delta{Kind: agent.DeltaToolArguments, ToolCallIndex: int(i)}}
			if code == evToolCall {
				ev.Delta.Kind = agent.DeltaToolCall
				if ev.Delta.ToolCallID, s, ok = readStr(s); !ok {
					return seq, false
				}
				if ev.Delta.ToolName, s, ok = readStr(s); !ok {
					return seq, false
				}
			} else if ev.Delta.Arguments, s, ok = readStr(s); !ok {
				return seq, false
			}
		case evStarted, evFinished:
			ev.Kind = agent.RunToolStarted
			if ev.ToolCallID, s, ok = readStr(s); !ok {
				return seq, false
			}
			if ev.ToolName, s, ok = readStr(s); !ok {
				return seq, false
			}
			if code == evFinished {
				ev.Kind = agent.RunToolFinished
				if s == "" || s[0] > 1 {
					return seq, false
				}
				ev.IsError = s[0] == 1
				us, n := uvarint(s[1:])
				if n <= 0 {
					return seq, false
				}
				s = s[1+n:]
				ev.Duration = time.Duration(min(us, uint64(maxTimeout/time.Microsecond))) * time.Microsecond
			}
		case evUsage:
			var v [3]uint64
			for i := range v {
				x, n := uvarint(s)
				if n <= 0 {
					return seq, false
				}
				v[i], s = x, s[n:]
			}
			ev = agent.RunEvent{Kind: agent.RunModelUsage, Usage: agent.Usage{InputTokens: tokens(v[0]), OutputTokens: tokens(v[1]), CachedInputTokens: tokens(v[2])}}
		default:
			return seq, false
		}
		emit(ev)
	}
	return seq, true
}
