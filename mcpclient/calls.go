package mcpclient

import (
	"context"
	"errors"
	"sync"
	"time"
)

// calls bounds a server's in-flight tool calls: each is cancelled at its
// deadline or when the module stops (a session's Close waits for its calls,
// so a hung one must not hold up Stop).
//
// Why not [context.WithTimeout] plus [context.AfterFunc] per call: together they
// cost a runtime timer and seven allocations, more than the rest of the
// module's and the Engine's bookkeeping of a call (bench/README.md, "MCP
// client"). Here one timer per server is armed for the earliest deadline
// while calls are pending, and a call costs a cancellable context and a map
// entry.
type calls struct {
	mu      sync.Mutex
	next    uint64
	pending map[uint64]pendingCall
	timer   *time.Timer // fires expire; made on first use
	armed   bool        // the timer is set for the earliest pending deadline
	stopped bool
}

type pendingCall struct {
	deadline time.Time
	cancel   context.CancelCauseFunc
	info     *callInfo     // which call, for a server's questions; nil in tests
	held     int           // questions waiting: the deadline does not run
	left     time.Duration // time left when the first hold began
}

// The causes a call's context ends with, besides its caller's.
var (
	errDeadline = errors.New("mcp tool call deadline")
	errStopping = errors.New("mcp client stopping")
)

func newCalls() *calls { return &calls{pending: make(map[uint64]pendingCall)} }

// start bounds ctx by timeout and by stop. The call must end with end(id).
func (c *calls) start(ctx context.Context, timeout time.Duration) (context.Context, uint64) {
	return c.startCall(ctx, timeout, nil)
}

// startCall is start for a call a server's question can be told to belong
// to: info is kept with it (see only), its id and ctx set here.
func (c *calls) startCall(ctx context.Context, timeout time.Duration, info *callInfo) (context.Context, uint64) {
	cctx, cancel := context.WithCancelCause(ctx)
	deadline := time.Now().Add(timeout)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		cancel(errStopping)
		return cctx, 0
	}
	c.next++
	if info != nil {
		info.id, info.ctx = c.next, cctx // before only can hand it out
	}
	c.pending[c.next] = pendingCall{deadline: deadline, cancel: cancel, info: info}
	// A server's calls share one timeout, so a later call's deadline is
	// never earlier than an armed one: only an idle timer needs setting.
	if !c.armed {
		c.arm(timeout)
	}
	return cctx, c.next
}

// end releases a call's context and forgets it.
func (c *calls) end(id uint64) {
	c.mu.Lock()
	p, ok := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if ok {
		p.cancel(nil)
	}
}

func (c *calls) arm(d time.Duration) {
	if c.timer == nil {
		c.timer = time.AfterFunc(d, c.expire)
	} else {
		c.timer.Reset(d)
	}
	c.armed = true
}

// expire cancels the calls past their deadline and re-arms the timer for
// the earliest remaining one.
func (c *calls) expire() {
	now := time.Now()
	var due []context.CancelCauseFunc
	c.mu.Lock()
	c.armed = false
	var earliest time.Time
	for id, p := range c.pending {
		switch {
		case p.held > 0: // a question waits for a human: not due
		case !p.deadline.After(now):
			due = append(due, p.cancel)
			delete(c.pending, id)
		case earliest.IsZero() || p.deadline.Before(earliest):
			earliest = p.deadline
		}
	}
	if !earliest.IsZero() && !c.stopped {
		c.arm(earliest.Sub(now))
	}
	c.mu.Unlock()
	for _, cancel := range due {
		cancel(errDeadline)
	}
}

// stop cancels every pending call and refuses new ones.
func (c *calls) stop() {
	c.mu.Lock()
	c.stopped = true
	if c.timer != nil {
		c.timer.Stop()
	}
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()
	for _, p := range pending {
		p.cancel(errStopping)
	}
}

// hold stops call id's deadline while one of its server's questions waits
// for a human (the server's timeout bounds the server, not the user: the
// question has its own, approval's timeout); release starts it again with
// the time that was left. Holds nest; release may be called more than once.
func (c *calls) hold(id uint64) (release func()) {
	c.mu.Lock()
	p, ok := c.pending[id]
	if !ok {
		c.mu.Unlock()
		return func() {}
	}
	if p.held == 0 {
		p.left = time.Until(p.deadline)
	}
	p.held++
	c.pending[id] = p
	c.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			p, ok := c.pending[id]
			if !ok {
				return
			}
			p.held--
			if p.held == 0 {
				now := time.Now()
				p.deadline = now.Add(max(p.left, 0))
				c.pending[id] = p
				c.rearmLocked(now)
				return
			}
			c.pending[id] = p
		})
	}
}

// rearmLocked sets the timer for the earliest deadline not held.
func (c *calls) rearmLocked(now time.Time) {
	if c.stopped {
		return
	}
	var earliest time.Time
	for _, p := range c.pending {
		if p.held == 0 && (earliest.IsZero() || p.deadline.Before(earliest)) {
			earliest = p.deadline
		}
	}
	if !earliest.IsZero() {
		c.arm(max(earliest.Sub(now), 0))
	}
}

// only returns the one call in flight, or nil and how many there are
// (a 2025-11-25 server's elicitation/create names no call: see
// server.elicit).
func (c *calls) only() (*callInfo, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var one *callInfo
	n := 0
	for _, p := range c.pending {
		if p.info != nil {
			one = p.info
			n++
		}
	}
	if n != 1 {
		return nil, n
	}
	return one, 1
}
