package httpguard

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// IdleCutter closes a keep-alive connection whose client has stopped
// reading its last answer. The write deadline cannot see such a client
// when the answer fits in the kernel's send buffer (up to 4 MiB on Linux):
// the write succeeds at once, the handler returns and the connection waits,
// idle, for a next request (its goroutine and buffers kept until
// IdleTimeout) while the answer sits unsent. So when a connection turns
// idle with bytes still unsent, it is checked every timeout: no byte taken
// by the client since the last check closes it (the kernel still delivers
// what it holds to a client that wakes up); progress lets it wait on.
type IdleCutter struct {
	timeout time.Duration
	mu      sync.Mutex
	stopped bool
	idle    map[net.Conn]*idleWatch
}

// minIdleProgress is the least a client must take of an idle connection's
// unsent answer per timeout not to be cut: as much as one write of the
// answer's (net/http's 32 KiB buffer) must take within the write deadline
// on an active connection.
const minIdleProgress = 32 << 10

type idleWatch struct {
	timer *time.Timer
	left  int // unsent bytes at the last check
}

// NewIdleCutter cuts idle connections whose client took no byte of its
// last answer for timeout.
func NewIdleCutter(timeout time.Duration) *IdleCutter {
	return &IdleCutter{timeout: timeout, idle: map[net.Conn]*idleWatch{}}
}

// ConnState is the http.Server's ConnState hook.
func (c *IdleCutter) ConnState(conn net.Conn, s http.ConnState) {
	if s == http.StateIdle {
		n := unsent(conn)
		if n <= 0 {
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.stopped {
			return
		}
		w := &idleWatch{left: n}
		w.timer = time.AfterFunc(c.timeout, func() { c.check(conn, w) })
		c.idle[conn] = w
		return
	}
	// Active again (the client read and asked anew), hijacked or closed.
	c.mu.Lock()
	defer c.mu.Unlock()
	if w, ok := c.idle[conn]; ok {
		w.timer.Stop()
		delete(c.idle, conn)
	}
}

func (c *IdleCutter) check(conn net.Conn, w *idleWatch) {
	n := unsent(conn)
	c.mu.Lock()
	if c.idle[conn] != w { // active again or stopped meanwhile
		c.mu.Unlock()
		return
	}
	// The client reads, slowly: wait on. Progress counts from
	// minIdleProgress bytes (or what was left): bytes that were in flight
	// as the connection turned idle are acknowledged later without the
	// client reading any, and the kernel frees room in a stalled
	// receiver's buffer now and then (a loaded machine's ACKs came after
	// the idle check, doubling a non-reader's time to the cut).
	if n > 0 && w.left-n >= min(minIdleProgress, w.left) {
		w.left = n
		w.timer.Reset(c.timeout)
		c.mu.Unlock()
		return
	}
	delete(c.idle, conn)
	c.mu.Unlock()
	if n > 0 {
		conn.Close() // outside the lock: the conn's goroutine calls connState as it ends
	}
}

// Stop ends every pending check (the server has shut down).
func (c *IdleCutter) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	for conn, w := range c.idle {
		w.timer.Stop()
		delete(c.idle, conn)
	}
}

// ConnState is the guard's hook for an http.Server's ConnState: it cuts
// a connection whose client stopped reading an answer small enough to
// have been written at once (see [IdleCutter]). Without a write timeout it
// does nothing.
func (g *Guard) ConnState(conn net.Conn, s http.ConnState) {
	if g.idle != nil {
		g.idle.ConnState(conn, s)
	}
}

// StopIdle ends the pending checks of ConnState (the server has shut down).
func (g *Guard) StopIdle() {
	if g.idle != nil {
		g.idle.Stop()
	}
}

// WriteTimeout is the bound of each response write (zero: none).
func (g *Guard) WriteTimeout() time.Duration { return max(g.writeTimeout, 0) }
