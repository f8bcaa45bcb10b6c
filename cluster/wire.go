package cluster

import (
	"encoding/binary"
	"math"
	"time"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/internal/clustersig"
)

// The wire form of a task (the body of a message on exec.<agent id>) and of
// its answers: a few length-prefixed fields, then the input, output or
// error text as is. No JSON and no NATS headers to write and read on the
// hot path (they cost a tenth of a round trip between two daemons).
//
//	task:   0x01 | str(task id) | str(from) | str(source) | uvarint(timeout ms) | input
//	        0x02 | str(task id) | str(from) | str(source) | uvarint(timeout ms) |
//	               str(conversation id) | flags | input          (a conversation turn)
//	answer: 'A' | node                                          (accepted)
//	        'D' | uvarint(duration ms) | str(kind) | output or error text
//	        'C' | str(conversation id) | uvarint(duration ms) | str(kind) | text
//	        'E' | uvarint(frame seq) | event...                 (events, see stream.go)
//	        'U' | uvarint(frames) | uvarint(input tokens) | uvarint(output tokens) |
//	              uvarint(cached input tokens) | a 'D' or 'C' answer
//
// str(s) is uvarint(len(s)), then s. from is the calling daemon. timeout
// is what was left of the caller's deadline when it sent the task (a
// duration, not a time: clocks of two hosts differ); 0: none but the
// agent's own. An answer Accepted names the daemon that took the task,
// sent once the run has lasted acceptAfter, then every heartbeat interval
// while it runs; Done ends it, its kind "" when the run succeeded (the text
// is then the output), else the error's kind (kindFailed, kindBusy, …).
//
// A turn of a conversation (Request.ConversationID set) is a 0x02 task:
// the conversation id and flags (flagCreate: Request.CreateConversation)
// before the input; its answer is 'C', a Done that carries the
// conversation id back (Result.ConversationID: the one a "new" started).
// A task without a conversation stays 0x01, so that one-shot tasks run
// across daemons of versions before and after; a daemon before 0x02
// answers a turn as malformed, which the caller reports as the version
// mismatch it is (errOlderTurns).
//
// A caller that listens to the run (Request.OnEvent, set when the task
// starts) announces it with flagEvents, in a 0x02 frame (a one-shot task's
// conversation id is then ""): the daemon running it streams the run's
// events to the caller's inbox in 'E' frames as it goes, and ends with a
// 'U' answer, its Done with the run's usage and the number of 'E' frames
// sent before it. A daemon of a version before events answers such a task
// as malformed without running it; the caller then sends it again without
// the flag (as the frame that daemon reads), and the run, not streamed,
// answers as before. Only a caller that announced the capability is sent
// 'E' and 'U' answers.
const (
	taskV1           = 0x01
	taskConversation = 0x02
	answerAccepted   = 'A'
	answerDone       = 'D'
	answerDoneConv   = 'C'

	answerEvents = 'E'
	answerUsage  = 'U'

	flagCreate = 0x01
	flagEvents = 0x02
	knownFlags = flagCreate | flagEvents
)

// task is a task as read from the wire.
type task struct {
	taskID, from, source, input string
	timeoutMS                   int64 // 0: none
	conversationID              string
	create                      bool
	// events: the caller listens (flagEvents).
	events bool
}

func (t task) encode() []byte {
	b := make([]byte, 0, clustersig.SealOverhead+2+4*binary.MaxVarintLen64+len(t.taskID)+len(t.from)+len(t.source)+binary.MaxVarintLen64+len(t.conversationID)+len(t.input))
	turn := t.conversationID != "" || t.create || t.events
	if turn {
		b = append(b, taskConversation)
	} else {
		b = append(b, taskV1)
	}
	b = appendStr(b, t.taskID)
	b = appendStr(b, t.from)
	b = appendStr(b, t.source)
	b = binary.AppendUvarint(b, uint64(max(t.timeoutMS, 0)))
	if turn {
		b = appendStr(b, t.conversationID)
		flags := byte(0)
		if t.create {
			flags |= flagCreate
		}
		if t.events {
			flags |= flagEvents
		}
		b = append(b, flags)
	}
	return append(b, t.input...)
}

// decodeTask reads a task; ok false: malformed (or of another version).
// Its strings share one copy of b.
func decodeTask(b []byte) (t task, ok bool) {
	if len(b) == 0 || b[0] != taskV1 && b[0] != taskConversation {
		return t, false
	}
	s := string(b[1:])
	if t.taskID, s, ok = readStr(s); !ok {
		return t, false
	}
	if t.from, s, ok = readStr(s); !ok {
		return t, false
	}
	if t.source, s, ok = readStr(s); !ok {
		return t, false
	}
	ms, n := uvarint(s)
	if n <= 0 {
		return t, false
	}
	t.timeoutMS = int64(min(ms, math.MaxInt64))
	s = s[n:]
	if b[0] == taskConversation {
		if t.conversationID, s, ok = readStr(s); !ok || s == "" || s[0]&^knownFlags != 0 {
			return t, false // truncated, or flags this version does not know
		}
		t.create = s[0]&flagCreate != 0
		t.events = s[0]&flagEvents != 0
		s = s[1:]
	}
	t.input = s
	return t, true
}

// encode is r's wire form.
func (r execReply) encode() []byte {
	if r.Accepted != "" {
		return append([]byte{answerAccepted}, r.Accepted...)
	}
	kind, text := "", r.Output
	if r.Error != "" {
		kind, text = r.Kind, r.Error
		if kind == "" {
			kind = kindFailed
		}
	}
	b := make([]byte, 0, clustersig.SealOverhead+1+7*binary.MaxVarintLen64+len(r.ConversationID)+len(kind)+len(text))
	if r.withUsage {
		b = append(b, answerUsage)
		b = binary.AppendUvarint(b, r.Frames)
		b = binary.AppendUvarint(b, uint64(max(r.Usage.InputTokens, 0)))
		b = binary.AppendUvarint(b, uint64(max(r.Usage.OutputTokens, 0)))
		b = binary.AppendUvarint(b, uint64(max(r.Usage.CachedInputTokens, 0)))
	}
	if r.ConversationID != "" {
		b = append(b, answerDoneConv)
		b = appendStr(b, r.ConversationID)
	} else {
		b = append(b, answerDone)
	}
	b = binary.AppendUvarint(b, uint64(max(r.DurationMS, 0)))
	b = appendStr(b, kind)
	return append(b, text...)
}

// decodeReply reads an answer; ok false: not one.
func decodeReply(b []byte) (r execReply, ok bool) {
	if len(b) == 0 {
		return r, false
	}
	switch b[0] {
	case answerUsage:
		s := string(b[1:])
		var v [4]uint64
		for i := range v {
			x, n := uvarint(s)
			if n <= 0 {
				return r, false
			}
			v[i], s = x, s[n:]
		}
		if s == "" || s[0] != answerDone && s[0] != answerDoneConv {
			return r, false
		}
		if r, ok = decodeReply([]byte(s)); !ok {
			return r, false
		}
		r.withUsage, r.Frames = true, v[0]
		r.Usage = agent.Usage{InputTokens: tokens(v[1]), OutputTokens: tokens(v[2]), CachedInputTokens: tokens(v[3])}
		return r, true
	case answerAccepted:
		if len(b) == 1 {
			return r, false
		}
		return execReply{Accepted: string(b[1:])}, true
	case answerDone, answerDoneConv:
		s := string(b[1:]) // one copy, which kind and text share
		var conv string
		if b[0] == answerDoneConv {
			var ok bool
			if conv, s, ok = readStr(s); !ok {
				return r, false
			}
		}
		ms, n := uvarint(s)
		if n <= 0 {
			return r, false
		}
		kind, rest, ok := readStr(s[n:])
		if !ok {
			return r, false
		}
		// What a Duration holds: a peer's invention must not wrap.
		r = execReply{Done: true, DurationMS: int64(min(ms, uint64(maxTimeout/time.Millisecond))), ConversationID: conv}
		if kind == "" {
			r.Output = rest
			return r, true
		}
		r.Kind, r.Error = kind, rest
		if r.Error == "" {
			r.Error = "the remote run failed (" + kind + ")"
		}
		return r, true
	}
	return r, false
}

// tokens is a count read from a peer, kept within an int64.
func tokens(x uint64) int64 { return int64(min(x, math.MaxInt64)) }

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// readStr reads a str field of s; ok false: truncated or too long.
func readStr(s string) (str, rest string, ok bool) {
	n, k := uvarint(s)
	if k <= 0 || n > uint64(len(s)-k) {
		return "", "", false
	}
	s = s[k:]
	return s[:n], s[n:], true
}

// uvarint is binary.Uvarint of a string: the value and the bytes read
// (0: too short, < 0: overflow).
func uvarint(s string) (uint64, int) {
	var x uint64
	var shift uint
	for i := 0; i < len(s); i++ {
		if i == binary.MaxVarintLen64 {
			return 0, -(i + 1) // overflow
		}
		c := s[i]
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				return 0, -(i + 1) // overflow
			}
			return x | uint64(c)<<shift, i + 1
		}
		x |= uint64(c&0x7f) << shift
		shift += 7
	}
	return 0, 0
}
