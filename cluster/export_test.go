package cluster

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
