package cluster

import (
	"encoding/binary"
	"math"
	"time"
)

// The wire form of a task (the body of a message on exec.<agent id>) and of
// its answers: a few length-prefixed fields, then the input, output or
// error text as is. No JSON and no NATS headers to write and read on the
// hot path (they cost a tenth of a round trip between two daemons).
//
//	task:   0x01 | str(task id) | str(from) | str(source) | uvarint(timeout ms) | input
//	answer: 'A' | node                                          (accepted)
//	        'D' | uvarint(duration ms) | str(kind) | output or error text
//
// str(s) is uvarint(len(s)), then s. from is the calling daemon. timeout
// is what was left of the caller's deadline when it sent the task (a
// duration, not a time: clocks of two hosts differ); 0: none but the
// agent's own. An answer Accepted names the daemon that took the task,
// sent once the run has lasted acceptAfter, then every heartbeat interval
// while it runs; Done ends it, its kind "" when the run succeeded (the text
// is then the output), else the error's kind (kindFailed, kindBusy, …).
const (
	taskV1         = 0x01
	answerAccepted = 'A'
	answerDone     = 'D'
)

// task is a task as read from the wire.
type task struct {
	taskID, from, source, input string
	timeoutMS                   int64 // 0: none
}

func (t task) encode() []byte {
	b := make([]byte, 0, 1+3*binary.MaxVarintLen64+len(t.taskID)+len(t.from)+len(t.source)+binary.MaxVarintLen64+len(t.input))
	b = append(b, taskV1)
	b = appendStr(b, t.taskID)
	b = appendStr(b, t.from)
	b = appendStr(b, t.source)
	b = binary.AppendUvarint(b, uint64(max(t.timeoutMS, 0)))
	return append(b, t.input...)
}

// decodeTask reads a task; ok false: malformed (or of another version).
// Its strings share one copy of b.
func decodeTask(b []byte) (t task, ok bool) {
	if len(b) == 0 || b[0] != taskV1 {
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
	t.input = s[n:]
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
	b := make([]byte, 0, 1+2*binary.MaxVarintLen64+len(kind)+len(text))
	b = append(b, answerDone)
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
	case answerAccepted:
		if len(b) == 1 {
			return r, false
		}
		return execReply{Accepted: string(b[1:])}, true
	case answerDone:
		s := string(b[1:]) // one copy, which kind and text share
		ms, n := uvarint(s)
		if n <= 0 {
			return r, false
		}
		kind, rest, ok := readStr(s[n:])
		if !ok {
			return r, false
		}
		// What a Duration holds: a peer's invention must not wrap.
		r = execReply{Done: true, DurationMS: int64(min(ms, uint64(maxTimeout/time.Millisecond)))}
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
