package cluster

import "github.com/axocoatl/axocoatl-go/agent"

// TaskBody is a task's wire form, for tests that play a peer.
func TaskBody(id, from, source string, timeoutMS int64, input string) []byte {
	return task{taskID: id, from: from, source: source, timeoutMS: timeoutMS, input: input}.encode()
}

// ReadAnswer reads an answer's wire form: the daemon that accepted the task,
// or the kind ("" for success) and text of its end.
func ReadAnswer(b []byte) (accepted, kind, text string, ok bool) {
	r, ok := decodeReply(b)
	if r.Error != "" {
		return r.Accepted, r.Kind, r.Error, ok
	}
	return r.Accepted, r.Kind, r.Output, ok
}

// Workers is how many task workers exist now.
func (m *Module) Workers() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.workers
}

// TurnBody is a conversation turn's wire form.
func TurnBody(id, from, source, conversationID string, create bool, input string) []byte {
	return task{taskID: id, from: from, source: source, conversationID: conversationID, create: create, input: input}.encode()
}

// DoneBody is the wire form of a run's end with an error of kind.
func DoneBody(kind, text string) []byte {
	return execReply{Done: true, Kind: kind, Error: text}.encode()
}

// ReadConversation is the conversation id an answer carries.
func ReadConversation(b []byte) string {
	r, _ := decodeReply(b)
	return r.ConversationID
}

// Tombstones is how many cancels of tasks not yet seen are remembered, and
// whether the one from from for taskID is among them.
func (m *Module) Tombstones(from, taskID string) (n int, has bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, has = m.tombs[tombKey(from, taskID)]
	return len(m.tombs), has
}

// TaskWantsEvents reports whether a task's wire form announces that its
// caller listens (flagEvents); ok false: not a task.
func TaskWantsEvents(b []byte) (events, ok bool) {
	t, ok := decodeTask(b)
	return t.events, ok
}

// MaxFrameBytes bounds an event frame.
const MaxFrameBytes = maxFrameBytes

// EventFrame reads an event frame: its seq and events; ok false: not one
// or malformed.
func EventFrame(b []byte) (seq uint64, events []agent.RunEvent, ok bool) {
	if len(b) == 0 || b[0] != answerEvents {
		return 0, nil, false
	}
	seq, ok = readEvents(b[1:], func(ev agent.RunEvent) { events = append(events, ev) })
	return seq, events, ok
}

// EncodeEvents is the event frame seq of events, as a forwarder with an
// unbounded frame writes it.
func EncodeEvents(seq uint64, events ...agent.RunEvent) []byte {
	f := &forwarder{limit: 1 << 30, seq: seq - 1, closed: false}
	for _, ev := range events {
		f.encode(ev)
	}
	return f.buf
}

// OutputBody is the wire form of a run's successful end with output.
func OutputBody(output string) []byte {
	return execReply{Done: true, Output: output}.encode()
}
