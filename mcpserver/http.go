package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	axocoatl "github.com/axocoatl/axocoatl-go"
)

// ServeHTTP serves MCP streamable HTTP (POST, GET and DELETE on one path):
// mount the Server on any mux, e.g. mux.Handle("/mcp", srv). Sessions are
// stateful and negotiate 2025-11-25 or older, unless the request carries
// the MCP-Protocol-Version header of the stateless era (2026-07-28, as every
// request of that era does, server/discover included): such a request is
// served on its own, without a session (answered as JSON, or as an SSE
// stream when it asked for progress), and a GET or DELETE in that era gets
// 405 (the era has no GET stream). Every request passes the Engine's HTTP
// guard first (Host, token, Origin, body bound and deadline).
//
// A client's GET stream (the standalone SSE stream, which carries
// tools/list_changed when agents are added) stays open for the session's
// life, as does a 2026-07-28 client's subscriptions/listen POST, and
// [http.Server.Shutdown] waits for them: call [Server.Shutdown] beside it
// (or [axocoatl.Engine.Close], which ends every session and stream at once).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.life.Started() {
		writeHTTPError(w, http.StatusServiceUnavailable, ErrNotStarted.Error())
		return
	}
	s.http.ServeHTTP(w, r)
}

// Path is where hosts composing the modules' routes (config.Runtime.Routes,
// the daemon) serve the Server; the Server answers on any path it is
// mounted at.
const Path = "/mcp"

// Routes are the Server's doors at [Path]: POST, GET and DELETE of
// streamable HTTP, bounded by [Config].MaxMessageBytes. They ask for
// [axocoatl.ScopeRead]: tools/list shows only the agents the caller's
// identity sees, and a tools/call also needs [axocoatl.ScopeExecute] (the
// Engine refuses the run without it).
func (s *Server) Routes() []axocoatl.Route {
	limit := s.cfg.MaxMessageBytes
	if limit == 0 {
		limit = DefaultMaxMessageBytes
	}
	var out []axocoatl.Route
	for _, m := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		out = append(out, axocoatl.Route{Method: m, Pattern: Path, Scope: axocoatl.ScopeRead, MaxBodyBytes: limit})
	}
	return out
}

// sdkMethods are the methods the go-sdk server (v1.8.0) receives. On HTTP
// it refuses any other with a plain-text 400, where JSON-RPC wants a
// -32601 error for a request and silence for a notification (stdio gets
// both right), so precheckPOST answers those itself.
var sdkMethods = map[string]bool{
	"initialize": true, "ping": true, "server/discover": true, "completion/complete": true,
	"tools/list": true, "tools/call": true, "prompts/list": true, "prompts/get": true,
	"resources/list": true, "resources/templates/list": true, "resources/read": true,
	"resources/subscribe": true, "resources/unsubscribe": true, "subscriptions/listen": true,
	"logging/setLevel":          true,
	"notifications/initialized": true, "notifications/cancelled": true,
	"notifications/progress": true, "notifications/roots/list_changed": true,
}

// headerProtocolVersion is the HTTP header naming a request's MCP version
// (the go-sdk sends it on every request, server/discover included).
const headerProtocolVersion = "Mcp-Protocol-Version"

// post is what precheckPOST learnt of a POST's one message.
type post struct {
	// listen: a subscriptions/listen, whose stream lasts as long as the
	// client wants.
	listen bool
	// quiet: a request that asked for no progress (no progressToken) and
	// is not a subscriptions/listen. In the stateless era nothing but its
	// answer can come back on its stream (that era has no requests from
	// server to client, and this server sends no log messages), so it is
	// answered as plain JSON rather than as an SSE stream.
	quiet bool
	// release gives back the MaxSessions slot an initialize or a
	// subscriptions/listen took (reserveSession), when its POST ends; nil
	// for other messages.
	release func()
	// held is the body's share of MaxBytesInFlight, for unholdBytes.
	held int64
}

// holdBytes waits for n bytes of MaxBytesInFlight, for at most the body
// timeout (the body's read deadline runs meanwhile too), and returns how
// many it holds: 0 when there is no bound.
func (s *Server) holdBytes(ctx context.Context, n int64) (int64, error) {
	if s.bodyBytes == nil || n <= 0 {
		return 0, nil
	}
	if s.bodyBytes.TryAcquire(n) { // the common case, without a timer
		return n, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.bodyTimeout())
	defer cancel()
	if err := s.bodyBytes.Acquire(ctx, n); err != nil {
		return 0, err
	}
	return n, nil
}

// unholdBytes gives back n bytes of MaxBytesInFlight.
func (s *Server) unholdBytes(n int64) {
	if n > 0 {
		s.bodyBytes.Release(n)
	}
}

// precheckPOST reads a POST body and answers what the go-sdk would answer
// badly: malformed JSON (-32700), a non-JSON-RPC message (-32600), an
// unknown method (-32601, or 202 for a notification), an initialize or a
// subscriptions/listen over MaxSessions (503), a batch in the 2026-07-28
// era (-32600; the go-sdk answers it in plain text). It reports whether
// the request should go on to the go-sdk (ok), with its body restored,
// and what it is.
func (s *Server) precheckPOST(w http.ResponseWriter, r *http.Request, era2026 bool) (p post, ok bool) {
	want := s.cfg.MaxMessageBytes // undeclared: the most it may be, until it is read
	if r.ContentLength >= 0 && r.ContentLength < want {
		want = r.ContentLength
	}
	held, err := s.holdBytes(r.Context(), want)
	if err != nil {
		w.Header().Set("Retry-After", "10")
		writeRPCError(w, http.StatusServiceUnavailable, nil, codeServerBusy, fmt.Sprintf("server busy: request bodies of %d bytes in flight (max_bytes_in_flight): retry later", s.cfg.MaxBytesInFlight))
		return post{}, false
	}
	defer func() {
		if ok {
			p.held = held
		} else {
			s.unholdBytes(held)
		}
	}()
	var buf bytes.Buffer
	if r.ContentLength > 0 && r.ContentLength <= s.cfg.MaxMessageBytes {
		buf.Grow(int(r.ContentLength) + 1) // +1: ReadFrom's probe for EOF
	}
	_, err = buf.ReadFrom(http.MaxBytesReader(w, r.Body, s.cfg.MaxMessageBytes))
	r.Body.Close()
	body := buf.Bytes()
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.Is(err, os.ErrDeadlineExceeded) {
			writeRPCError(w, http.StatusBadRequest, nil, jsonrpc.CodeParseError, fmt.Sprintf("request body not received within %s", s.bodyTimeout()))
		} else if errors.As(err, &tooLarge) {
			writeRPCError(w, http.StatusRequestEntityTooLarge, nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("request body exceeds %d bytes", tooLarge.Limit))
		} else {
			writeRPCError(w, http.StatusBadRequest, nil, jsonrpc.CodeParseError, "reading the body: "+err.Error())
		}
		return post{}, false
	}
	if n := int64(len(body)); n < held { // the body was shorter than the room taken
		s.unholdBytes(held - n)
		held = n
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '[' && era2026 {
		writeRPCError(w, http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest, "Invalid Request: JSON-RPC batches are not supported in "+ProtocolVersion2026)
		return post{}, false
	}
	if len(trimmed) > 0 && trimmed[0] == '[' {
		// A batch (2025-03-26) is the go-sdk's business, but for
		// initialize, which that version forbids in a batch: the go-sdk
		// would open a session for it past the MaxSessions check below.
		// And the bounds of one message hold for the batch as a whole.
		info, valid := scanFrame(trimmed, s.frameLimits())
		if !valid {
			writeRPCError(w, http.StatusBadRequest, nil, jsonrpc.CodeParseError, "Parse error: not valid JSON")
			return post{}, false
		}
		if reply := info.overLimits(s.frameLimits()); reply != nil {
			writeRPCError(w, http.StatusBadRequest, nil, reply.code, reply.message)
			return post{}, false
		}
		var batch []json.RawMessage
		if json.Unmarshal(trimmed, &batch) == nil {
			for _, raw := range batch {
				// Read as the go-sdk reads it: encoding/json's
				// case-insensitive match took a "METHOD" member for the
				// method, and missed the initialize the go-sdk serves.
				msg, err := jsonrpc.DecodeMessage(raw)
				if err != nil {
					continue
				}
				m, isReq := msg.(*jsonrpc.Request)
				if !isReq {
					continue
				}
				switch m.Method {
				case "initialize":
					writeRPCError(w, http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest, "Invalid Request: initialize must not be part of a batch")
					return post{}, false
				case "subscriptions/listen":
					// Its stream would outlast the batch, past the
					// MaxSessions check: it comes alone.
					writeRPCError(w, http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest, "Invalid Request: subscriptions/listen must not be part of a batch")
					return post{}, false
				}
			}
		}
		return post{}, true
	}
	msg, info, reply := checkFrame(trimmed, s.frameLimits())
	if reply != nil {
		writeRPCError(w, http.StatusBadRequest, reply.id, reply.code, reply.message)
		return post{}, false
	}
	req, isReq := msg.(*jsonrpc.Request)
	if !isReq || sdkMethods[req.Method] {
		var p post
		if isReq {
			p.listen = req.Method == "subscriptions/listen"
			p.quiet = req.IsCall() && !p.listen && len(info.progressToken) == 0
			if req.Method == "initialize" || p.listen {
				// The slot is taken before the count is checked, so
				// that requests arriving at once cannot all pass a
				// count that none of them has joined yet.
				p.release = s.reserveSession(p.listen)
				if p.release == nil {
					id, _ := json.Marshal(req.ID.Raw())
					w.Header().Set("Retry-After", "10")
					writeRPCError(w, http.StatusServiceUnavailable, id, codeServerBusy, fmt.Sprintf("too many open sessions (%d): retry later", s.cfg.MaxSessions))
					return post{}, false
				}
			}
		}
		return p, true
	}
	if !req.IsCall() {
		w.WriteHeader(http.StatusAccepted) // an unknown notification is ignored
		return post{}, false
	}
	id, _ := json.Marshal(req.ID.Raw())
	writeRPCError(w, http.StatusOK, id, jsonrpc.CodeMethodNotFound, "Method not found: "+req.Method)
	return post{}, false
}

// codeServerBusy is a JSON-RPC server error (the -32000…-32099 range): the
// session limit is reached.
const codeServerBusy = -32000

// reserveSession takes one of the MaxSessions slots for an initialize
// (listen false) or a subscriptions/listen POST, or returns nil when none
// is free. MaxSessions bounds the handshake era's HTTP sessions (those with
// an id, counted in the go-sdk's list) and the open subscriptions/listen
// streams; a stateless call's session lasts as long as the call and is not
// counted (calls in flight are not sessions).
//
// The slot is added to its counter first and the total checked after, so
// that of requests arriving at once each sees all those before it: they
// cannot all pass a check that none has joined yet (1,500 listens sent at
// once held 1,487 streams against a bound of 1,000 when the count was
// checked before the stream registered). An initialize holds its slot
// until its answer starts ([releaseOnAnswer]); its session is in the
// go-sdk's list from before that: for that moment it is counted twice, so
// requests racing it at the bound may be refused one slot early, never
// admitted one late; a request sent after the answer came is not.
func (s *Server) reserveSession(listen bool) (release func()) {
	counter := &s.initializing
	if listen {
		counter = &s.listens
	}
	counter.Add(1)
	if s.cfg.MaxSessions > 0 && s.listens.Load()+s.initializing.Load()+s.statefulSessions() > int64(s.cfg.MaxSessions) {
		counter.Add(-1)
		return nil
	}
	return func() { counter.Add(-1) }
}

// statefulSessions counts the handshake era's HTTP sessions: it walks the
// go-sdk's list, so only initialize and subscriptions/listen call it.
func (s *Server) statefulSessions() int64 {
	var n int64
	for ss := range s.mcp.Sessions() {
		if ss.ID() != "" {
			n++
		}
	}
	return n
}

func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, code int64, msg string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%s}}`+"\n", id, code, jsonString(msg))
}

// bodyTimeout is the Engine's, for messages.
func (s *Server) bodyTimeout() time.Duration {
	if d := s.engine.HTTP().BodyTimeout; d != 0 {
		return d
	}
	return 30 * time.Second
}

// writeHTTPError answers with a JSON-RPC error without id, as the transport
// spec allows for requests refused before they are read.
func writeHTTPError(w http.ResponseWriter, status int, msg string) {
	writeRPCError(w, status, nil, jsonrpc.CodeInvalidRequest, msg)
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// releaseOnAnswer gives an initialize's MaxSessions slot back
// ([Server.reserveSession]) when the go-sdk starts its answer: the go-sdk
// lists the session before it handles the initialize, so from then on the
// session is counted in its list, and the slot would count it twice for
// as long as the handler takes to return, which a client that has its
// answer and opens another session (a listen) may not wait for.
type releaseOnAnswer struct {
	http.ResponseWriter
	release func()
	once    sync.Once
}

func (r *releaseOnAnswer) answered() { r.once.Do(r.release) }

func (r *releaseOnAnswer) WriteHeader(status int) {
	r.answered()
	r.ResponseWriter.WriteHeader(status)
}

func (r *releaseOnAnswer) Write(b []byte) (int, error) {
	r.answered()
	return r.ResponseWriter.Write(b)
}

// Flush keeps the writer an http.Flusher for code that asserts it.
func (r *releaseOnAnswer) Flush() {
	r.answered()
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the writer below.
func (r *releaseOnAnswer) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// jsonAnswerWriter sends a stateless call's JSON answer as soon as the
// go-sdk writes it, with its Content-Length. The go-sdk writes the answer
// from the goroutine that ran the call and the HTTP handler returns later,
// on its own goroutine: without a length net/http holds the answer until
// that handler returns (to learn the length, or to end a chunked body),
// so the client waited for one more goroutine to be scheduled, which on a
// busy machine was the difference between this door and the bare go-sdk's
// SSE answers (issue 24). Only a first write that is one whole JSON value,
// before any status or flush, is sent this way (the go-sdk writes a JSON
// answer in one piece); anything else passes as it is.
type jsonAnswerWriter struct {
	http.ResponseWriter
	started bool // a status, a write or a flush went through
}

func (j *jsonAnswerWriter) WriteHeader(status int) {
	j.started = true
	j.ResponseWriter.WriteHeader(status)
}

func (j *jsonAnswerWriter) Write(b []byte) (int, error) {
	if j.started {
		return j.ResponseWriter.Write(b)
	}
	j.started = true
	h := j.Header()
	if h.Get("Content-Type") != "application/json" || h.Get("Content-Length") != "" || !json.Valid(b) {
		return j.ResponseWriter.Write(b)
	}
	h.Set("Content-Length", strconv.Itoa(len(b)))
	n, err := j.ResponseWriter.Write(b)
	if err == nil {
		j.Flush()
	}
	return n, err
}

// Flush keeps the writer an http.Flusher for code that asserts it.
func (j *jsonAnswerWriter) Flush() {
	j.started = true
	if f, ok := j.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the writer below (flushes,
// the guard's write deadlines).
func (j *jsonAnswerWriter) Unwrap() http.ResponseWriter { return j.ResponseWriter }
