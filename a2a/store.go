package a2a

import (
	"container/list"
	"context"
	"sync"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2a1 "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/internal/a2awire"
)

// outputArtifactID names the one artifact a task produces: the agent's output.
const outputArtifactID a2a03.ArtifactID = "output"

// task is one JSON-RPC task: what was asked, of whom, and how it ended.
type task struct {
	id        a2a03.TaskID
	contextID string
	agentID   string
	msg       storedMessage // the user message, with taskId and contextId filled in
	input     string        // msg rendered to text for the model

	// cancelRun ends the run's context; done is closed when the task reaches
	// a terminal state (which may come before the run has unwound).
	cancelRun context.CancelFunc
	done      chan struct{}

	// elem, size and seq belong to the store and are guarded by its mutex;
	// seq orders tasks by creation (ListTasks pages by it).
	elem *list.Element
	size int64
	seq  uint64

	mu      sync.Mutex
	state   a2a03.TaskState
	output  string
	errText string
	updated time.Time
	// usage is what the run's model calls cost, set once the run returned
	// (before finish): the final task and status carry it as metadata.
	usage *agent.Usage

	// Human input (input.go): caller is who sent the task (callerOf), the
	// only one who may answer it; prompts queue the questions its run
	// waits on (the task shows the first while input-required); asked is
	// closed and replaced each time the task shows a prompt.
	caller   string
	prompts  []*inputPrompt
	nPrompts int
	asked    chan struct{}
}

// storedMessage is the user message in the generation it came in; the other
// generation's view converts it when asked (a task sent over 0.3 read over
// 1.0, or the other way round). Exactly one field is set.
type storedMessage struct {
	v03 *a2a03.Message
	v10 *a2a1.Message
}

func (m storedMessage) asV03() *a2a03.Message {
	if m.v03 != nil {
		return m.v03
	}
	return a2awire.Message03(m.v10)
}

func (m storedMessage) asV10() *a2a1.Message {
	if m.v10 != nil {
		return m.v10
	}
	return a2awire.Message1(m.v03)
}

func newTask(id a2a03.TaskID, contextID, agentID string, msg storedMessage, input string, cancel context.CancelFunc) *task {
	return &task{
		asked:     make(chan struct{}),
		id:        id,
		contextID: contextID,
		agentID:   agentID,
		msg:       msg,
		input:     input,
		cancelRun: cancel,
		done:      make(chan struct{}),
		state:     a2a03.TaskStateSubmitted,
		updated:   time.Now(),
	}
}

// setWorking moves a submitted task to working.
func (t *task) setWorking() {
	t.mu.Lock()
	if t.state == a2a03.TaskStateSubmitted {
		t.state = a2a03.TaskStateWorking
		t.updated = time.Now()
	}
	t.mu.Unlock()
}

// finish moves the task to a terminal state once; later calls (a run
// unwinding after a cancel) change nothing and report false.
func (t *task) finish(state a2a03.TaskState, output, errText string) bool {
	t.mu.Lock()
	if t.state.Terminal() {
		t.mu.Unlock()
		return false
	}
	t.state, t.output, t.errText, t.updated = state, output, errText, time.Now()
	t.mu.Unlock()
	close(t.done)
	return true
}

// view is a consistent copy of the mutable part of a task.
type view struct {
	state   a2a03.TaskState
	output  string
	errText string
	updated time.Time
	usage   *agent.Usage
	prompt  *inputPrompt // what an input-required task asks
}

func (t *task) view() view {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.viewLocked()
}

func (t *task) viewLocked() view {
	v := view{state: t.state, output: t.output, errText: t.errText, updated: t.updated, usage: t.usage}
	if t.state == a2a03.TaskStateInputRequired && len(t.prompts) > 0 {
		v.prompt = t.prompts[0]
	}
	return v
}

// setUsage records the run's usage (before finish, so that whoever sees
// the task terminal sees it too).
func (t *task) setUsage(u agent.Usage) {
	t.mu.Lock()
	t.usage = &u
	t.mu.Unlock()
}

// metadata is the task's metadata on the wire: "usage" once the run
// returned (docs/a2a.md), nil before.
func (v view) metadata() map[string]any {
	if v.usage == nil || !v.state.Terminal() {
		return nil
	}
	return map[string]any{"usage": map[string]any{
		"input_tokens":        v.usage.InputTokens,
		"output_tokens":       v.usage.OutputTokens,
		"cached_input_tokens": v.usage.CachedInputTokens,
	}}
}

// snapshot renders the task on the wire. history < 0 keeps the whole
// history (the user message); artifacts false leaves the output out, for
// stream events that must stay small (outputs follow as artifact chunks).
func (t *task) snapshot(history int, artifacts bool) *a2a03.Task {
	v := t.view()
	out := &a2a03.Task{
		ID:        t.id,
		ContextID: t.contextID,
		Status:    t.status(v),
		Metadata:  v.metadata(),
	}
	if history != 0 {
		out.History = []*a2a03.Message{t.msg.asV03()}
	}
	if artifacts && v.state == a2a03.TaskStateCompleted {
		out.Artifacts = []*a2a03.Artifact{{
			ID:    outputArtifactID,
			Name:  "output",
			Parts: a2a03.ContentParts{a2a03.TextPart{Text: v.output}},
		}}
	}
	return out
}

// status is the task's status; a failed or canceled task says why in an
// agent message.
func (t *task) status(v view) a2a03.TaskStatus {
	ts := v.updated
	st := a2a03.TaskStatus{State: v.state, Timestamp: &ts}
	if v.prompt != nil {
		st.Message = t.promptMessage03(v.prompt)
	}
	if v.errText != "" {
		st.Message = &a2a03.Message{
			ID:        string(t.id) + "-status",
			ContextID: t.contextID,
			TaskID:    t.id,
			Role:      a2a03.MessageRoleAgent,
			Parts:     a2a03.ContentParts{a2a03.TextPart{Text: cut(v.errText, maxErrorText)}},
		}
	}
	return st
}

// taskStore keeps tasks for tasks/get, bounded by count, bytes and the age of
// finished tasks. Running tasks are never evicted (their runs are bounded by
// the agent's timeout), so the bounds may be exceeded by at most the number
// of runs in flight.
type taskStore struct {
	maxTasks int
	ttl      time.Duration
	maxBytes int64

	mu    sync.Mutex
	byID  map[a2a03.TaskID]*task
	order *list.List // of *task, oldest first
	bytes int64
	seq   uint64 // of the last task added
	// turns maps a contextId (a conversation) to the task whose run is a
	// turn of it and has not returned yet: a second message to the context
	// is refused while it runs. An entry lives from addTurn to endTurn, so
	// the map holds at most the runs in flight.
	turns map[string]*task
}

func newTaskStore(maxTasks int, ttl time.Duration, maxBytes int64) *taskStore {
	return &taskStore{
		maxTasks: maxTasks,
		ttl:      ttl,
		maxBytes: maxBytes,
		byID:     map[a2a03.TaskID]*task{},
		order:    list.New(),
		turns:    map[string]*task{},
	}
}

// addTurn stores t as the running turn of its context, unless another task
// of the context is running: then it stores nothing and returns that task.
// The check and the add are one step, so two messages to one context at
// once cannot both start.
func (s *taskStore) addTurn(t *task, size int64) (running *task) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.turns[t.contextID]; r != nil {
		return r
	}
	s.turns[t.contextID] = t
	s.addLocked(t, size)
	return nil
}

// endTurn marks t's run returned: its context takes the next message. It
// comes when the run has unwound (the Engine released the conversation),
// not when the task reached its terminal state, which a cancel reaches
// first.
func (s *taskStore) endTurn(t *task) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.turns[t.contextID] == t {
		delete(s.turns, t.contextID)
	}
}

// remove forgets t (a turn the Engine refused before it ran, answered as
// an error rather than as a task).
func (s *taskStore) remove(t *task) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removeLocked(t)
}

// add stores t, evicting what the bounds require.
func (s *taskStore) add(t *task, size int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addLocked(t, size)
}

func (s *taskStore) addLocked(t *task, size int64) {
	t.elem = s.order.PushBack(t)
	t.size = size
	s.seq++
	t.seq = s.seq
	s.byID[t.id] = t
	s.bytes += size
	s.sweepLocked(time.Now())
}

// grow accounts bytes a task gained (its output) while it is stored.
func (s *taskStore) grow(t *task, n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.elem == nil {
		return
	}
	t.size += n
	s.bytes += n
	s.sweepLocked(time.Now())
}

// get returns the task, or nil when it is unknown, evicted or expired.
func (s *taskStore) get(id a2a03.TaskID) *task {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.byID[id]
	if t == nil {
		return nil
	}
	if v := t.view(); v.state.Terminal() && time.Since(v.updated) > s.ttl {
		s.removeLocked(t)
		return nil
	}
	return t
}

// page returns up to n tasks that match keep, newest first, starting below
// sequence number before (0: from the newest); total counts every match and
// next is the sequence to continue from (0: no more). The store holds at
// most MaxTasks (plus runs in flight), which bounds the walk.
func (s *taskStore) page(before uint64, n int, keep func(*task) bool) (tasks []*task, total int, next uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for e := s.order.Back(); e != nil; e = e.Prev() {
		t := e.Value.(*task)
		if !keep(t) {
			continue
		}
		if v := t.view(); v.state.Terminal() && time.Since(v.updated) > s.ttl {
			continue // expired, swept on the next add
		}
		total++
		if before != 0 && t.seq >= before {
			continue
		}
		if len(tasks) < n {
			tasks = append(tasks, t)
		} else if next == 0 {
			next = tasks[len(tasks)-1].seq
		}
	}
	return tasks, total, next
}

// len reports how many tasks are stored (for tests).
func (s *taskStore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID)
}

// sweepLocked evicts from the oldest end: finished tasks while a bound is
// exceeded, and expired ones. It stops at the first task it must keep.
func (s *taskStore) sweepLocked(now time.Time) {
	for e := s.order.Front(); e != nil; {
		next := e.Next()
		t := e.Value.(*task)
		over := len(s.byID) > s.maxTasks || s.bytes > s.maxBytes
		v := t.view()
		switch {
		case !v.state.Terminal():
			if !over {
				return
			}
		case over || now.Sub(v.updated) > s.ttl:
			s.removeLocked(t)
		default:
			return
		}
		e = next
	}
}

func (s *taskStore) removeLocked(t *task) {
	if t.elem == nil {
		return
	}
	s.order.Remove(t.elem)
	t.elem = nil
	delete(s.byID, t.id)
	s.bytes -= t.size
}
