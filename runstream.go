package axocoatl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/axocoatl/axocoatl-go/agent"
)

// Bounds of a run's fan-out ([Engine.FollowRun], [Request].OnEvent).
const (
	// DefaultMaxRunListeners is Options.MaxRunListeners when zero.
	DefaultMaxRunListeners = 16
	// RunListenerBuffer is how many events one listener may have queued.
	// Past it the listener's text deltas are coalesced into one pending
	// text, and its other events are dropped (counted by
	// [RunSubscription.Dropped]).
	RunListenerBuffer = 256
	// RunListenerTextBytes bounds the coalesced text one listener may have
	// pending; text past it is dropped (counted).
	RunListenerTextBytes = 64 << 10
)

// ErrTaskNotRunning: [Engine.FollowRun] was given a task that is not
// running here (unknown, finished, or run by another daemon for a caller
// of another: a remote run this Engine's caller started is followable
// here).
var ErrTaskNotRunning = errors.New("task not running")

// ErrTooManyListeners: the run has Options.MaxRunListeners listeners
// already.
var ErrTooManyListeners = errors.New("too many listeners on the run")

// runCast is the fan-out of one run's [agent.RunEvent] values to its
// listeners. The model's goroutine publishes and never waits for a
// listener: each has a bounded queue of its own, filled under one short
// lock (no I/O, no user code under it), and is woken by a non-blocking
// send.
type runCast struct {
	max int
	// agentID is the run's agent: FollowRun shows the run only to a
	// caller who sees it.
	agentID string
	// n is len(subs), read without the lock so that a run nobody follows
	// pays one atomic load per event.
	n     atomic.Int32
	mu    sync.Mutex
	subs  []*RunSubscription
	ended bool
	// syncMu serialises the calls of sync, the [Request].OnEventSync of
	// the run's caller (nil: none, or no more), called as each event is
	// observed until the run ends; hasSync says whether it is set, without
	// the lock. syncMu is taken before mu, never after.
	syncMu  sync.Mutex
	sync    func(agent.RunEvent)
	hasSync atomic.Bool
	// onPanic reports a panic of sync (which is then called no more).
	onPanic func(v any)
}

func newRunCast(max int, agentID string) *runCast {
	return &runCast{max: max, agentID: agentID}
}

// observe is the run's [agent.Observer].
func (c *runCast) observe(ev agent.RunEvent) {
	if c.n.Load() == 0 {
		return
	}
	// The caller's own observer first: it is the door waiting to write.
	if c.hasSync.Load() {
		c.syncMu.Lock()
		if c.sync != nil {
			c.callSync(ev)
		}
		c.syncMu.Unlock()
	}
	c.mu.Lock()
	for _, s := range c.subs {
		s.push(ev)
	}
	c.mu.Unlock()
}

// callSync hands ev to the caller's OnEventSync; c.syncMu held. A panic (a
// door's code) is contained: reported, and that observer is called no
// more; the run goes on.
func (c *runCast) callSync(ev agent.RunEvent) {
	defer func() {
		if v := recover(); v != nil {
			c.dropSync()
			c.onPanic(v)
		}
	}()
	c.sync(ev)
}

// dropSync ends the calls of the OnEventSync observer; c.syncMu held.
func (c *runCast) dropSync() {
	c.sync = nil
	c.hasSync.Store(false)
	c.mu.Lock()
	c.n.Store(c.listeners())
	c.mu.Unlock()
}

// listeners is what n holds: the subscriptions and the OnEventSync
// observer; c.mu held.
func (c *runCast) listeners() int32 {
	n := int32(len(c.subs))
	if c.hasSync.Load() {
		n++
	}
	return n
}

// listenSync makes f the run's OnEventSync observer; onPanic reports a
// panic of f. Called before the run starts.
func (c *runCast) listenSync(f func(agent.RunEvent), onPanic func(v any)) {
	c.syncMu.Lock()
	defer c.syncMu.Unlock()
	c.sync, c.onPanic = f, onPanic
	c.hasSync.Store(true)
	c.mu.Lock()
	c.n.Store(c.listeners())
	c.mu.Unlock()
}

func (c *runCast) subscribe() (*RunSubscription, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return nil, ErrTaskNotRunning
	}
	if len(c.subs) >= c.max {
		return nil, fmt.Errorf("%w: %d (MaxRunListeners)", ErrTooManyListeners, c.max)
	}
	s := &RunSubscription{c: c, ring: make([]agent.RunEvent, RunListenerBuffer), wake: make(chan struct{}, 1)}
	c.subs = append(c.subs, s)
	c.n.Store(c.listeners())
	return s, nil
}

// end marks the run over: each listener gets what it has queued, then
// io.EOF.
func (c *runCast) end() {
	// After a call in flight returns, OnEventSync is called no more: the
	// caller's ExecuteRequest returns after this.
	c.syncMu.Lock()
	if c.hasSync.Load() {
		c.dropSync()
	}
	c.syncMu.Unlock()
	c.mu.Lock()
	c.ended = true
	for _, s := range c.subs {
		s.signal()
	}
	c.mu.Unlock()
}

// RunSubscription follows one run's events ([Engine.FollowRun]): deltas
// of the model's answers, tool calls started and finished, each model
// call's usage, from when it joined until the run ends. Its queue is
// bounded ([RunListenerBuffer], [RunListenerTextBytes]): a reader that
// falls behind gets text deltas coalesced and, far behind, loses events
// (counted by Dropped); it never slows the run. Call Close when done with
// it before the run ends.
type RunSubscription struct {
	c *runCast
	// Guarded by c.mu.
	ring       []agent.RunEvent
	head, size int
	// pending is text coalesced after the ring's events (the ring was
	// full), delivered as one text delta once the ring drains.
	pending   []byte
	coalesced uint64
	dropped   uint64
	closed    bool
	wake      chan struct{}
}

func (s *RunSubscription) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// push queues ev; c.mu held.
func (s *RunSubscription) push(ev agent.RunEvent) {
	if s.closed {
		return
	}
	text := ev.Kind == agent.RunDelta && ev.Delta.Kind == agent.DeltaText
	free := len(s.ring) - s.size
	switch {
	case text && (len(s.pending) > 0 || free == 0):
		if len(s.pending)+len(ev.Delta.Text) > RunListenerTextBytes {
			s.dropped++
			return
		}
		s.pending = append(s.pending, ev.Delta.Text...)
		s.coalesced++
	case len(s.pending) == 0 && free > 0:
		s.put(ev)
	case len(s.pending) > 0 && free >= 2:
		// The coalesced text comes first: order is kept.
		s.flushPending()
		s.put(ev)
	default:
		s.dropped++
		return
	}
	s.signal()
}

func (s *RunSubscription) put(ev agent.RunEvent) {
	s.ring[(s.head+s.size)%len(s.ring)] = ev
	s.size++
}

func (s *RunSubscription) flushPending() {
	s.put(agent.RunEvent{Kind: agent.RunDelta, Delta: agent.Delta{Kind: agent.DeltaText, Text: string(s.pending)}})
	s.pending = s.pending[:0]
}

// take returns the next queued event; c.mu held.
func (s *RunSubscription) take() (agent.RunEvent, bool) {
	if s.size == 0 && len(s.pending) > 0 {
		s.flushPending()
	}
	if s.size == 0 {
		return agent.RunEvent{}, false
	}
	ev := s.ring[s.head]
	s.ring[s.head] = agent.RunEvent{} // let the strings go
	s.head = (s.head + 1) % len(s.ring)
	s.size--
	return ev, true
}

// Next returns the run's next event, waiting for it within ctx. After the
// run ended and every queued event was returned it gives io.EOF; after
// Close, [ErrTaskNotRunning].
func (s *RunSubscription) Next(ctx context.Context) (agent.RunEvent, error) {
	for {
		s.c.mu.Lock()
		ev, ok := s.take()
		ended, closed := s.c.ended, s.closed
		s.c.mu.Unlock()
		switch {
		case closed:
			return agent.RunEvent{}, ErrTaskNotRunning
		case ok:
			return ev, nil
		case ended:
			return agent.RunEvent{}, io.EOF
		}
		select {
		case <-s.wake:
		case <-ctx.Done():
			return agent.RunEvent{}, ctx.Err()
		}
	}
}

// Coalesced is how many text deltas were merged into an earlier one
// because the reader was behind.
func (s *RunSubscription) Coalesced() uint64 {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return s.coalesced
}

// Dropped is how many events were lost because the reader was further
// behind than the bounds ([RunListenerBuffer], [RunListenerTextBytes]).
func (s *RunSubscription) Dropped() uint64 {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return s.dropped
}

// Close leaves the run, freeing the listener's slot and queue. It is safe
// to call more than once and from any goroutine.
func (s *RunSubscription) Close() {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	s.ring, s.pending, s.size = nil, nil, 0
	for i, x := range c.subs {
		if x == s {
			c.subs = append(c.subs[:i], c.subs[i+1:]...)
			break
		}
	}
	c.n.Store(c.listeners())
	s.signal()
}

// FollowRun joins the run of task taskID, running on this Engine, from
// now on: the subscription gets its events as they happen (nothing from
// before it joined) and io.EOF when the run ends. A door uses it to let a
// client attach to a task it did not start (A2A's SubscribeToTask). A run
// takes at most Options.MaxRunListeners listeners ([ErrTooManyListeners]);
// a task not running here gives [ErrTaskNotRunning]. A model call is
// streamed only when the run has a listener as it starts (a run nobody
// follows asks its provider for a plain answer, as before streaming): a
// listener that joins during a call gets the deltas of the calls after it,
// the tool events and usage at once. A task of an agent on another daemon
// (a RemoteRun) is followable here too; it gets that daemon's run's
// events only when it had a listener (OnEvent) as it started. A caller
// whose identity (ctx's [Identity]) does not see the run's agent is told
// ErrTaskNotRunning, as for a task that does not exist.
func (e *Engine) FollowRun(ctx context.Context, taskID string) (*RunSubscription, error) {
	e.liveMu.Lock()
	c := e.live[taskID]
	e.liveMu.Unlock()
	if c == nil || !IdentityFrom(ctx).SeesAgent(c.agentID) {
		return nil, fmt.Errorf("%w: %q", ErrTaskNotRunning, taskID)
	}
	s, err := c.subscribe()
	if err != nil {
		return nil, fmt.Errorf("task %q: %w", taskID, err)
	}
	return s, nil
}

// startCast registers the fan-out of a run under its task id; false when
// a run under that id is running (its events and its followers are its
// own: ExecuteRequest refuses the second with ErrTaskExists).
func (e *Engine) startCast(taskID, agentID string) (*runCast, bool) {
	c := newRunCast(e.maxListeners, agentID)
	e.liveMu.Lock()
	defer e.liveMu.Unlock()
	if _, dup := e.live[taskID]; dup {
		return nil, false
	}
	e.live[taskID] = c
	return c, true
}

// endCast ends c, the fan-out of taskID's run, and frees the id; a
// second call does nothing more.
func (e *Engine) endCast(taskID string, c *runCast) {
	e.liveMu.Lock()
	if e.live[taskID] == c {
		delete(e.live, taskID)
	}
	e.liveMu.Unlock()
	c.end()
}

// deliver calls onEvent with each event of s, in order, from one
// goroutine, until the run ends; done is closed after the last call. A
// panic of onEvent (a door's code) stops the delivery, logged, not the
// process.
func (e *Engine) deliver(s *RunSubscription, onEvent func(agent.RunEvent), req *Request, done chan<- struct{}) {
	defer close(done)
	defer s.Close()
	defer func() {
		if v := recover(); v != nil {
			e.log.Error("Request.OnEvent panicked", "agent", req.AgentID, "task", req.TaskID, "panic", fmt.Sprint(v))
		}
	}()
	for {
		ev, err := s.Next(context.Background())
		if err != nil {
			return
		}
		onEvent(ev)
	}
}

// syncPanicked logs a panic of req's OnEventSync (a door's code).
func (e *Engine) syncPanicked(req *Request) func(v any) {
	return func(v any) {
		e.log.Error("Request.OnEventSync panicked", "agent", req.AgentID, "task", req.TaskID, "panic", fmt.Sprint(v))
	}
}

// listenedModel streams a model call only when the run has a listener
// when the call starts: a run nobody follows (most tasks of most doors)
// asks its provider for a plain answer, as it did before streaming, with
// none of a stream's cost or its failure modes (servers that refuse
// stream options, proxies that buffer SSE).
type listenedModel struct {
	agent.Model
	stream agent.Streamer
	c      *runCast
}

// listened is m, streamed only while c has listeners; m itself when it
// does not stream.
func listened(m agent.Model, c *runCast) agent.Model {
	s, ok := m.(agent.Streamer)
	if !ok {
		return m
	}
	return &listenedModel{Model: m, stream: s, c: c}
}

// GenerateStream implements [agent.Streamer].
func (m *listenedModel) GenerateStream(ctx context.Context, req *agent.Request, emit func(agent.Delta)) (*agent.Response, error) {
	if m.c.n.Load() == 0 {
		return m.Model.Generate(ctx, req)
	}
	return m.stream.GenerateStream(ctx, req, emit)
}

// MaxToolDefinitions passes the model's [agent.ToolLimiter] on (0: none).
func (m *listenedModel) MaxToolDefinitions() int {
	if l, ok := m.Model.(agent.ToolLimiter); ok {
		return l.MaxToolDefinitions()
	}
	return 0
}
