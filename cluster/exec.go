package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/agent"
)

// execReply is one answer to a caller, as read from the wire (see
// wire.go) or made up locally (noResponders, lost).
type execReply struct {
	Accepted   string
	Done       bool
	Output     string
	DurationMS int64
	Error      string
	Kind       string
	// ConversationID: the conversation the task was a turn of (a 'C'
	// answer).
	ConversationID string
	// withUsage: a 'U' answer (to a caller that announced flagEvents):
	// the run's Usage, and the 'E' frames sent before it.
	withUsage bool
	Usage     agent.Usage
	Frames    uint64

	noResponders bool
	lost         string
}

// cancelMsg stops a task wherever it runs.
type cancelMsg struct {
	TaskID string `json:"task_id"`
	From   string `json:"from"`
	// Deadline: the caller's deadline passed (the run times out, as it
	// would have on its own clock a moment later), not a cancel.
	Deadline bool `json:"deadline,omitempty"`
}

// maxTimeout is the longest timeout_ms taken as a deadline.
const maxTimeout = time.Duration(1<<63 - 1)

// acceptAfter is how long a run goes before its daemon tells the caller
// it took the task.
const acceptAfter = 20 * time.Millisecond

// errCallerLeft is the cause of a run cancelled because the daemon that
// sent it left the cluster.
var errCallerLeft = errors.New("the calling daemon left the cluster")

// send queues a reply for a call without blocking (a call never has more
// than a few in flight; extra ones are dropped).
func send(c *call, r execReply) {
	select {
	case c.ch <- &r:
	default:
	}
}

// runRemote is the axocoatl.RemoteRun of every remote agent: it sends the
// task to the daemons hosting the agent (one of them takes it) and waits
// for the answer, the caller's ctx, or the loss of the daemon that took it
// or of NATS.
func (m *Module) runRemote(ctx context.Context, req axocoatl.Request) (axocoatl.Result, error) {
	// A hop inside a trace is a client span; its trace context rides in
	// the task's NATS headers (trace.go).
	span, hdr := m.startCallSpan(ctx, req.AgentID, req.TaskID)
	res, err := m.runRemoteTraced(ctx, req, hdr)
	if span != nil {
		endSpan(span, kindOfCall(err))
	}
	return res, err
}

// kindOfCall is the error.type of a hop's span.
func kindOfCall(err error) string {
	if err == nil {
		return ""
	}
	var re *remoteError
	if errors.As(err, &re) {
		return re.kind
	}
	return errorKind(err)
}

// publishTask sends a task frame, with its trace headers if it has any.
func (m *Module) publishTask(subj, reply string, data []byte, hdr natsgo.Header) error {
	if hdr == nil {
		return m.publish(subj, reply, data)
	}
	// The trace context rides in headers, outside the signature: it
	// names a parent span and changes nothing a daemon does.
	data = m.keys.Seal(subj, reply, data)
	err := m.nc.PublishMsg(&natsgo.Msg{Subject: subj, Reply: reply, Data: data, Header: hdr})
	if errors.Is(err, natsgo.ErrHeadersNotSupported) {
		// A server without headers: the task goes, its trace does not.
		return m.nc.PublishRequest(subj, reply, data)
	}
	return err
}

// runRemoteTraced is runRemote once its span started.
func (m *Module) runRemoteTraced(ctx context.Context, req axocoatl.Request, hdr natsgo.Header) (axocoatl.Result, error) {
	start := time.Now()
	res := axocoatl.Result{TaskID: req.TaskID, AgentID: req.AgentID}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("agent %s: %w", req.AgentID, err)
	}
	// A turn of a conversation runs on the daemon hosting the agent, on
	// its store (shared through JetStream KV in a cluster): this Engine
	// does not touch its own.
	t := task{taskID: req.TaskID, from: m.node, source: string(req.Source), input: req.Input,
		conversationID: req.ConversationID, create: req.CreateConversation, events: req.OnEvent != nil}
	if d, ok := ctx.Deadline(); ok {
		t.timeoutMS = max(time.Until(d).Milliseconds(), 1)
	}
	data := t.encode()
	if limit := m.maxPayload(); int64(len(data)) > limit {
		return res, fmt.Errorf("agent %s runs on another daemon: the task is %d bytes, over NATS max_payload (%d bytes)", req.AgentID, len(data), limit)
	}
	token := itoa(m.seq.Add(1))
	c := &call{ch: make(chan *execReply, maxPendingCall), observe: req.OnEvent}
	m.mu.Lock()
	switch {
	case m.stopping:
		m.mu.Unlock()
		return res, unavailable("agent %s runs on another daemon and the cluster module is stopping", req.AgentID)
	case !m.connectedLocked():
		m.mu.Unlock()
		return res, unavailable("agent %s runs on another daemon and the NATS connection (%s) is down; retry when it is back", req.AgentID, m.url)
	}
	m.calls[token] = c
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.calls, token)
		m.mu.Unlock()
		c.evMu.Lock()
		c.over = true
		c.evMu.Unlock()
	}()
	if err := m.publishTask(m.subj+".exec."+req.AgentID, m.inbox+"."+token, data, hdr); err != nil {
		return res, unavailable("agent %s: sending the task over NATS: %v", req.AgentID, err)
	}
	accept := time.NewTimer(m.cfg.AcceptTimeout)
	defer accept.Stop()
	node, accepted := "", false
	for {
		select {
		case r := <-c.ch:
			switch {
			case r.noResponders:
				return res, unavailable("no daemon serves agent %s now", req.AgentID)
			case r.lost != "":
				return res, unavailable("agent %s: %s", req.AgentID, r.lost)
			case r.Accepted != "":
				// Accepted, then repeated every heartbeat of the daemon
				// running it: silent for as long as its announcements may
				// be, it is gone (or its answers are lost) whether or not
				// this daemon tracks it.
				node = r.Accepted
				m.mu.Lock()
				c.node = node
				silence := m.cfg.ExpireAfter
				if p, ok := m.peers[node]; ok {
					silence = max(silence, p.ttl)
				}
				m.mu.Unlock()
				accepted = true
				accept.Reset(silence)
			case r.Done && r.Kind == kindFailed && r.Error == errMalformedTask && t.events:
				// A daemon of a version before events: the task again,
				// as that daemon reads it (not streamed).
				t.events = false
				if err := m.publishTask(m.subj+".exec."+req.AgentID, m.inbox+"."+token, t.encode(), hdr); err != nil {
					return res, unavailable("agent %s: sending the task over NATS: %v", req.AgentID, err)
				}
			case r.Done:
				res.Duration = time.Duration(r.DurationMS) * time.Millisecond
				if r.withUsage {
					res.Usage = r.Usage
					c.evMu.Lock()
					if lost := r.Frames - min(c.frames, r.Frames); lost > 0 {
						m.log.Debug("event frames of a remote run lost on the way", "agent", req.AgentID, "task", req.TaskID, "lost", lost, "sent", r.Frames)
					}
					c.evMu.Unlock()
				}
				res.ConversationID = r.ConversationID
				if r.Error == "" {
					res.Output = r.Output
					return res, nil
				}
				if r.Kind == kindFailed && r.Error == errMalformedTask && (t.conversationID != "" || t.create) {
					return res, unavailable("agent %s: %s", req.AgentID, errOlderTurns)
				}
				return res, &remoteError{kind: r.Kind, msg: r.Error}
			}
		case <-accept.C:
			if accepted {
				// As for a cancel: the run must not go on unheard of.
				b, _ := json.Marshal(cancelMsg{TaskID: req.TaskID, From: m.node})
				_ = m.publish(m.subj+".cancel", "", b)
				return res, unavailable("agent %s: daemon %s stopped answering while running the task (it may have completed there)", req.AgentID, node)
			}
			return res, unavailable("agent %s: no daemon took the task within %s", req.AgentID, m.cfg.AcceptTimeout)
		case <-ctx.Done():
			// Tell whoever runs it to stop (or, if the task is still on its
			// way, not to start it).
			deadline := errors.Is(ctx.Err(), context.DeadlineExceeded)
			b, _ := json.Marshal(cancelMsg{TaskID: req.TaskID, From: m.node, Deadline: deadline})
			_ = m.publish(m.subj+".cancel", "", b)
			res.Duration = time.Since(start)
			if deadline {
				return res, fmt.Errorf("agent %s: timed out: %w", req.AgentID, context.DeadlineExceeded)
			}
			return res, fmt.Errorf("agent %s: canceled: %w", req.AgentID, context.Canceled)
		}
	}
}

// onReply runs on the dispatch goroutine of this module's inbox.
func (m *Module) onReply(msg *natsgo.Msg) {
	token := msg.Subject[strings.LastIndexByte(msg.Subject, '.')+1:]
	m.mu.Lock()
	c := m.calls[token]
	m.mu.Unlock()
	if c == nil {
		return // the caller gave up
	}
	if len(msg.Data) == 0 && msg.Header.Get("Status") == "503" {
		// The server's "no responders": it cannot be signed.
		send(c, execReply{noResponders: true})
		return
	}
	if !m.keys.Open(msg, m.guardReply, "answer to a task") {
		return // counted, logged: it reaches no caller
	}
	if len(msg.Data) > 0 && msg.Data[0] == answerEvents {
		// Events: straight to the caller's fan-out (which never blocks),
		// not through c.ch, whose few slots are for the answers.
		c.evMu.Lock()
		defer c.evMu.Unlock()
		if c.observe == nil || c.over {
			return // not asked for, or too late
		}
		c.frames++
		if _, ok := readEvents(msg.Data[1:], c.observe); !ok {
			m.log.Debug("malformed event frame from a remote run dropped", "bytes", len(msg.Data))
		}
		return
	}
	if r, ok := decodeReply(msg.Data); ok {
		send(c, r)
	} else if len(msg.Data) > 0 && msg.Data[0] == '{' {
		// A daemon of an older version (JSON answers) could not read the
		// task; another hosting the agent may.
		send(c, execReply{Done: true, Kind: kindUnavailable, Error: errOlderWire})
	}
}

// The two sides of a cluster whose daemons run versions before and after
// the task frame (wire.go): neither can run the other's tasks.
const (
	// errMalformedTask is the answer to a task frame a daemon cannot read
	// (also a conversation turn, to a daemon before them).
	errMalformedTask = "cluster: malformed task request"
	errOlderTurns    = "a daemon hosting this agent runs an older axocoatl that cannot take conversation turns from other daemons: run one version across the cluster"
	errNewerWire     = "runs a newer axocoatl whose cluster tasks are not JSON and cannot take this daemon's: run one version across the cluster"
	errOlderWire     = "a daemon hosting this agent runs an older axocoatl (its cluster answers are JSON) and cannot read the task: run one version across the cluster"
)

// olderReply is an answer as daemons before the task frame read it.
type olderReply struct {
	Done  bool   `json:"done"`
	Error string `json:"error"`
	Kind  string `json:"kind"`
}

// onCancel stops a task this daemon runs for another, or remembers that it
// must not start.
func (m *Module) onCancel(msg *natsgo.Msg) {
	if !m.keys.Open(msg, m.guardCancel, "cancel") {
		return
	}
	var c cancelMsg
	if json.Unmarshal(msg.Data, &c) != nil || c.TaskID == "" || len(c.TaskID) > maxTaskID || !validNode(c.From) {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.running[c.TaskID]; ok {
		if s.from == c.From {
			cause := context.Canceled
			if c.Deadline {
				cause = context.DeadlineExceeded // the run reports a timeout
			}
			s.cancel(cause)
		}
		return
	}
	// Not running here: the task may still be on its way (cancel and
	// request travel on different subjects). A few are remembered, by
	// sender and id: a task id may be a client's choice, and another
	// daemon's cancel must not stop this one's task.
	key := tombKey(c.From, c.TaskID)
	if _, ok := m.tombs[key]; !ok {
		m.tombs[key] = struct{}{}
		m.tombRing = append(m.tombRing, key)
		if len(m.tombRing) > maxTombstones {
			delete(m.tombs, m.tombRing[0])
			m.tombRing = m.tombRing[1:]
		}
	}
}

// takeTombLocked reports whether from cancelled taskID before it arrived,
// forgetting the cancel.
func (m *Module) takeTombLocked(from, taskID string) bool {
	key := tombKey(from, taskID)
	if _, ok := m.tombs[key]; !ok {
		return false
	}
	delete(m.tombs, key)
	return true
}

// tombKey is a remembered cancel's key: the sender, then the task id.
func tombKey(from, taskID string) string { return from + "\x00" + taskID }

// keepalive tells a run's caller that this daemon took the task: only for
// a run that lasts (a quick one is answered before the acceptance would
// be, and saves a message), after acceptAfter, then every heartbeat
// interval while it runs, so that a caller that does not track this daemon
// (or whose answer NATS dropped) learns it is gone without waiting
// forever.
type keepalive struct {
	m     *Module
	reply string // the caller's inbox
	mu    sync.Mutex
	done  bool
	timer *time.Timer
}

func (m *Module) keepAlive(reply string) *keepalive {
	k := &keepalive{m: m, reply: reply}
	k.mu.Lock()
	k.timer = time.AfterFunc(acceptAfter, k.fire)
	k.mu.Unlock()
	return k
}

func (k *keepalive) fire() {
	if err := k.m.publish(k.reply, "", execReply{Accepted: k.m.node}.encode()); err != nil {
		k.m.log.Debug("acceptance not sent", "error", err)
	}
	k.mu.Lock()
	if !k.done {
		k.timer.Reset(k.m.cfg.HeartbeatInterval)
	}
	k.mu.Unlock()
}

func (k *keepalive) stop() {
	k.mu.Lock()
	k.done = true
	k.timer.Stop()
	k.mu.Unlock()
}

// taskQueue bounds the tasks waiting for a worker (beyond it NATS drops
// them as a slow consumer's and their callers get "no daemon took the
// task"). A worker refuses a task at once when the runs are at their
// limit, so the queue holds only what arrives faster than that.
const taskQueue = 64

// work takes this daemon's tasks, which every local agent's exec
// subscription puts straight on m.tasks from the NATS reader, and runs each
// on the worker that took it: a task costs no hand-off from a dispatch goroutine
// to a new one (a tenth of a cross-daemon round trip). One worker is kept
// waiting while fewer than MaxConcurrentRuns+1 exist, so the next task is
// taken at once, and the one beyond the runs' limit refuses it (busy); a
// worker that finds two others waiting when its run ends exits.
func (m *Module) work() {
	for {
		select {
		case <-m.ctx.Done():
			// Stop: the tasks still queued are refused (closed: m.stopping
			// is set), not left to their callers' accept timeout.
			for {
				select {
				case msg := <-m.tasks:
					m.onExec(msg)
				default:
					return
				}
			}
		case msg := <-m.tasks:
			m.mu.Lock()
			m.waiting--
			if m.waiting == 0 && m.workers <= m.cfg.MaxConcurrentRuns && !m.stopping {
				m.spawnWorkerLocked()
			}
			m.mu.Unlock()
			m.onExec(msg)
			m.mu.Lock()
			if m.waiting >= 2 {
				m.workers--
				m.mu.Unlock()
				return
			}
			m.waiting++
			m.mu.Unlock()
		}
	}
}

// spawnWorkerLocked starts a worker, counted as waiting.
func (m *Module) spawnWorkerLocked() {
	m.workers++
	m.waiting++
	m.wg.Go(m.work)
}

// onExec takes a task for one of this daemon's agents and runs it on the
// calling worker; MaxConcurrentRuns bounds the runs.
func (m *Module) onExec(msg *natsgo.Msg) {
	if msg.Reply == "" {
		return
	}
	if !m.keys.Open(msg, m.guardExec, "task") {
		return // counted, logged; not answered: it runs nothing
	}
	reply := func(r execReply) {
		if err := m.publish(msg.Reply, "", r.encode()); err != nil {
			m.log.Debug("reply not sent", "error", err)
		}
	}
	agentID := msg.Subject[strings.LastIndexByte(msg.Subject, '.')+1:]
	req, ok := decodeTask(msg.Data)
	if ok && (req.taskID == "" || len(req.taskID) > maxTaskID) {
		ok = false
	}
	if !ok {
		if len(msg.Data) > 0 && msg.Data[0] == '{' {
			// The JSON task of a daemon of an older version: answered in
			// the JSON it reads, so that it learns why at once.
			b, _ := json.Marshal(olderReply{Done: true, Kind: kindUnavailable, Error: fmt.Sprintf("agent %s: daemon %s %s", agentID, m.node, errNewerWire)})
			if err := m.publish(msg.Reply, "", b); err != nil {
				m.log.Debug("reply not sent", "error", err)
			}
			return
		}
		reply(execReply{Done: true, Kind: kindFailed, Error: errMalformedTask})
		return
	}
	m.mu.Lock()
	if len(m.tombs) > 0 && m.takeTombLocked(req.from, req.taskID) {
		m.mu.Unlock()
		reply(execReply{Done: true, Kind: kindCanceled, Error: fmt.Sprintf("agent %s: canceled before it started: %v", agentID, context.Canceled)})
		return
	}
	if m.stopping {
		m.mu.Unlock()
		reply(execReply{Done: true, Kind: kindClosed, Error: fmt.Sprintf("daemon %s cannot take task %s now", m.node, req.taskID)})
		return
	}
	if _, dup := m.running[req.taskID]; dup {
		// One run per task id, as on the Engine: the caller's door says
		// so (409), rather than "unavailable, retry".
		m.mu.Unlock()
		reply(execReply{Done: true, Kind: kindTaskExists, Error: fmt.Sprintf("agent %s: %v: %q (on daemon %s)", agentID, axocoatl.ErrTaskExists, req.taskID, m.node)})
		return
	}
	select {
	case m.sem <- struct{}{}:
	default:
		m.mu.Unlock()
		reply(execReply{Done: true, Kind: kindBusy, Error: fmt.Sprintf("daemon %s is running its limit of %d tasks for other daemons (cluster.max_concurrent_runs)", m.node, m.cfg.MaxConcurrentRuns)})
		return
	}
	// Not a child of m.ctx (that costs a registration with it per task):
	// Stop cancels what m.running holds.
	ctx, cancel := context.WithCancelCause(context.Background())
	m.running[req.taskID] = &served{from: req.from, cancel: cancel}
	m.wg.Add(1) // under m.mu, before Stop can wait
	m.mu.Unlock()
	keep := m.keepAlive(msg.Reply)
	func() {
		defer m.wg.Done()
		defer func() { <-m.sem }()
		defer keep.stop()
		defer func() {
			m.mu.Lock()
			delete(m.running, req.taskID)
			m.mu.Unlock()
			cancel(nil)
		}()
		// The caller's trace goes on here (trace.go).
		runCtx, span := m.startServeSpan(ctx, msg.Header, agentID, req.taskID, req.from)
		// A timeout beyond what a Duration holds (only a peer's invention:
		// a caller's deadline is at most ~292 years away) is no deadline.
		if req.timeoutMS > 0 && req.timeoutMS <= int64(maxTimeout/time.Millisecond) {
			var stop context.CancelFunc
			runCtx, stop = context.WithTimeout(runCtx, time.Duration(req.timeoutMS)*time.Millisecond)
			defer stop()
		}
		// The door the task came in by, if it is one of ours: the value
		// labels metrics, so a peer must not invent new ones.
		source := axocoatl.Source(req.source)
		switch source {
		case axocoatl.SourceAPI, axocoatl.SourceA2A, axocoatl.SourceMCP, axocoatl.SourceLibrary:
		default:
			source = "remote"
		}
		run := axocoatl.Request{AgentID: agentID, Input: req.input, Source: source, TaskID: req.taskID,
			ConversationID: req.conversationID, CreateConversation: req.create}
		var fwd *forwarder
		if req.events {
			// The caller listens: the run's events go to its inbox as
			// they come (ExecuteRequest has made its last OnEvent call
			// when it returns).
			fwd = m.newForwarder(msg.Reply)
			run.OnEvent = fwd.onEvent
		}
		res, err := m.eng.ExecuteRequest(runCtx, run)
		if span != nil {
			endSpan(span, kindOfCall(err))
		}
		r := execReply{Done: true, Output: res.Output, DurationMS: res.Duration.Milliseconds(), ConversationID: res.ConversationID}
		if fwd != nil {
			r.withUsage, r.Usage, r.Frames = true, res.Usage, fwd.close()
		}
		if err != nil {
			r.Output, r.Error, r.Kind = "", err.Error(), errorKind(err)
			if r.Kind == kindClosed { // "engine closed" would read as the caller's
				r.Error = fmt.Sprintf("agent %s: daemon %s is shutting down: %v", agentID, m.node, err)
			}
		}
		data := r.encode()
		if limit := m.maxPayload(); int64(len(data)) > limit {
			data = execReply{Done: true, Kind: kindFailed, DurationMS: r.DurationMS, ConversationID: r.ConversationID,
				withUsage: r.withUsage, Usage: r.Usage, Frames: r.Frames,
				Error: fmt.Sprintf("agent %s: its answer of %d bytes is over NATS max_payload (%d bytes) and cannot be sent back", agentID, len(data), limit)}.encode()
		}
		if err := m.publish(msg.Reply, "", data); err != nil {
			m.log.Warn("result not sent back", "agent", agentID, "task", req.taskID, "to", req.from, "error", err)
		}
	}()
}
