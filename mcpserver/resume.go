package mcpserver

import (
	"bytes"
	"container/list"
	"context"
	"fmt"
	"iter"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultResumeBufferBytes is the default of Config.ResumeBufferBytes.
const DefaultResumeBufferBytes = 4 << 20

// resumeRetry is the reconnection delay the priming event of a POST's SSE
// answer tells the client (its retry: field): long enough that a client
// whose stream broke does not hammer the server, short enough that a call's
// answer is not held up for long.
const resumeRetry = time.Second

// Costs counted against ResumeBufferBytes beside an event's bytes, so that
// many small or empty events (every POST stream holds at least its empty
// priming event) cannot hold memory the bound does not see. They are about
// what the structures take on a 64-bit platform, rounded up.
const (
	resumeStreamCost = 256 // a stream: its struct, map entry, list element and ids
	resumeEventCost  = 32  // an event: its slice header in the stream
)

// resumeStore is the [mcp.EventStore] behind the handshake era's resumable
// SSE streams (a POST's answer, the GET stream), so that a client whose
// stream broke can GET the rest with Last-Event-ID. It holds at most max
// bytes across all sessions (events and the costs above; passed by at most
// the event being added, which is stored even when larger than max: the
// go-sdk delivers it live anyway); beyond, it drops
// the streams touched longest ago, whole: a client resuming one of those
// gets a 400 from the go-sdk ("failed to replay events") rather than part
// of its answer. The go-sdk's MemoryEventStore bounds event bytes only: the
// stream of every POST of a session stays until the session ends, so a
// client making calls for long could grow it without bound.
type resumeStore struct {
	mu       sync.Mutex
	max      int64
	n        int64                               // bytes counted against max
	sessions map[string]map[string]*resumeStream // session id → stream id → stream
	lru      list.List                           // of *resumeStream, least recently touched first
}

type resumeStream struct {
	session, id string
	// first is the stream index of data[0]; -1 when unknown: the stream
	// was dropped and appended to again, so no index can be resumed.
	first int
	data  [][]byte
	cost  int64 // what the stream counts in n
	elem  *list.Element
}

func newResumeStore(max int64) *resumeStore {
	return &resumeStore{max: max, sessions: map[string]map[string]*resumeStream{}}
}

var _ mcp.EventStore = (*resumeStore)(nil)

// stream returns the stream, creating it (first index first) when absent,
// and marks it touched. s.mu is held.
func (s *resumeStore) stream(session, id string, first int) *resumeStream {
	streams := s.sessions[session]
	if streams == nil {
		streams = map[string]*resumeStream{}
		s.sessions[session] = streams
	}
	st := streams[id]
	if st == nil {
		st = &resumeStream{session: session, id: id, first: first}
		if id != "" { // the GET stream's, one a session, is bounded by MaxSessions
			st.cost = resumeStreamCost + int64(len(session)+len(id))
		}
		streams[id] = st
		s.n += st.cost
	}
	if st.elem == nil {
		st.elem = s.lru.PushBack(st)
	} else {
		s.lru.MoveToBack(st.elem)
	}
	return st
}

// Open implements [mcp.EventStore.Open].
func (s *resumeStore) Open(_ context.Context, session, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.purge(s.stream(session, id, 0), 0)
	return nil
}

// Append implements [mcp.EventStore.Append].
func (s *resumeStore) Append(_ context.Context, session, id string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stream(session, id, -1) // absent: dropped since Open, its index is lost
	cost := int64(len(data)) + resumeEventCost
	s.purge(st, cost)
	st.data = append(st.data, data)
	st.cost += cost
	s.n += cost
	return nil
}

// purge drops streams, least recently touched first, until adding more
// bytes to keep fits the bound; when keep is all that is left, its oldest
// events go (the event being added is stored even if it alone is over the
// bound: the go-sdk delivers it live anyway). s.mu is held.
func (s *resumeStore) purge(keep *resumeStream, more int64) {
	for s.n+more > s.max {
		e := s.lru.Front()
		if e == nil {
			return
		}
		st := e.Value.(*resumeStream)
		if st != keep {
			s.drop(st)
			continue
		}
		if len(st.data) == 0 {
			return
		}
		c := int64(len(st.data[0])) + resumeEventCost
		st.data[0] = nil
		st.data = st.data[1:]
		if st.first >= 0 {
			st.first++
		}
		st.cost -= c
		s.n -= c
	}
}

// drop forgets a POST's stream, and empties a session's GET stream
// (stream id ""), which stays, its numbering kept: the go-sdk replays it
// to every GET, one without Last-Event-ID included, and a stream it does
// not know would fail that GET. s.mu is held.
func (s *resumeStore) drop(st *resumeStream) {
	s.lru.Remove(st.elem)
	st.elem = nil
	s.n -= st.cost
	if st.id == "" {
		if st.first >= 0 {
			st.first += len(st.data)
		}
		st.data, st.cost = nil, 0
		return
	}
	s.forget(st)
}

// forget removes a stream from its session. s.mu is held.
func (s *resumeStore) forget(st *resumeStream) {
	streams := s.sessions[st.session]
	delete(streams, st.id)
	if len(streams) == 0 {
		delete(s.sessions, st.session)
	}
}

// After implements [mcp.EventStore.After].
func (s *resumeStore) After(_ context.Context, session, id string, index int) iter.Seq2[[]byte, error] {
	s.mu.Lock()
	data, err := func() ([][]byte, error) {
		st := s.sessions[session][id]
		if st == nil {
			return nil, fmt.Errorf("resuming stream %q: %w (resume_buffer_bytes: %d)", id, mcp.ErrEventsPurged, s.max)
		}
		start := index + 1 - st.first
		if index < 0 && id == "" {
			// A GET without Last-Event-ID: not a resumption, so whatever
			// is kept, rather than a 400 once the first events went.
			start = 0
		}
		if st.first < 0 || start < 0 {
			return nil, fmt.Errorf("resuming stream %q after event %d: %w (resume_buffer_bytes: %d)", id, index, mcp.ErrEventsPurged, s.max)
		}
		if start >= len(st.data) {
			return nil, nil
		}
		return slices.Clone(st.data[start:]), nil
	}()
	s.mu.Unlock()
	return func(yield func([]byte, error) bool) {
		if err != nil {
			yield(nil, err)
			return
		}
		for _, d := range data {
			if !yield(d, nil) {
				return
			}
		}
	}
}

// SessionClosed implements [mcp.EventStore.SessionClosed].
func (s *resumeStore) SessionClosed(_ context.Context, session string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.sessions[session] {
		if st.elem != nil {
			s.lru.Remove(st.elem)
		}
		s.n -= st.cost
		s.forget(st)
	}
	return nil
}

// usage reports the bytes counted against the bound and the streams held.
func (s *resumeStore) usage() (n int64, streams int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n, s.lru.Len()
}

// primeHold is how long the priming event of a POST's SSE answer may wait
// to leave with the first message (see primeWriter): about what a quick
// call takes on a busy machine, short beside the retry: delay a client
// that lost its stream waits anyway.
const primeHold = 100 * time.Millisecond

// primeWriter adds the retry: field to the priming event the go-sdk writes
// first on a POST's SSE answer (SEP-1699: an id the client can resume from,
// and how long to wait before it does), which the go-sdk (v1.8.0) writes
// without one. And it holds back that event's flush for up to primeHold:
// the go-sdk flushes the priming event on its own, so a quick call was
// answered in two writes (and two reads by the client) where the bare
// go-sdk, without priming, needs one; held, the event leaves with the
// first message's flush, or on its own once primeHold has passed (a long
// call's stream is resumable from then on; one broken before, with
// nothing sent, is not, as without priming). It looks at the first write
// only; every later write, and deadlines (through Unwrap), go straight to
// the writer below.
type primeWriter struct {
	http.ResponseWriter
	// mu orders the go-sdk's writes (from the goroutines answering the
	// POST's calls) with held's flush, which runs on the timer's
	// goroutine: net/http's writer is not safe for concurrent use. It is
	// held across those writes, as the go-sdk holds its stream's lock;
	// each is bounded by the guard's write deadline.
	mu     sync.Mutex
	looked bool
	// held flushes the priming event when no message came within
	// primeHold; nil once the event left, or when there is none.
	held *time.Timer
	done bool // the handler returned: the timer must not touch the writer
}

// primePrefix is how the go-sdk's priming event begins (event name, then
// its id line).
var primePrefix = []byte("event: prime\nid: ")

func (p *primeWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.looked {
		p.stopHold() // this write's flush takes the priming event along
		return p.ResponseWriter.Write(b)
	}
	p.looked = true
	if !bytes.HasPrefix(b, primePrefix) || p.Header().Get("Content-Type") != "text/event-stream" {
		return p.ResponseWriter.Write(b)
	}
	end := bytes.IndexByte(b[len(primePrefix):], '\n')
	if end < 0 {
		return p.ResponseWriter.Write(b)
	}
	end += len(primePrefix) + 1 // just past the id line
	out := b
	if !bytes.HasPrefix(b[end:], []byte("retry:")) { // else a go-sdk that writes it itself
		out = make([]byte, 0, len(b)+24)
		out = append(out, b[:end]...)
		out = append(out, "retry: "...)
		out = strconv.AppendInt(out, resumeRetry.Milliseconds(), 10)
		out = append(out, '\n')
		out = append(out, b[end:]...)
	}
	if _, err := p.ResponseWriter.Write(out); err != nil {
		return 0, err
	}
	p.held = time.AfterFunc(primeHold, p.release)
	return len(b), nil
}

// stopHold forgets the hold: the event leaves with the next flush. p.mu
// is held.
func (p *primeWriter) stopHold() {
	if p.held != nil {
		p.held.Stop()
		p.held = nil
	}
}

// release sends the held priming event: no message came within primeHold.
func (p *primeWriter) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held == nil || p.done {
		return
	}
	p.held = nil
	p.flush()
}

// Flush keeps the writer an http.Flusher for code that asserts it; the
// priming event's own flush is held back (see primeWriter).
func (p *primeWriter) Flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held != nil {
		return
	}
	p.flush()
}

// flush flushes the writer below. p.mu is held.
func (p *primeWriter) flush() {
	if f, ok := p.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// finish is called as the handler returns: a held event goes out with the
// end of the response, and the timer stays off the writer.
func (p *primeWriter) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = true
	p.stopHold()
}

// Unwrap lets http.ResponseController reach the writer below (the
// guard's write deadlines; a flush through it skips the hold).
func (p *primeWriter) Unwrap() http.ResponseWriter { return p.ResponseWriter }
