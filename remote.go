package axocoatl

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"sync"
)

// RemoteRun runs one task of a remote agent on the daemon that hosts it. It
// gets the request with AgentID, Source and TaskID set, and a ctx that ends
// with the caller's or with Engine.Close; it must return when ctx ends (the
// remote run told to stop) and when the remote side cannot be reached
// (an error matching ErrUnavailable). The events of the run are the hosting
// Engine's to publish, not the caller's. A turn of a conversation
// (req.ConversationID, req.CreateConversation) is the hosting Engine's
// too, on its store: the calling Engine does not touch its own, and run
// returns the conversation in Result.ConversationID, its errors checkable
// as the conversation package's (ErrBusy, ErrNotFound, …).
//
// req.OnEvent, when set, is the run's fan-out on the calling Engine (the
// caller's [Request].OnEvent listens there, and [Engine.FollowRun] can
// join it): run may report the remote run's events to it as they come,
// in order. It never blocks and is safe for concurrent use; run must not
// call it after it returns. Nil: nobody listened when the task started,
// and run need not ask the hosting daemon for events.
type RemoteRun func(ctx context.Context, req Request) (Result, error)

type remoteAgent struct {
	info AgentInfo
	run  RemoteRun
}

func (r *remoteAgent) copyInfo() AgentInfo {
	info := r.info
	info.Tools = slices.Clone(info.Tools)
	return info
}

// AddRemoteAgent lists an agent that runs on another daemon: it shows in
// Agents and Agent with its Node, and ExecuteRequest for its id calls run.
// A local agent of the same id (AddAgent) wins over it. Adding a remote
// agent whose id is already remote replaces the earlier entry (whose
// remove func then does nothing). remove takes it out of the list; tasks
// already running through run are not affected. A cluster module (one
// that discovers other daemons) is what calls it; see [Engine.WatchAgents]
// for doors that list agents.
func (e *Engine) AddRemoteAgent(info AgentInfo, run RemoteRun) (remove func(), err error) {
	if err := info.Validate(); err != nil {
		return nil, fmt.Errorf("remote agent %q: %w", info.ID, err)
	}
	if info.Node == "" {
		return nil, fmt.Errorf("remote agent %q: node is required", info.ID)
	}
	if run == nil {
		return nil, fmt.Errorf("remote agent %q: run is nil", info.ID)
	}
	info.Spec = info.WithDefaults()
	info.Tools = slices.Clone(info.Tools)
	r := &remoteAgent{info: info, run: run}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, ErrClosed
	}
	old := e.remote[info.ID]
	e.remote[info.ID] = r
	_, shadowed := e.agents[info.ID]
	if !shadowed && (old == nil || !sameListing(old.info, info)) {
		e.notifyAgentsLocked()
	}
	e.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			e.mu.Lock()
			defer e.mu.Unlock()
			if e.remote[info.ID] != r {
				return // replaced since
			}
			delete(e.remote, info.ID)
			if _, shadowed := e.agents[info.ID]; !shadowed {
				e.notifyAgentsLocked()
			}
		})
	}, nil
}

// sameListing reports whether two entries of one remote agent differ in
// more than their Running count (which changes with every heartbeat and
// is not worth a tool list_changed).
func sameListing(a, b AgentInfo) bool {
	a.Running, b.Running = 0, 0
	return reflect.DeepEqual(a, b)
}

// remoteInfosLocked lists the remote agents no local one shadows, by id.
func (e *Engine) remoteInfosLocked() []AgentInfo {
	if len(e.remote) == 0 {
		return nil
	}
	out := make([]AgentInfo, 0, len(e.remote))
	for id, r := range e.remote {
		if _, local := e.agents[id]; !local {
			out = append(out, r.copyInfo())
		}
	}
	// sort.Slice, not slices.SortFunc: one sorter for every element type,
	// where slices.SortFunc compiles ~20 KB per struct type into the daemon
	// (its size bound: bench/README.md).
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// agentWatcher is one WatchAgents registration. pending coalesces changes:
// the watcher's func runs once for any number of changes made while it
// was waiting to run.
type agentWatcher struct {
	kick chan struct{} // buffered 1: a change is pending
	quit chan struct{}
	done chan struct{}
	once sync.Once
}

// stop ends the watcher's goroutine and waits for it.
func (w *agentWatcher) stop() {
	w.once.Do(func() { close(w.quit) })
	<-w.done
}

// WatchAgents calls fn after the set of agents (Agents) changes: an agent
// added, a remote agent added, replaced or removed. fn runs on a goroutine
// of its own, one call at a time, and a burst of changes may be reported
// by one call; it reads the new set with Agents. stop ends the watch and
// waits for a call in progress; Engine.Close stops every watch. A door
// that lists agents (an MCP tool list, a card) uses it to follow a cluster.
func (e *Engine) WatchAgents(fn func()) (stop func()) {
	w := &agentWatcher{kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return func() {}
	}
	e.watchers[w] = struct{}{}
	e.mu.Unlock()
	// The goroutine is owned by the watch: stop (or Close) ends it.
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.quit:
				return
			case <-w.kick:
				fn()
			}
		}
	}()
	return func() {
		e.mu.Lock()
		delete(e.watchers, w)
		e.mu.Unlock()
		w.stop()
	}
}

// notifyAgentsLocked tells every watcher the agent set changed; it never
// blocks (a watcher with a change pending already will see this one too).
func (e *Engine) notifyAgentsLocked() {
	for w := range e.watchers {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

// executeRemote runs a task of a remote agent through its RemoteRun. The
// task ends with the caller's ctx or Engine.Close, as a local one does;
// the agent's own timeout is the hosting daemon's to apply.
func (e *Engine) executeRemote(ctx context.Context, r *remoteAgent, req Request, cast *runCast) (Result, error) {
	if ctx.Done() == nil {
		// A caller's ctx that never ends (a library's Background): the
		// Engine's alone ends the run, with the caller's values, and
		// nothing to register with it.
		ctx = valuesOf{Context: e.runCtx, values: ctx}
	} else {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(e.runCtx, cancel)
		defer stop()
	}
	// The run's fan-out, as for a local run: the caller's OnEvent and
	// FollowRun listen to it, and run reports the remote run's events to
	// it (asked for only when someone listens as the task starts).
	var delivered chan struct{}
	sent := req
	sent.OnEvent = nil
	if req.OnEvent != nil {
		if sub, err := cast.subscribe(); err == nil {
			delivered = make(chan struct{})
			go e.deliver(sub, req.OnEvent, &req, delivered)
			sent.OnEvent = cast.observe
		}
	}
	sent.OnEventSync = nil
	if req.OnEventSync != nil {
		cast.listenSync(req.OnEventSync, e.syncPanicked(&req))
		sent.OnEvent = cast.observe
	}
	res, err := r.run(ctx, sent)
	e.endCast(req.TaskID, cast)
	if delivered != nil {
		<-delivered
	}
	res.TaskID, res.AgentID = req.TaskID, req.AgentID
	if err != nil && e.runCtx.Err() != nil && errors.Is(err, context.Canceled) {
		err = fmt.Errorf("agent %s: %w", req.AgentID, ErrClosed)
	}
	return res, err
}

// valuesOf is a context that ends with Context and carries the values of
// values.
type valuesOf struct {
	context.Context
	values context.Context
}

func (c valuesOf) Value(key any) any { return c.values.Value(key) }

// AfterFunc lets a context derived from c register with the Engine's as it
// would with a cancelCtx: without it the context package starts a
// goroutine per derived context to watch Done.
func (c valuesOf) AfterFunc(f func()) (stop func() bool) { return context.AfterFunc(c.Context, f) }
