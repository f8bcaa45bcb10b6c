package mcpserver

import (
	"encoding/json"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
)

// ServeHTTP serves MCP streamable HTTP (POST, GET and DELETE on one path):
// mount the Server on any mux, e.g. mux.Handle("/mcp", srv). Sessions are
// stateful and negotiate 2025-11-25 or older.
//
// Two checks come before the protocol. A request that carries an Origin
// header (a browser's) must come from the same host or from an allowed
// origin, else 403 (the MCP transport spec requires this against DNS
// rebinding and cross-site calls). And, by the go-sdk's own protection, a
// request reaching a loopback listener must name a loopback Host, else 403.
// Authentication is the host's business: wrap the Server in its middleware.
//
// A client's GET stream (the optional standalone SSE stream, which carries
// tools/list_changed) stays open for the session's life, and
// http.Server.Shutdown waits for it: call Close first, e.g. with
// httpServer.RegisterOnShutdown(func() { srv.Close() }). A host with no use
// for that stream may also leave GET unrouted; clients accept a 405.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.closed.Load() {
		writeHTTPError(w, http.StatusServiceUnavailable, "server closed")
		return
	}
	if origin := r.Header.Get("Origin"); origin != "" && !s.originAllowed(origin, r.Host) {
		writeHTTPError(w, http.StatusForbidden, "Forbidden: origin "+strconv.Quote(origin)+" is not allowed")
		return
	}
	s.http.ServeHTTP(w, r)
}

// originAllowed reports whether a browser at origin may call this server,
// reached as host.
func (s *Server) originAllowed(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false // includes "null", sent by sandboxed and file: pages
	}
	// Same host: the page was served by whatever serves us. The scheme is
	// not compared, as a TLS-terminating proxy may sit in between.
	if strings.EqualFold(u.Host, host) {
		return true
	}
	for _, p := range s.origins {
		target := u.Host
		if strings.Contains(p, "://") {
			target = u.Scheme + "://" + u.Host
		}
		if ok, _ := path.Match(p, strings.ToLower(target)); ok {
			return true
		}
	}
	return false
}

// writeHTTPError answers with a JSON-RPC error without id, as the transport
// spec allows for requests refused before they are read.
func writeHTTPError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":` + jsonString(msg) + `}}` + "\n"))
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
