package httpguard

import (
	"net/http"
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
	_ = d.conn.SetWriteDeadline(now.Add(d.timeout))
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
		_ = d.conn.SetWriteDeadline(time.Now().Add(d.timeout))
	}
}
