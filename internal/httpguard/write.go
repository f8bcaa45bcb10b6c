package httpguard

import (
	"net/http"
	"sync/atomic"
	"time"
)

// deadlineWriter arms a write deadline on the connection before each write
// and flush, so that a client that stops reading is cut after WriteTimeout
// instead of holding the handler and its buffered answer for good. A
// deadline per write, not per response: a streamed answer (SSE, a long run)
// may last longer than WriteTimeout as long as the client keeps reading.
type deadlineWriter struct {
	http.ResponseWriter
	conn    interface{ SetWriteDeadline(time.Time) error }
	timeout time.Duration
	armed   time.Time // when the deadline was last set
	// limit is the deadline the handler set itself (UnixNano; 0: none),
	// which arm never extends: a handler that cuts a stuck stream short
	// (on Close) is not undone by the next write's re-arming. Atomic: a
	// handler sets it from another goroutine while a write is blocked.
	limit atomic.Int64
}

func newDeadlineWriter(w http.ResponseWriter, timeout time.Duration) *deadlineWriter {
	return &deadlineWriter{ResponseWriter: w, conn: deadlineSetter(w), timeout: timeout}
}

// deadlineSetter finds the connection's SetWriteDeadline through Unwrap
// chains (what http.ResponseController does, without its allocation per
// call). A writer without one (a test recorder) gets no deadline.
func deadlineSetter(w http.ResponseWriter) interface{ SetWriteDeadline(time.Time) error } {
	for {
		if s, ok := w.(interface{ SetWriteDeadline(time.Time) error }); ok {
			return s
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return nil
		}
		w = u.Unwrap()
	}
}

// readDeadlineSetter is deadlineSetter for reads.
func readDeadlineSetter(w http.ResponseWriter) interface{ SetReadDeadline(time.Time) error } {
	for {
		if s, ok := w.(interface{ SetReadDeadline(time.Time) error }); ok {
			return s
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return nil
		}
		w = u.Unwrap()
	}
}

// arm sets the deadline, at most every 1/8 of the timeout: a stream of small
// writes costs one timer update per interval, not one per write.
func (d *deadlineWriter) arm() {
	if d.conn == nil {
		return
	}
	now := time.Now()
	if now.Sub(d.armed) < d.timeout/8 {
		return
	}
	d.armed = now
	deadline := now.Add(d.timeout)
	if l := d.limit.Load(); l != 0 && deadline.UnixNano() > l {
		deadline = time.Unix(0, l)
	}
	_ = d.conn.SetWriteDeadline(deadline)
}

// SetWriteDeadline is found by http.ResponseController before the
// connection's: it sets the deadline and keeps it as the limit arm obeys
// (the zero time lifts the limit).
func (d *deadlineWriter) SetWriteDeadline(t time.Time) error {
	if d.conn == nil {
		return http.ErrNotSupported
	}
	if t.IsZero() {
		d.limit.Store(0)
	} else {
		d.limit.Store(t.UnixNano())
	}
	return d.conn.SetWriteDeadline(t)
}

func (d *deadlineWriter) WriteHeader(status int) {
	d.arm()
	d.ResponseWriter.WriteHeader(status)
}

func (d *deadlineWriter) Write(b []byte) (int, error) {
	d.arm()
	return d.ResponseWriter.Write(b)
}

// Flush keeps the writer an http.Flusher for handlers that assert it.
func (d *deadlineWriter) Flush() {
	d.arm()
	if f, ok := d.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController and WebSocket libraries reach the
// connection (hijacking, deadlines).
func (d *deadlineWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }

// finish bounds the final flush net/http does after the handler returns
// (net/http clears the deadline after it).
func (d *deadlineWriter) finish() {
	if d.conn != nil && !d.armed.IsZero() {
		d.armed = time.Time{} // arm at once, within the handler's limit
		d.arm()
	}
}
