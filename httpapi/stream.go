package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/internal/httpguard"
	"github.com/axocoatl/axocoatl-go/internal/jsonio"
	"github.com/axocoatl/axocoatl-go/lattice"
)

// Frames of the event stream (docs/http-api.md, the WebSocket paragraph).
type (
	readyFrame struct {
		Kind             string `json:"kind"` // ready
		PendingApprovals []any  `json:"pending_approvals"`
		// History is the recent events, oldest first (some may come again
		// as live events: clients key them by id).
		History []historyEvent `json:"history"`
		// Commands are the cmds this stream takes: a client uses execute
		// or follow only when listed (an older daemon lists none).
		Commands []string `json:"commands"`
	}
	// mark is what a frame says of an event the lattice took without a
	// signature (another daemon's run telemetry, lattice.Event's
	// Unverified): unverified, and the node it claims; absent on every
	// other.
	mark struct {
		Unverified bool   `json:"unverified,omitempty"`
		Node       string `json:"node,omitempty"`
	}
	// historyEvent is an event of the ready frame's history: its own
	// members and its mark, so that a client that connects after another
	// daemon's unsigned telemetry came sees it marked as one that watched
	// it come does.
	historyEvent struct {
		lattice.Event
		mark
	}
	eventFrame struct {
		Kind  string        `json:"kind"` // event
		Event lattice.Event `json:"event"`
		mark
	}
	laggedFrame struct {
		Kind   string `json:"kind"` // lagged
		Missed uint64 `json:"missed"`
	}
	errorFrame struct {
		Kind  string      `json:"kind"` // error
		Error ErrorDetail `json:"error"`
	}
)

// clientFrame is what a client may send.
type clientFrame struct {
	Cmd        string `json:"cmd"`
	ApprovalID string `json:"approval_id"`
	Decision   string `json:"decision"`
	Remember   string `json:"remember"`
	// Content is a question's answer (kind "question" in the approvals).
	Content map[string]any `json:"content"`
	// follow, unfollow
	TaskID string `json:"task_id"`
	// execute
	Ref            string  `json:"ref"`
	AgentID        string  `json:"agent_id"`
	Input          *string `json:"input"`
	ConversationID string  `json:"conversation_id"`
}

// Stream limits. wsBuffer bounds what one client may have queued: beyond
// it events are dropped for that client and reported in a lagged frame, so
// a stalled client costs a fixed amount of memory.
const (
	wsBuffer    = 256
	wsReadLimit = 64 << 10
	// wsMaxStreams caps concurrent streams, so their buffers together
	// stay bounded too; beyond it clients get 503 and retry.
	wsMaxStreams = 1024
)

// markOf is ev's mark.
func markOf(ev lattice.Event) mark {
	if !ev.Unverified {
		return mark{}
	}
	return mark{Unverified: true, Node: ev.Node}
}

// wsCommands are the cmds a client may send, listed in the ready frame
// as far as its identity may use them (commandsFor).
var wsCommands = []string{"approve", "execute", "follow", "unfollow"}

// commandsFor is wsCommands without those id's scopes do not allow:
// approve needs approve, execute needs execute (the commands check it
// again when sent).
func commandsFor(id *axocoatl.Identity) []string {
	out := make([]string, 0, len(wsCommands))
	for _, c := range wsCommands {
		switch {
		case c == "approve" && !id.Can(axocoatl.ScopeApprove), c == "execute" && !id.Can(axocoatl.ScopeExecute):
			continue
		}
		out = append(out, c)
	}
	return out
}

// wsTokenProtocol prefixes the token a browser offers as a subprotocol.
const wsTokenProtocol = "axocoatl.bearer."

// stream serves GET /api/events.
type stream struct {
	m       *Module
	history *lattice.History
	// writeTimeout bounds each frame's write (server.write_timeout, as
	// on every door): a client that stops reading is cut after it, and
	// its queued events freed.
	writeTimeout time.Duration
	// ctx ends every stream when the server shuts down (hijacked
	// connections are not tracked by http.Server.Shutdown).
	ctx context.Context
	// open counts the streams being served.
	open atomic.Int64
	// mu guards closing; live counts the streams whose handler runs, so
	// shutdown can wait for their close frames before the process exits.
	mu      sync.Mutex
	closing bool
	live    sync.WaitGroup
}

// enter registers a stream; false once shutdown began.
func (s *stream) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.live.Add(1)
	return true
}

// shutdown ends every stream (end cancels s.ctx) and waits, within ctx,
// until each has sent its close frame: http.Server.Shutdown does not
// wait for hijacked connections, and the process exits right after it.
func (s *stream) shutdown(ctx context.Context, end context.CancelFunc) {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	end()
	done := make(chan struct{})
	go func() { s.live.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

func (m *Module) serveStream(w http.ResponseWriter, r *http.Request) { m.stream.serve(w, r) }

func (s *stream) serve(w http.ResponseWriter, r *http.Request) {
	// Browsers cannot set headers on a WebSocket: they offer the token as
	// a subprotocol "axocoatl.bearer.<token>" (kept out of URLs and logs),
	// or as ?token= (older pages); the guard then checks it as any other.
	var subprotocols []string
	for _, p := range strings.Split(r.Header.Get("Sec-WebSocket-Protocol"), ",") {
		if tok, ok := strings.CutPrefix(strings.TrimSpace(p), wsTokenProtocol); ok && httpguard.TokenFrom(r) == "" {
			r.Header.Set("Authorization", "Bearer "+tok)
			subprotocols = []string{strings.TrimSpace(p)} // a browser requires the offered protocol back
		}
	}
	if tok := r.URL.Query().Get("token"); tok != "" && httpguard.TokenFrom(r) == "" {
		r.Header.Set("Authorization", "Bearer "+tok)
	}
	r, ok := s.m.eng.AuthorizeHTTP(w, r, axocoatl.ScopeRead)
	if !ok {
		return
	}
	if status, msg := checkHandshake(r); status != 0 {
		if status == http.StatusUpgradeRequired {
			w.Header().Set("Connection", "Upgrade")
			w.Header().Set("Upgrade", "websocket")
		}
		code := "bad_request"
		if status == http.StatusUpgradeRequired {
			code = "upgrade_required"
		}
		writeError(w, status, code, msg)
		return
	}
	if !s.enter() {
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, "shutting_down", "the server is shutting down")
		return
	}
	defer s.live.Done()
	if s.open.Add(1) > wsMaxStreams {
		s.open.Add(-1)
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, "unavailable", "too many event streams open")
		return
	}
	defer s.open.Add(-1)
	// The Engine's guard has checked Origin by the rules every door uses;
	// Accept's own check knows only a subset of the allowed_origins forms.
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true, Subprotocols: subprotocols})
	if err != nil {
		s.m.log.Debug("websocket refused", "error", err, "origin", r.Header.Get("Origin"))
		return
	}
	conn.SetReadLimit(wsReadLimit)
	sub, err := s.m.eng.Bus().Subscribe(lattice.Filter{}, wsBuffer)
	if err != nil {
		conn.Close(websocket.StatusTryAgainLater, "event bus closed")
		return
	}
	defer sub.Close()

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()

	// Writes come from the event loop and from replies to client commands;
	// replies go through a small queue drained by the same loop, so one
	// goroutine writes. The reader reads with the request's context, not
	// ctx: cancelling a Read closes the connection at once, and then the
	// close frame below (1001 on shutdown) would never be sent. Close
	// itself ends the Read once the peer answers (or after its timeout).
	replies := make(chan any, 8)
	readDone := make(chan struct{})
	lv := newLive()
	go func() {
		defer close(readDone)
		defer cancel()
		s.readLoop(r.Context(), ctx, conn, replies, lv)
	}()
	err = s.writeLoop(ctx, conn, sub, replies, lv)
	cancel()
	// The runs started here end (cancelled with ctx), the follows leave
	// their runs, before the connection closes.
	lv.wg.Wait()
	switch {
	case s.ctx.Err() != nil:
		conn.Close(websocket.StatusGoingAway, "server shutting down")
	case err != nil:
		conn.Close(websocket.StatusInternalError, "stream ended")
	default:
		conn.Close(websocket.StatusNormalClosure, "")
	}
	<-readDone
}

func (s *stream) writeLoop(ctx context.Context, conn *websocket.Conn, sub lattice.Subscription, replies <-chan any, lv *live) error {
	writeBytes := func(b []byte) error {
		if !utf8.Valid(b) {
			// A raw payload from another producer (a lattice peer) may
			// carry invalid bytes, only ever inside JSON strings; a
			// browser fails the connection over one, so replace them.
			b = bytes.ToValidUTF8(b, []byte("\uFFFD"))
		}
		// Bounded by its own timeout, not by ctx: the websocket library
		// closes the connection when a write's context ends, so a write
		// caught by shutdown would lose the 1001 close frame sent next.
		wctx, cancel := context.WithoutCancel(ctx), context.CancelFunc(func() {})
		if s.writeTimeout > 0 { // zero: the host set no write bound
			wctx, cancel = context.WithTimeout(wctx, s.writeTimeout)
		}
		defer cancel()
		return conn.Write(wctx, websocket.MessageText, b)
	}
	write := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		return writeBytes(b)
	}
	var lw liveWriter
	var batches []liveBatch
	pending := []any{}
	if s.m.cfg.Approvals.Pending != nil {
		// Taken after subscribing: an approval requested meanwhile shows
		// up in the list, as an event, or both (clients key by id).
		if p := s.m.cfg.Approvals.Pending(ctx); p != nil {
			pending = p
		}
	}
	// A caller who sees only some agents gets only the events naming one
	// of them (their agent_id); the pending approvals were filtered by
	// the same identity (Approvals.Pending reads it from ctx).
	id := axocoatl.IdentityFrom(ctx)
	history := s.history.Snapshot()
	if id.Restricted() {
		history = slices.DeleteFunc(history, func(ev lattice.Event) bool { return !eventVisible(id, ev) })
		pending = slices.DeleteFunc(pending, func(p any) bool { return !valueVisible(id, p) })
	}
	marked := make([]historyEvent, len(history))
	for i, ev := range history {
		marked[i] = historyEvent{ev, markOf(ev)}
	}
	if err := write(readyFrame{Kind: "ready", PendingApprovals: pending, History: marked, Commands: commandsFor(id)}); err != nil {
		return err
	}
	var reported uint64
	for {
		// Any drop means the buffer was full, so a receive follows and
		// this check runs again: no loss goes unreported.
		if n := sub.Missed(); n > reported {
			if err := write(laggedFrame{Kind: "lagged", Missed: n - reported}); err != nil {
				return err
			}
			reported = n
		}
		select {
		case <-ctx.Done():
			return nil
		case v := <-replies:
			if err := write(v); err != nil {
				return err
			}
		case ev, ok := <-sub.Events():
			if !ok {
				return nil // bus closed
			}
			if id.Restricted() && !eventVisible(id, ev) {
				continue
			}
			if err := write(eventFrame{Kind: "event", Event: ev, mark: markOf(ev)}); err != nil {
				return err
			}
		case <-lv.wake:
			// Everything pending of the live runs, at once: what came
			// while the last frames were written is coalesced.
			batches = lv.take(batches[:0])
			for i := range batches {
				if err := lw.frames(batches[i], writeBytes, write); err != nil {
					return err
				}
				batches[i] = liveBatch{}
			}
		}
	}
}

// readLoop answers client commands. Bad frames get an error frame; the
// stream goes on. It reads until the connection closes (readCtx is the
// request's); ctx ends with the stream and bounds replies and commands.
func (s *stream) readLoop(readCtx, ctx context.Context, conn *websocket.Conn, replies chan<- any, lv *live) {
	send := func(v any) {
		select {
		case replies <- v:
		case <-ctx.Done():
		}
	}
	reply := func(code, msg string) { send(errorFrame{Kind: "error", Error: ErrorDetail{Code: code, Message: msg}}) }
	for {
		typ, data, err := conn.Read(readCtx)
		if err != nil {
			return // closed by the client, too large, or ctx ended
		}
		if typ != websocket.MessageText {
			reply("bad_request", "send JSON text frames")
			continue
		}
		var f clientFrame
		if err := json.Unmarshal(data, &f); err != nil {
			reply("bad_request", jsonio.JSONProblem(err, "frame"))
			continue
		}
		switch f.Cmd {
		case "approve":
			if code, msg := s.approve(ctx, f); code != "" {
				reply(code, msg)
			}
		case "follow":
			if fail := s.follow(ctx, lv, f.TaskID); fail != nil {
				send(errorFrame{Kind: "error", Error: *fail})
			}
		case "unfollow":
			if f.TaskID == "" || len(f.TaskID) > wsTaskIDBytes {
				reply("bad_request", `"task_id" is required, at most `+strconv.Itoa(wsTaskIDBytes)+" bytes")
			} else if !lv.unfollow(f.TaskID) {
				send(errorFrame{Kind: "error", Error: ErrorDetail{Code: "not_following", Message: "this socket does not follow task " + jsonio.Quote(f.TaskID) + " (a run started on it ends with its result)", TaskID: f.TaskID}})
			}
		case "execute":
			if fail := s.execute(ctx, lv, f); fail != nil {
				send(*fail)
			}
		case "":
			reply("bad_request", `missing "cmd"`)
		default:
			reply("bad_request", "unknown cmd "+jsonio.Quote(f.Cmd))
		}
	}
}

// approve hands an approve command to the approval module. It returns an
// error code and message, or "" when the decision was taken (the module's
// ApprovalResolved event then reaches every client).
func (s *stream) approve(ctx context.Context, f clientFrame) (code, msg string) {
	if s.m.cfg.Approvals.Resolve == nil {
		return "unavailable", "approvals are not enabled in this daemon"
	}
	switch {
	case f.ApprovalID == "":
		return "bad_request", `"approval_id" is required`
	case f.Decision != "allow" && f.Decision != "deny":
		return "bad_request", `"decision" must be "allow" or "deny"`
	case f.Remember != "" && f.Remember != "once" && f.Remember != "always":
		return "bad_request", `"remember" must be "once" or "always"`
	}
	if f.Content != nil {
		if s.m.cfg.Approvals.Answer == nil {
			return "unavailable", "answers with content are not enabled in this daemon"
		}
		if err := s.m.cfg.Approvals.Answer(ctx, f.ApprovalID, f.Decision, f.Content); err != nil {
			return "approval_failed", err.Error()
		}
		return "", ""
	}
	if f.Remember == "" {
		f.Remember = "once"
	}
	if err := s.m.cfg.Approvals.Resolve(ctx, f.ApprovalID, f.Decision, f.Remember); err != nil {
		return "approval_failed", err.Error()
	}
	return "", ""
}

// checkHandshake makes the usual handshake mistakes answer in the API's
// error shape (websocket.Accept answers them in plain text): a plain GET,
// often a proxy that dropped the Upgrade headers, gets 426; a wrong
// version or a missing key 400. Accept still checks everything.
func checkHandshake(r *http.Request) (status int, msg string) {
	switch {
	case !headerHasToken(r.Header, "Connection", "upgrade") || !headerHasToken(r.Header, "Upgrade", "websocket"):
		return http.StatusUpgradeRequired, "GET /api/events is a WebSocket: the request needs Connection: Upgrade and Upgrade: websocket (a proxy may have dropped them)"
	case r.Header.Get("Sec-WebSocket-Version") != "13":
		return http.StatusBadRequest, "unsupported WebSocket version " + jsonio.Quote(r.Header.Get("Sec-WebSocket-Version")) + " (only 13)"
	case r.Header.Get("Sec-WebSocket-Key") == "":
		return http.StatusBadRequest, "missing Sec-WebSocket-Key"
	}
	return 0, ""
}

// headerHasToken reports whether a comma-separated header holds token.
func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// eventVisible reports whether a restricted identity sees ev: its payload
// names an agent (agent_id) the identity sees. Events naming none (custom
// events, a server's tool list) are not shown to it.
func eventVisible(id *axocoatl.Identity, ev lattice.Event) bool {
	var p struct {
		AgentID *string `json:"agent_id"`
	}
	if json.Unmarshal(ev.Payload, &p) != nil || p.AgentID == nil {
		return false
	}
	return id.SeesAgent(*p.AgentID)
}

// valueVisible is eventVisible for a value in its JSON shape.
func valueVisible(id *axocoatl.Identity, v any) bool {
	b, err := json.Marshal(v)
	return err == nil && eventVisible(id, lattice.Event{Payload: b})
}
