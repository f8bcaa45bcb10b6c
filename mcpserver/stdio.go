package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeStdio speaks MCP over newline-delimited JSON-RPC: requests from in,
// responses and notifications to out, nothing else.
//
// When in reaches EOF, the requests already read are answered (each run is
// bounded by its agent's timeout; a request the client cancelled is not
// waited for, nor a 2026-07-28 subscriptions/listen, which lasts until its
// client ends it), then the session ends and ServeStdio returns nil. So
// `printf '<init>\n<call>\n' | axocoatl mcp serve` prints both answers.
// It returns ctx.Err() when ctx ends first (calls in flight are cancelled)
// and [ErrClosed] when the Server is closed ([Server.Close]).
//
// A line that is not JSON gets a -32700 parse error, one that is not a
// JSON-RPC message a -32600 invalid request (as does a batch, which the
// negotiated versions no longer allow), a line over MaxMessageBytes a -32600
// too, as does a call whose numeric id is not a plain integer of at most
// 2^53 in magnitude (the go-sdk would answer 1.5 as 1), a call with a
// notifications/ method, a call reusing the id of one in flight, a
// subscriptions/listen beyond [MaxStdioListens] open (-32000), and an
// initialize once the session has served a 2026-07-28 request (a session
// is of one era); the session goes on in every case. The go-sdk's own reader would end
// the session on such input, so lines are checked here before it sees them.
//
// When ServeStdio returns before in's EOF, it closes in if in is an
// [io.Closer], to end the goroutine reading it, and waits a moment for that
// goroutine. A read that Close cannot interrupt (a blocking [os.Stdin]) ends
// the goroutine at the next line or at process exit.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	if !s.life.Started() {
		return ErrNotStarted
	}
	if s.life.Stopped() {
		return ErrClosed
	}
	pending := newInflight()
	w := &frameWriter{w: out, pending: pending}
	pr, pw := io.Pipe()
	stop := make(chan struct{}) // closed when the session is over: stop draining
	pumped := make(chan error, 1)
	go func() {
		err := s.pumpFrames(in, pw, w, pending)
		if err == nil {
			// EOF: answer what was asked before hanging up.
			pending.wait(stop)
		}
		pumped <- err // before the session can see EOF, so the result is ready when it ends
		pw.CloseWithError(err)
	}()

	ss, err := s.mcp.Connect(ctx, &mcp.IOTransport{Reader: pr, Writer: w, MaxLineLength: -1}, nil)
	if err == nil {
		waited := make(chan error, 1)
		go func() { waited <- ss.Wait() }()
		select {
		case err = <-waited:
		case <-ctx.Done():
			ss.Close()
			err = <-waited
		}
		s.endSessionRuns(ss)
	}
	close(stop)
	pr.Close() // unblocks the pump if it is writing a frame nobody reads

	var pumpErr error
	eof := false
	select {
	case pumpErr = <-pumped:
		eof = pumpErr == nil
	default:
		// The session ended before in did: end the reader if we can.
		if c, ok := in.(io.Closer); ok {
			c.Close()
			select {
			case <-pumped:
			case <-time.After(time.Second):
			}
		}
	}
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case s.life.Stopped():
		return ErrClosed
	case eof:
		return nil
	case pumpErr != nil:
		return fmt.Errorf("mcpserver: reading stdio: %w", pumpErr)
	case w.failed() != nil:
		// The client stopped reading (EPIPE): that is the cause, whatever
		// the go-sdk's session saw as it closed (often its reader's
		// io.ErrClosedPipe, the order depending on the scheduler).
		return fmt.Errorf("mcpserver: writing stdio: %w", w.failed())
	case err != nil:
		return fmt.Errorf("mcpserver: stdio session: %w", err)
	}
	return errors.New("mcpserver: stdio session ended before its input")
}

// frameWriter serializes whole frames (the go-sdk writes each message in
// one Write, and so do the error replies of pumpFrames) and notes which
// requests have been answered.
type frameWriter struct {
	mu      sync.Mutex
	w       io.Writer
	pending *inflight
	err     error // the first failed write's
}

// write writes p whole and keeps the first error; f.mu is held.
func (f *frameWriter) write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err != nil && f.err == nil {
		f.err = err
	}
	return n, err
}

// failed is the first write's error, nil while every write succeeded.
func (f *frameWriter) failed() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

func (f *frameWriter) Write(p []byte) (int, error) {
	if msg, err := jsonrpc.DecodeMessage(bytes.TrimSpace(p)); err == nil {
		if resp, ok := msg.(*jsonrpc.Response); ok {
			// The id is free again before the answer is written (as in
			// the go-sdk): a client may reuse it as soon as it reads the
			// answer. EOF waits until it is written.
			defer f.pending.answering(resp.ID)()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.write(p)
}

// reply writes an error reply of pumpFrames. It is not noted as an answer:
// its id may be that of a request in flight (a duplicate id, an invalid
// message reusing it), whose own answer EOF must still wait for.
func (f *frameWriter) reply(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.write(p)
}

// Close is a no-op: out belongs to the caller (it is often [os.Stdout]).
func (f *frameWriter) Close() error { return nil }

// inflight is the set of requests read from stdin and not yet answered.
type inflight struct {
	mu sync.Mutex
	// ids holds every request in flight (a reused id is refused); the
	// value says whether EOF waits for its answer: not for a
	// subscriptions/listen, which is answered only when the client ends it.
	ids map[jsonrpc.ID]bool
	// awaited counts the ids EOF waits for.
	awaited int
	// writing counts answers taken out of ids and not yet written.
	writing int
	idle    chan struct{} // closed while awaited and writing are 0
}

func newInflight() *inflight {
	idle := make(chan struct{})
	close(idle)
	return &inflight{ids: map[jsonrpc.ID]bool{}, idle: idle}
}

func (f *inflight) busy() bool { return f.awaited > 0 || f.writing > 0 }

// add notes id, which EOF waits for when await is set; it reports
// errInFlight when id is in flight already, errTooManyListens when id is a
// listen (not awaited) and [MaxStdioListens] are open.
func (f *inflight) add(id jsonrpc.ID, await bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.ids[id]; ok {
		return errInFlight
	}
	if !await && len(f.ids)-f.awaited >= MaxStdioListens {
		return errTooManyListens
	}
	f.ids[id] = await
	if await {
		if !f.busy() {
			f.idle = make(chan struct{})
		}
		f.awaited++
	}
	return nil
}

var (
	errInFlight       = errors.New("in flight")
	errTooManyListens = errors.New("too many listens")
)

// MaxStdioListens bounds the 2026-07-28 subscriptions/listen requests open
// at once on one stdio session (each holds a goroutine until its client
// ends it; a client needs one): the next gets a -32000 error.
const MaxStdioListens = 8

// forgetLocked removes id from ids, reporting whether it was there.
func (f *inflight) forgetLocked(id jsonrpc.ID) bool {
	await, ok := f.ids[id]
	if !ok {
		return false
	}
	delete(f.ids, id)
	if await {
		f.awaited--
	}
	return true
}

// done forgets id; it reports whether id was in flight.
func (f *inflight) done(id jsonrpc.ID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	wasBusy := f.busy()
	if !f.forgetLocked(id) {
		return false
	}
	if wasBusy && !f.busy() {
		close(f.idle)
	}
	return true
}

// answering frees id for reuse while its answer is written; the returned
// func marks the answer written.
func (f *inflight) answering(id jsonrpc.ID) (written func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	wasBusy := f.busy()
	if !f.forgetLocked(id) {
		return func() {}
	}
	if !wasBusy {
		f.idle = make(chan struct{}) // a listen's answer: EOF waits for it to be written
	}
	f.writing++
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.writing--
		if !f.busy() {
			close(f.idle)
		}
	}
}

// wait returns when every request has been answered or stop is closed.
func (f *inflight) wait(stop <-chan struct{}) {
	f.mu.Lock()
	idle := f.idle
	f.mu.Unlock()
	select {
	case <-idle:
	case <-stop:
	}
}

// pumpFrames copies well-formed JSON-RPC lines from in to the session and
// answers the others itself. It returns nil at EOF.
func (s *Server) pumpFrames(in io.Reader, session io.Writer, out *frameWriter, pending *inflight) error {
	br := bufio.NewReaderSize(in, 64<<10)
	limit := s.cfg.MaxMessageBytes
	stateless := false // a request of the 2026-07-28 era went on to the session
	var line []byte
	for {
		line = line[:0]
		tooLong := false
		var err error
		for {
			var chunk []byte
			chunk, err = br.ReadSlice('\n')
			if !tooLong {
				if int64(len(line)+len(chunk)) > limit+2 { // +2: the line ending
					tooLong = true
					line = line[:0]
				} else {
					line = append(line, chunk...)
				}
			}
			if err != bufio.ErrBufferFull {
				break
			}
		}
		// The +2 above let a line of limit+1 bytes (+ "\n") through.
		if !tooLong && int64(len(bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r")))) > limit {
			tooLong = true
		}
		if tooLong {
			s.reject(out, jsonrpc.CodeInvalidRequest, fmt.Sprintf("message exceeds %d bytes", limit), nil)
		} else if frame := bytes.TrimSpace(line); len(frame) > 0 {
			msg, info, reply := checkFrame(frame, s.frameLimits())
			forward := false
			if reply == nil && stateless && isCall(msg, "initialize") {
				reply = &frameError{code: jsonrpc.CodeInvalidRequest, message: "Invalid Request: this session speaks " + ProtocolVersion2026 + " (its requests carry their version in _meta), and initialize belongs to the older era: start a new session for it", id: idLiteral(info.id)}
			}
			if reply == nil {
				forward, reply = track(pending, msg, info.id)
			}
			if forward && !stateless {
				// The go-sdk binds the session to the stateless era at
				// its first request of that era, and then answers an
				// initialize with an error of code 0.
				stateless = statelessRequest(msg, info.meta)
			}
			if reply != nil {
				s.reject(out, reply.code, reply.message, reply.id)
			} else if forward {
				frame = append(frame, '\n')
				if _, werr := session.Write(frame); werr != nil {
					return werr
				}
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// isCall reports whether msg is a call of method.
func isCall(msg jsonrpc.Message, method string) bool {
	req, ok := msg.(*jsonrpc.Request)
	return ok && req.IsCall() && req.Method == method
}

// statelessRequest reports whether msg is a call of the 2026-07-28 era that
// this server speaks: its _meta names that version.
func statelessRequest(msg jsonrpc.Message, meta []byte) bool {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || !req.IsCall() {
		return false
	}
	v := string(memberValue(meta, "io.modelcontextprotocol/protocolVersion"))
	return len(v) > 2 && statelessEra(v[1:len(v)-1]) && slices.Contains(ProtocolVersions(), v[1:len(v)-1])
}

type frameError struct {
	code    int64
	message string
	id      json.RawMessage // the request's id when one could be read; nil: null
}

// checkFrame decodes a frame, or returns the error reply it deserves, and
// what scanFrame noted of it. One scan validates the JSON (the go-sdk's
// DecodeMessage ignores trailing data, which its stdio reader does not and
// ends the session), bounds its values and depth, and finds the members
// the checks below read; a plain request is built from that scan without a
// second decode.
func checkFrame(frame []byte, lim frameLimits) (jsonrpc.Message, frameInfo, *frameError) {
	info, valid := scanFrame(frame, lim)
	if !valid {
		return nil, info, &frameError{code: jsonrpc.CodeParseError, message: "Parse error: not valid JSON"}
	}
	if frame[0] == '[' {
		return nil, info, &frameError{code: jsonrpc.CodeInvalidRequest, message: "Invalid Request: JSON-RPC batches are not supported"}
	}
	if reply := info.overLimits(lim); reply != nil {
		return nil, info, reply
	}
	msg, err := info.decode(frame)
	if err != nil {
		return nil, info, &frameError{code: jsonrpc.CodeInvalidRequest, message: "Invalid Request: " + err.Error(), id: idLiteral(info.id)}
	}
	req, ok := msg.(*jsonrpc.Request)
	if ok && !req.IsCall() && info.hasID {
		// "id": null is a request in JSON-RPC, which MCP forbids; the
		// go-sdk takes it for a notification and never answers, so a
		// client would wait forever for its reply.
		return nil, info, &frameError{code: jsonrpc.CodeInvalidRequest, message: "Invalid Request: id must be a string or a number, not null"}
	}
	if ok && req.IsCall() && strings.HasPrefix(req.Method, "notifications/") {
		// The go-sdk refuses it too, but acts on a cancellation first
		// (its canceller looks at the method only).
		return nil, info, &frameError{code: jsonrpc.CodeInvalidRequest, message: "Invalid Request: " + req.Method + " is a notification and must not have an id", id: idLiteral(info.id)}
	}
	if ok && req.IsCall() {
		if _, numeric := req.ID.Raw().(int64); numeric {
			// The go-sdk reads a numeric id as a float64 and answers with
			// its int64 truncation: 1.5 is answered as 1, 2^53+1 as 2^53,
			// so the client never matches its answer (and two such calls
			// may share an id). Only exact integers pass.
			if id := idLiteral(info.id); id != nil && !exactIntID(id) {
				return nil, info, &frameError{code: jsonrpc.CodeInvalidRequest, message: "Invalid Request: a numeric id must be an integer of at most 2^53 in magnitude, without fraction or exponent", id: id}
			}
		}
	}
	return msg, info, nil
}

// exactIntID reports whether a numeric id's literal is a plain integer
// (no fraction, no exponent) that a float64 holds exactly, so that the
// go-sdk's answer carries the same id.
func exactIntID(lit []byte) bool {
	if bytes.ContainsAny(lit, ".eE") {
		return false
	}
	v, err := strconv.ParseInt(string(lit), 10, 64)
	return err == nil && v >= -(1<<53) && v <= 1<<53
}

// track notes a request that awaits an answer, and forgets one the client
// cancelled: the client ignores its answer, so EOF need not wait for it.
// It reports whether msg goes on to the session, or the error it gets
// instead:
//   - a call reusing the id of a call in flight is refused: the go-sdk
//     never answers it (it cannot name the request it refuses), so the
//     client would wait forever;
//   - a cancellation of a request that is not in flight is dropped. The
//     go-sdk cancels in a goroutine of its own, so such a cancellation,
//     followed at once by a request reusing the id, cancelled that new
//     request (MCP lets a receiver ignore cancellations of unknown
//     requests).
func track(pending *inflight, msg jsonrpc.Message, rawID []byte) (forward bool, reply *frameError) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		return true, nil
	}
	if req.IsCall() {
		// A subscriptions/listen is answered only when the client ends
		// it: EOF (the client is gone) does not wait for it.
		switch err := pending.add(req.ID, req.Method != "subscriptions/listen"); err {
		case errInFlight:
			id, _ := json.Marshal(req.ID.Raw())
			return false, &frameError{code: jsonrpc.CodeInvalidRequest, message: "Invalid Request: id " + string(id) + " is already used by a request in flight", id: idLiteral(rawID)}
		case errTooManyListens:
			return false, &frameError{code: codeServerBusy, message: fmt.Sprintf("too many open subscriptions/listen requests (%d): end one first", MaxStdioListens), id: idLiteral(rawID)}
		}
		return true, nil
	}
	if req.Method == "notifications/cancelled" {
		var p struct {
			RequestID any `json:"requestId"`
		}
		if json.Unmarshal(req.Params, &p) == nil {
			if id, err := jsonrpc.MakeID(p.RequestID); err == nil {
				return pending.done(id), nil
			}
		}
	}
	return true, nil
}

// requestID digs a usable id out of a request, so the client can match an
// error to its call (and checkFrame can read a numeric id's literal). Only
// the member named exactly "id" counts: a struct field would also take "ID"
// or "Id", which JSON-RPC does not know, and echo that as the request's id.
// frame must be valid JSON (checkFrame's [json.Valid] comes first); the id is
// found without decoding the rest of the frame (the call's arguments).
func requestID(frame []byte) json.RawMessage { return idLiteral(memberValue(frame, "id")) }

// idLiteral is requestID of the id member's raw value (nil: none).
func idLiteral(id []byte) json.RawMessage {
	if len(id) == 0 {
		return nil
	}
	switch id[0] {
	case '"':
		return id
	case 'n', 't', 'f', '{', '[':
		return nil
	}
	if _, err := strconv.ParseFloat(string(id), 64); err != nil {
		return nil
	}
	return id
}

// memberValue returns the raw value of the member named name of the JSON
// object frame (valid JSON), the last one when there are several, with
// names compared after unescaping: what decoding frame into a
// map[string]json.RawMessage would give, without the allocations. nil when
// frame is not an object or has no such member.
func memberValue(frame []byte, name string) []byte {
	i := skipSpace(frame, 0)
	if i >= len(frame) || frame[i] != '{' {
		return nil
	}
	var found []byte
	for i++; ; i++ { // i++: past '{' or ','
		i = skipSpace(frame, i)
		if i >= len(frame) || frame[i] != '"' {
			return found // '}' of an empty object
		}
		end := skipString(frame, i)
		key := frame[i:end]
		i = skipSpace(frame, end)
		if i >= len(frame) || frame[i] != ':' {
			return nil
		}
		i = skipSpace(frame, i+1)
		vend := skipValue(frame, i)
		if vend <= i {
			return nil
		}
		if keyIs(key, name) {
			found = frame[i:vend]
		}
		i = skipSpace(frame, vend)
		if i >= len(frame) || frame[i] != ',' {
			return found
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] ('"').
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// skipValue returns the index after the value starting at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = skipString(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	j := i
	for j < len(b) && !strings.ContainsRune(",}] \t\n\r", rune(b[j])) {
		j++
	}
	return j
}

// keyIs reports whether the quoted member name key is name once unescaped.
func keyIs(key []byte, name string) bool {
	if bytes.IndexByte(key, '\\') < 0 {
		return len(key) == len(name)+2 && string(key[1:len(key)-1]) == name
	}
	var k string
	return json.Unmarshal(key, &k) == nil && k == name
}

func (s *Server) reject(out *frameWriter, code int64, message string, id json.RawMessage) {
	if id == nil {
		id = json.RawMessage("null")
	}
	reply, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	}{code, message}})
	if err != nil {
		return
	}
	s.log.Debug("rejected stdio frame", "code", code, "message", message)
	out.reply(append(reply, '\n'))
}
