package main

import (
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/axocoatl/axocoatl-go/config"
	"github.com/axocoatl/axocoatl-go/internal/httpguard"
)

// writeTimeout is server.write_timeout with its default (the config
// refuses a negative one).
func writeTimeout(cfg *config.Config) time.Duration {
	if t := cfg.Server.WriteTimeout; t > 0 {
		return t
	}
	return httpguard.DefaultWriteTimeout
}

// idleCutter closes a keep-alive connection whose client has stopped
// reading its last answer. The write deadline cannot see such a client
// when the answer fits in the kernel's send buffer (up to 4 MiB on Linux):
// the write succeeds at once, the handler returns and the connection waits,
// idle, for a next request (its goroutine and buffers kept until
// IdleTimeout) while the answer sits unsent. So when a connection turns
// idle with bytes still unsent, it is checked every timeout: no byte taken
// by the client since the last check closes it (the kernel still delivers
// what it holds to a client that wakes up); progress lets it wait on.
type idleCutter struct {
	timeout time.Duration
	mu      sync.Mutex
	stopped bool
	idle    map[net.Conn]*idleWatch
}

type idleWatch struct {
	timer *time.Timer
	left  int // unsent bytes at the last check
}

func newIdleCutter(timeout time.Duration) *idleCutter {
	return &idleCutter{timeout: timeout, idle: map[net.Conn]*idleWatch{}}
}

// connState is the http.Server's ConnState hook.
func (c *idleCutter) connState(conn net.Conn, s http.ConnState) {
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

func (c *idleCutter) check(conn net.Conn, w *idleWatch) {
	n := unsent(conn)
	c.mu.Lock()
	if c.idle[conn] != w { // active again or stopped meanwhile
		c.mu.Unlock()
		return
	}
	if n > 0 && n < w.left { // the client reads, slowly: wait on
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

// stop ends every pending check (the server has shut down).
func (c *idleCutter) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	for conn, w := range c.idle {
		w.timer.Stop()
		delete(c.idle, conn)
	}
}
