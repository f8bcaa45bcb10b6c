package wire

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
)

// Bounds of one streamed answer, beside the ones it shares with every
// answer (the call's Timeout, which bounds the whole stream, and
// maxResponseBody, which bounds its bytes).
const (
	// MaxEventBytes bounds one SSE event (its event name and data): a
	// server that never ends a line would otherwise fill memory up to the
	// body limit in one buffer. Real events are well under 1 KiB; a server
	// that sends a whole tool call's arguments in one event stays far
	// below this.
	MaxEventBytes = 4 << 20
	// MaxEvents bounds the events of one answer, and with it the calls of
	// emit: at the body limit a real stream has some 80,000 (OpenAI's
	// chunks are ~200 bytes), tiny hostile events could make millions.
	MaxEvents = 1 << 18
	// MaxDeltas bounds the deltas one answer emits: an event may carry
	// several (OpenAI's chunks can hold many tool-call pieces), so the
	// bound on events alone would not bound them.
	MaxDeltas = 1 << 18
	// MaxToolCalls bounds the tool calls one streamed answer may start
	// (the run loop refuses far fewer per turn; this only stops a wire
	// index of a billion from becoming a billion slots).
	MaxToolCalls = 1024
	// MaxArgumentBytes bounds the arguments text of one tool call.
	MaxArgumentBytes = 4 << 20
)

// drainBytes is what Stream reads after a whole answer to reuse its
// connection; a server that sends more is cut off with its connection.
const (
	drainBytes = 4 << 10
	drainWait  = 100 * time.Millisecond
)

// sseBuffer is the read buffer of a stream: lines up to this size are read
// without copying them first.
const sseBuffer = 64 << 10

// Stream sends one POST request (in as its JSON body) to path, as Call
// does: bounded by the Timeout, which here bounds the whole stream, and
// retried on transient failures, but only before an answer starts, so no
// delta is ever emitted twice. A 2xx text/event-stream answer is handed to
// onSSE; a 2xx JSON answer (a compatible server that ignores the request
// to stream) is read whole, within the same body limit, and handed to
// onJSON (nil: refused as any other type). Every error is a
// *provider.Error: an onSSE or onJSON error that is one is returned as it
// is, any other becomes one with status 200.
func (c *Client) Stream(ctx context.Context, path string, in any, onSSE func(*SSE) error, onJSON func([]byte) error) error {
	body, perr := c.encode(in)
	if perr != nil {
		return perr
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(parent, c.timeout)
	defer cancel()
	a, perr := c.send(parent, ctx, http.MethodPost, path, body, true, "text/event-stream", true)
	if perr != nil {
		return perr
	}
	resp := a.resp
	defer resp.Body.Close()
	ct := resp.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	var err error
	switch {
	case mt == "text/event-stream":
		sse := NewSSE(resp.Body)
		err = onSSE(sse)
		sse.release()
		if err == nil {
			// The answer is whole; what may follow its last event (the
			// chunked body's end) is read, so that the connection goes back
			// to the pool instead of being closed unread: the next call
			// would pay for a new TLS handshake. A server that keeps the
			// body open after the end is given drainWait, not the Timeout.
			t := time.AfterFunc(drainWait, cancel)
			io.CopyN(io.Discard, resp.Body, drainBytes)
			t.Stop()
		}
	case isJSONType(ct) && onJSON != nil:
		var raw []byte
		if raw, err = io.ReadAll(resp.Body); err == nil {
			err = onJSON(raw)
		} else {
			err = fmt.Errorf("reading the response: %w", err)
		}
	default:
		return &provider.Error{Provider: c.kind, Status: resp.StatusCode,
			Message: c.scrub(fmt.Sprintf("malformed response: content-type %q, want text/event-stream", ct))}
	}
	return c.streamError(parent, ctx, resp.StatusCode, err)
}

// streamError turns the failure of a started answer into a *provider.Error.
func (c *Client) streamError(parent, ctx context.Context, status int, err error) error {
	if err == nil {
		return nil
	}
	var perr *provider.Error
	if errors.As(err, &perr) {
		return perr
	}
	e := &provider.Error{Provider: c.kind, Status: status, Err: err}
	switch {
	case parent.Err() != nil:
		e.Status, e.Err = 0, parent.Err()
		e.Message = "call abandoned: " + parent.Err().Error()
	case ctx.Err() != nil:
		e.Status, e.Err = 0, ctx.Err()
		e.Message = fmt.Sprintf("the answer did not end within %s (timeout)", c.timeout)
	case errors.Is(err, errBodyTooLarge):
		e.Err = nil
		e.Message = errBodyTooLarge.Error()
	default:
		e.Message = err.Error()
	}
	e.Message = c.scrub(e.Message)
	return e
}

// MalformedStream is the error of a stream that broke the provider's
// protocol; what says how.
func MalformedStream(what string, args ...any) error {
	return fmt.Errorf("malformed stream: "+what, args...)
}

// SSE reads a text/event-stream body (the WHATWG format the providers
// speak): lines ending in LF or CRLF, `event:` and `data:` fields (several
// data lines are joined with LF), `:` comments, a blank line ending each
// event; other fields (id, retry) are ignored, and so is a byte order
// mark at the start. A lone CR as a line ending,
// which the format allows and no provider sends, is not recognised.
type SSE struct {
	r       *bufio.Reader
	event   []byte
	data    []byte
	long    []byte // a line longer than the read buffer, put together
	events  int
	started bool // the first line was read
}

// NewSSE reads the stream r.
func NewSSE(r io.Reader) *SSE {
	br := sseReaders.Get().(*bufio.Reader)
	br.Reset(r)
	return &SSE{r: br}
}

// sseReaders keeps the read buffers of finished streams: a model call's
// stream would otherwise allocate (and zero) sseBuffer bytes between its
// response's headers and its first delta, and give the collector that
// much more to do per call.
var sseReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, sseBuffer) }}

// release gives s's read buffer back once the stream is read (what Next
// returned is not used after it); s is not used after.
func (s *SSE) release() {
	if s.r == nil {
		return
	}
	s.r.Reset(nil)
	sseReaders.Put(s.r)
	s.r = nil
}

// Next returns the next event's name (empty when it has none) and data,
// both valid until the next call; io.EOF when the stream ends (an event
// the stream cuts short is dropped, as the format says). It fails past
// MaxEventBytes in one event or MaxEvents in the stream, and with the
// body's read error (wrapped) when reading fails.
func (s *SSE) Next() (event, data []byte, err error) {
	s.event, s.data = s.event[:0], s.data[:0]
	hasData := false
	for {
		line, err := s.line()
		if err != nil {
			return nil, nil, err
		}
		if len(line) == 0 {
			if !hasData {
				// An event without data is not dispatched.
				s.event = s.event[:0]
				continue
			}
			if s.events++; s.events > MaxEvents {
				return nil, nil, MalformedStream("more than %d events in one answer", MaxEvents)
			}
			return s.event, s.data, nil
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte{':'})
		value = bytes.TrimPrefix(value, []byte{' '})
		switch string(field) {
		case "event":
			s.event = append(s.event[:0], value...)
		case "data":
			if hasData {
				s.data = append(s.data, '\n')
			}
			s.data = append(s.data, value...)
			hasData = true
		}
		if len(s.event)+len(s.data) > MaxEventBytes {
			return nil, nil, s.tooLarge()
		}
	}
}

func (s *SSE) tooLarge() error {
	return MalformedStream("an event over %d MiB", MaxEventBytes>>20)
}

// line reads one line without its ending; io.EOF at the end of the
// stream, also when the stream ends inside a line.
func (s *SSE) line() ([]byte, error) {
	line, err := s.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		s.long = append(s.long[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			if len(s.long) > MaxEventBytes {
				return nil, s.tooLarge()
			}
			line, err = s.r.ReadSlice('\n')
			s.long = append(s.long, line...)
		}
		line = s.long
	}
	switch {
	case err == io.EOF:
		return nil, io.EOF
	case err != nil:
		return nil, fmt.Errorf("reading the stream: %w", err)
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if !s.started {
		// A byte order mark before the first line is not part of it.
		s.started = true
		line = bytes.TrimPrefix(line, []byte("\xEF\xBB\xBF"))
	}
	return line, nil
}

// Assembler puts a streamed answer together as the deltas come, emits each
// one, and holds the bounds on tool calls and argument bytes. Text goes to
// [agent.Response.Content] as it is; the arguments of each call become
// JSON as the non-streaming path makes them (ArgumentsJSON), so both paths
// give the same Response for the same answer.
type Assembler struct {
	emit   func(agent.Delta)
	deltas int
	text   strings.Builder
	calls  []pendingCall
}

// send emits d, within MaxDeltas.
func (a *Assembler) send(d agent.Delta) error {
	if a.deltas++; a.deltas > MaxDeltas {
		return MalformedStream("more than %d deltas in one answer", MaxDeltas)
	}
	a.emit(d)
	return nil
}

type pendingCall struct {
	id, name string
	args     strings.Builder
}

// NewAssembler emits to emit (nil: nowhere).
func NewAssembler(emit func(agent.Delta)) *Assembler {
	if emit == nil {
		emit = func(agent.Delta) {}
	}
	return &Assembler{emit: emit}
}

// Text adds a piece of the answer's text.
func (a *Assembler) Text(s string) error {
	if s == "" {
		return nil
	}
	a.text.WriteString(s)
	return a.send(agent.Delta{Kind: agent.DeltaText, Text: s})
}

// Content is the text so far.
func (a *Assembler) Content() string { return a.text.String() }

// Calls is the number of tool calls started.
func (a *Assembler) Calls() int { return len(a.calls) }

// StartCall starts a tool call and returns its index.
func (a *Assembler) StartCall(id, name string) (int, error) {
	if len(a.calls) >= MaxToolCalls {
		return 0, MalformedStream("more than %d tool calls in one answer", MaxToolCalls)
	}
	i := len(a.calls)
	a.calls = append(a.calls, pendingCall{id: id, name: name})
	return i, a.send(agent.Delta{Kind: agent.DeltaToolCall, ToolCallIndex: i, ToolCallID: id, ToolName: name})
}

// Arguments adds a piece of the arguments text of call i.
func (a *Assembler) Arguments(i int, s string) error {
	if s == "" {
		return nil
	}
	c := &a.calls[i]
	if c.args.Len()+len(s) > MaxArgumentBytes {
		return MalformedStream("the arguments of tool call %d (%s) are over %d MiB", i, c.name, MaxArgumentBytes>>20)
	}
	c.args.WriteString(s)
	return a.send(agent.Delta{Kind: agent.DeltaToolArguments, ToolCallIndex: i, Arguments: s})
}

// CallID is the id of call i.
func (a *Assembler) CallID(i int) string { return a.calls[i].id }

// ArgumentsLen is the length of call i's arguments text so far.
func (a *Assembler) ArgumentsLen(i int) int { return a.calls[i].args.Len() }

// ToolCalls are the calls as [agent.Response.ToolCalls].
func (a *Assembler) ToolCalls() []agent.ToolCall {
	if len(a.calls) == 0 {
		return nil
	}
	out := make([]agent.ToolCall, len(a.calls))
	for i := range a.calls {
		c := &a.calls[i]
		out[i] = agent.ToolCall{ID: c.id, Name: c.name, Arguments: ArgumentsJSON(c.args.String())}
	}
	return out
}

// EmitWhole emits an answer that came whole (a server that ignored the
// request to stream) as its deltas, as [agent.GenerateStream] does for a
// model that does not stream, and returns it.
func EmitWhole(res *agent.Response, emit func(agent.Delta)) *agent.Response {
	if emit == nil {
		return res
	}
	if res.Content != "" {
		emit(agent.Delta{Kind: agent.DeltaText, Text: res.Content})
	}
	for i, tc := range res.ToolCalls {
		emit(agent.Delta{Kind: agent.DeltaToolCall, ToolCallIndex: i, ToolCallID: tc.ID, ToolName: tc.Name})
		if len(tc.Arguments) > 0 {
			emit(agent.Delta{Kind: agent.DeltaToolArguments, ToolCallIndex: i, Arguments: string(tc.Arguments)})
		}
	}
	return res
}

// Index is a non-negative JSON integer that may be absent (OK false) or
// null, decoded without allocating (a *int would cost an allocation per
// frame). Values of MaxIndex and over are refused, so that no index can
// size a slice beyond the stream's bounds.
type Index struct {
	V  int
	OK bool
}

// MaxIndex bounds an Index.
const MaxIndex = 1 << 20

func (x *Index) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if len(b) == 0 {
		return errors.New("empty index")
	}
	n := 0
	for _, c := range b {
		// By hand: strconv's error would keep (and so allocate) the text.
		if c < '0' || c > '9' || n >= MaxIndex {
			return fmt.Errorf("index %.20s is not an integer from 0 to %d", b, MaxIndex-1)
		}
		n = n*10 + int(c-'0')
	}
	if n >= MaxIndex {
		return fmt.Errorf("index %.20s is not an integer from 0 to %d", b, MaxIndex-1)
	}
	x.V, x.OK = n, true
	return nil
}

// Frames decodes the JSON data of one event after another through one
// json.Decoder, so that its buffers and scanner are reused: json.Unmarshal
// would allocate its state anew for every event (some ten allocations per
// delta where this makes one or two). Each Decode takes exactly one JSON
// value; data after it is an error, as it is for json.Unmarshal.
type Frames struct {
	dec  *json.Decoder
	src  frameSource
	read int64 // bytes handed to dec so far
}

type frameSource struct {
	f    *Frames
	next []byte // the rest of the current frame's data
}

func (s *frameSource) Read(p []byte) (int, error) {
	if len(s.next) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.next)
	s.next = s.next[n:]
	s.f.read += int64(n)
	return n, nil
}

// NewFrames returns a decoder for a stream's frames.
func NewFrames() *Frames {
	f := &Frames{}
	f.src.f = f
	f.dec = json.NewDecoder(&f.src)
	return f
}

// Decode decodes data, one event's JSON, into v. Once it has failed the
// Frames are spent (the stream is over anyway).
func (f *Frames) Decode(data []byte, v any) error {
	f.src.next = data
	if err := f.dec.Decode(v); err != nil {
		return frameProblem(err)
	}
	// The bytes of data after the value: those read but not consumed, and
	// those not read yet. Only spaces may follow a value (the spaces
	// already read are skipped by the next Decode).
	unconsumed := f.read - f.dec.InputOffset()
	tail := data[len(data)-len(f.src.next)-int(unconsumed):]
	if len(bytes.TrimSpace(tail)) > 0 {
		f.dec = json.NewDecoder(&f.src) // its state is that of the wrong value
		return fmt.Errorf("invalid JSON: data after the value (%.20q)", bytes.TrimSpace(tail))
	}
	return nil
}

// frameProblem says why a frame could not be decoded (decodeProblem
// speaks of a body, and its offsets would count from the stream's start).
func frameProblem(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Errorf("invalid JSON: %s", syn.Error())
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("invalid JSON: the data ends inside a value")
	case errors.Is(err, io.EOF):
		return errors.New("invalid JSON: no value")
	case errors.As(err, &typ):
		return fmt.Errorf("unexpected JSON: %s", typ.Error())
	}
	return err
}

// StreamAnswer is the streamed call both providers make: the answer read
// from the event stream with read, or, from a server that answered one
// JSON document instead, decoded into an R, turned into a Response by
// whole, and emitted at once (EmitWhole).
func StreamAnswer[R any](ctx context.Context, c *Client, path string, body any, emit func(agent.Delta),
	read func(*SSE) (*agent.Response, error), whole func(raw []byte, res *R) (*agent.Response, error)) (*agent.Response, error) {
	var out *agent.Response
	err := c.Stream(ctx, path, body,
		func(s *SSE) (err error) {
			out, err = read(s)
			return err
		},
		func(raw []byte) error {
			var res R
			if err := c.Unmarshal(raw, &res); err != nil {
				return err
			}
			r, err := whole(raw, &res)
			if err != nil {
				return err
			}
			out = EmitWhole(r, emit)
			return nil
		})
	if err != nil {
		return nil, err
	}
	return out, nil
}
