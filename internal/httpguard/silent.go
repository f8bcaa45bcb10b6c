package httpguard

import (
	"net"
	"net/http"
	"sync"
)

// SilentConns closes, once its server shuts down, the connections that
// were accepted but have sent no request. [http.Server.Shutdown] counts
// such a connection as busy for its first 5 s, so one silent connection
// holds the whole shutdown that long: the spare connection an
// [http.Transport] dialed and then left unused, a browser's speculative
// preconnect, a port scanner. Closing them loses nothing: net/http serves
// no request that arrives on one after Shutdown has begun.
type SilentConns struct {
	mu       sync.Mutex
	accepted map[net.Conn]struct{} // connections in StateNew
	shut     bool                  // Shutdown has begun
}

// NewSilentConns tracks srv's connections and closes its silent ones
// when srv shuts down: it chains itself before srv.ConnState and
// registers with srv.RegisterOnShutdown.
func NewSilentConns(srv *http.Server) *SilentConns {
	c := &SilentConns{accepted: map[net.Conn]struct{}{}}
	ChainConnState(srv, c.connState)
	srv.RegisterOnShutdown(c.closeSilent)
	return c
}

// ChainConnState makes f srv's ConnState hook, the hook srv had (if any)
// called after it.
func ChainConnState(srv *http.Server, f func(net.Conn, http.ConnState)) {
	next := srv.ConnState
	if next == nil {
		srv.ConnState = f
		return
	}
	srv.ConnState = func(conn net.Conn, s http.ConnState) {
		f(conn, s)
		next(conn, s)
	}
}

func (c *SilentConns) connState(conn net.Conn, s http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case s == http.StateNew && c.shut:
		// Accepted just before the listener closed, reported after
		// closeSilent ran.
		conn.Close()
	case s == http.StateNew:
		c.accepted[conn] = struct{}{}
	default:
		delete(c.accepted, conn)
	}
}

// closeSilent runs after the listeners have closed (net/http calls each
// RegisterOnShutdown function so, on a goroutine of its own).
func (c *SilentConns) closeSilent() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.shut = true
	for conn := range c.accepted {
		delete(c.accepted, conn)
		conn.Close() // its goroutine's read ends; it reports StateClosed on that goroutine
	}
}
