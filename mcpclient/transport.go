package mcpclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/axocoatl/axocoatl-go/internal/tracehttp"

	"github.com/axocoatl/axocoatl-go/internal/scrub"
	"github.com/axocoatl/axocoatl-go/secret"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
)

// dialer makes the transport of one connection attempt and remembers what
// it needs to clean up afterwards (the child process).
type dialer struct {
	cfg    ServerConfig
	log    *slog.Logger
	redact *scrub.Scrubber
	http   *http.Client // shared by the server's attempts; nil for stdio
	// spanAttrs are the attributes every call's span has (the method, the
	// server's name and network attributes), built once.
	spanAttrs []attribute.KeyValue
	// onListChanged, when set, is called for each list_changed
	// notification of a stdio server, which the SDK then never sees.
	onListChanged func()
	// oauth, when set, authorizes the HTTP requests (see oauth.go).
	oauth *oauthClient

	mu      sync.Mutex
	pgid    int         // the current child's process group (its pid), 0 if none
	exited  string      // how the current child ended, once known
	stderr  *stderrTail // the current child's stderr, for error messages
	isStdio bool
}

// prop, when set, puts a call's trace context in its HTTP headers.
func newDialer(cfg ServerConfig, log *slog.Logger, r *scrub.Scrubber, prop propagation.TextMapPropagator) *dialer {
	d := &dialer{cfg: cfg, log: log, redact: r, isStdio: cfg.Dial == nil && cfg.Command != "", spanAttrs: spanAttrs(cfg)}
	if cfg.URL != "" && cfg.Dial == nil {
		base := http.DefaultTransport.(*http.Transport).Clone()
		d.http = &http.Client{
			// No overall timeout: the standalone SSE stream is long-lived.
			// Every request is bounded by its context instead.
			Transport: &headerTransport{base: base, headers: cfg.Headers, log: log, server: cfg.Name, prop: prop},
			// A redirect could carry the headers to another host.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return d
}

func (d *dialer) transport(ctx context.Context) (mcp.Transport, error) {
	switch {
	case d.cfg.Dial != nil:
		return d.cfg.Dial(ctx)
	case d.cfg.URL != "":
		t := &mcp.StreamableClientTransport{Endpoint: d.cfg.URL, HTTPClient: d.http, MaxRetries: 2}
		if d.oauth != nil {
			t.OAuthHandler = d.oauth
		}
		return t, nil
	}
	cmd := exec.Command(d.cfg.Command, d.cfg.Args...)
	cmd.Env = childEnv(d.cfg)
	cmd = dieWithParent(cmd)
	tail := &stderrTail{server: d.cfg.Name, log: d.log, redact: d.redact}
	cmd.Stderr = tail
	// The child and everything it spawns (npx → sh → node) share a process
	// group, so a stop or a crash recovery can end all of them.
	setProcessGroup(cmd)
	// Wait returns at most this long after the child exits even if a
	// grandchild still holds stderr open.
	cmd.WaitDelay = time.Second
	d.mu.Lock()
	d.pgid, d.exited, d.stderr = 0, "", tail
	d.mu.Unlock()
	return &cmdTransport{cmd: cmd, d: d}, nil
}

// cmdTransport is the go-sdk's [mcp.CommandTransport] with two differences: it
// learns the child's pid (read on the goroutine that started it: [exec.Cmd]
// is not safe to read concurrently), and it reads the child's stdout
// through listChangedFilter, so that a server flooding
// notifications/tools/list_changed costs a line check each, not a JSON-RPC
// message through the SDK.
type cmdTransport struct {
	cmd *exec.Cmd
	d   *dialer
}

func (t *cmdTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	pid := t.cmd.Process.Pid
	t.d.mu.Lock()
	t.d.pgid = pid
	t.d.mu.Unlock()
	if ctx.Err() != nil { // the attempt ended while the child started
		killProcessGroup(pid)
	}
	var r io.ReadCloser = io.NopCloser(stdout) // the connection closes by closing stdin
	if t.d.onListChanged != nil {
		r = &listChangedFilter{r: bufio.NewReaderSize(stdout, 64<<10), signal: t.d.onListChanged}
	}
	conn, err := (&mcp.IOTransport{Reader: r, Writer: &childStdin{WriteCloser: stdin, cmd: t.cmd, grace: DefaultStopTimeout}}).Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &cmdConn{Connection: conn, d: t.d, pages: pageBound{maxTools: t.d.cfg.maxTools(), lists: map[jsonrpc.ID]bool{}}}, nil
}

// childStdin closes the session the way the MCP spec and the go-sdk's
// [mcp.CommandTransport] do: close the child's stdin, wait for it to exit, then
// SIGTERM, then SIGKILL, each after grace. Close returns the child's Wait
// error, which tells how it ended.
type childStdin struct {
	io.WriteCloser
	cmd   *exec.Cmd
	grace time.Duration
}

func (c *childStdin) Close() error {
	_ = c.WriteCloser.Close()
	res := make(chan error, 1)
	go func() { res <- c.cmd.Wait() }()
	wait := func() (error, bool) {
		t := time.NewTimer(c.grace)
		defer t.Stop()
		select {
		case err := <-res:
			return err, true
		case <-t.C:
			return nil, false
		}
	}
	if err, ok := wait(); ok {
		return err
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err == nil {
		if err, ok := wait(); ok {
			return err
		}
	}
	_ = c.cmd.Process.Kill()
	if err, ok := wait(); ok {
		return err
	}
	return errors.New("unresponsive subprocess")
}

// listChangedFilter passes a child's stdout through, except the lines that
// are notifications/tools/list_changed: those are dropped and signal
// instead (it only wakes the supervisor, which merges them).
type listChangedFilter struct {
	r       *bufio.Reader
	signal  func()
	out     []byte // the rest of the current chunk, to hand out
	midLine bool   // the last chunk did not end its line
	err     error
	// lastDrop is when the last notification was dropped.
	lastDrop time.Time
}

// notifyPace is the least time between two reads of a stdio server's
// stdout while it sends list_changed notifications back to back.
const notifyPace = 10 * time.Millisecond

// maxNotifyLine: a list_changed notification is one short line; longer
// lines are passed through unexamined.
const maxNotifyLine = 256

var listChangedMethod = []byte(`"notifications/tools/list_changed"`)

func (f *listChangedFilter) Read(p []byte) (int, error) {
	for len(f.out) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		chunk, err := f.r.ReadSlice('\n')
		if err != nil && err != bufio.ErrBufferFull {
			f.err = err
		}
		ends := len(chunk) > 0 && chunk[len(chunk)-1] == '\n'
		if !f.midLine && ends && len(chunk) <= maxNotifyLine && isListChanged(chunk) {
			f.signal()
			// A server sending them back to back is read in batches: at
			// most one read a notifyPace while they come, so a flood
			// costs few wake-ups; a reply behind them waits that long.
			if f.r.Buffered() == 0 {
				if wait := notifyPace - time.Since(f.lastDrop); wait > 0 {
					time.Sleep(wait)
				}
			}
			f.lastDrop = time.Now()
			continue
		}
		f.midLine = !ends
		f.out = chunk // valid until the next ReadSlice, which waits for out to drain
	}
	n := copy(p, f.out)
	f.out = f.out[n:]
	return n, nil
}

func (f *listChangedFilter) Close() error { return nil }

func isListChanged(line []byte) bool {
	if !bytes.Contains(line, listChangedMethod) {
		return false
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	return json.Unmarshal(line, &msg) == nil && msg.ID == nil && msg.Method == "notifications/tools/list_changed"
}

type cmdConn struct {
	mcp.Connection
	d       *dialer
	pagesMu sync.Mutex // Write is called concurrently
	pages   pageBound
}

// Close is the SDK's: close stdin, wait, SIGTERM, SIGKILL. Its error is
// the child's Wait error, which tells how it ended.
func (c *cmdConn) Close() error {
	err := c.Connection.Close()
	how := "exited"
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		how = ee.ProcessState.String()
	}
	c.d.mu.Lock()
	c.d.exited = how
	c.d.mu.Unlock()
	return err
}

// reap ends whatever the last attempt left of its process group. The
// session's Close has already asked the child to go (stdin closed, SIGTERM,
// SIGKILL); this catches grandchildren that outlive it.
func (d *dialer) reap() {
	d.mu.Lock()
	pgid := d.pgid
	if d.exited != "" {
		// The child has been waited for: after this kill nothing of its
		// group is left, and the id is free for the kernel to give to
		// another process group, which a later reap must not hit.
		d.pgid = 0
	}
	d.mu.Unlock()
	killProcessGroup(pgid)
}

// pid is the current child's process id, 0 if none.
func (d *dialer) pid() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.pgid
}

// explain adds what the child process said or how it ended to a connect
// error, which is otherwise only "EOF" or "connection closed".
func (d *dialer) explain(err error) error {
	d.mu.Lock()
	exited, tail := d.exited, d.stderr
	d.mu.Unlock()
	if !d.isStdio {
		return err
	}
	var parts []string
	if exited != "" {
		parts = append(parts, "process "+exited)
	}
	if tail != nil {
		if last := tail.last(); last != "" {
			parts = append(parts, "stderr: "+last)
		}
	}
	if len(parts) == 0 {
		return err
	}
	return fmt.Errorf("%w (%s)", err, strings.Join(parts, "; "))
}

func (d *dialer) close() {
	if d.http != nil {
		d.http.CloseIdleConnections()
	}
}

// childEnv layers the configured env onto the inherited environment, or
// onto only PATH and HOME when inherit_env is false.
func childEnv(cfg ServerConfig) []string {
	var env []string
	if cfg.inheritEnv() {
		env = os.Environ()
	} else {
		for _, k := range []string{"PATH", "HOME"} {
			if v, ok := os.LookupEnv(k); ok {
				env = append(env, k+"="+v)
			}
		}
	}
	keys := make([]string, 0, len(cfg.Env))
	for k := range cfg.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		// exec.Cmd keeps the last value of a duplicated key.
		env = append(env, k+"="+cfg.Env[k].Reveal())
	}
	return env
}

// headerTransport adds the configured headers to every request, and the
// trace context of the request's span (a tools/call's: traceparent,
// tracestate; the same as its _meta).
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]secret.Secret
	log     *slog.Logger
	server  string
	prop    propagation.TextMapPropagator // nil: no trace headers
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		req = req.Clone(req.Context())
		for k, v := range t.headers {
			req.Header.Set(k, v.Reveal())
		}
	}
	if t.prop != nil {
		req = tracehttp.InjectHeaders(t.prop, req, len(t.headers) > 0)
	}
	resp, err := t.base.RoundTrip(req)
	if err == nil && resp.Body != nil {
		ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		resp.Body = &frameLimit{ReadCloser: resp.Body, sse: ct == "text/event-stream", over: func() {
			// The go-sdk does not always pass the read error on (a cut SSE
			// stream ends the call as "terminated without response").
			t.log.Warn("mcp server answer cut", "server", t.server, "error", errFrameTooLarge)
		}}
	}
	return resp, err
}

// maxFrame bounds one message from an HTTP server: a JSON body, or one
// event of an SSE stream (a stream as a whole is unbounded: the standalone
// one lives as long as the session). The go-sdk buffers each whole, so a
// server that never ends one would fill memory until the call's timeout.
// The same cap as the go-sdk's on a stdio frame.
const maxFrame = mcp.DefaultMaxLineLength

var errFrameTooLarge = fmt.Errorf("mcp server answer over %d MiB", maxFrame>>20)

// frameLimit fails a response body with errFrameTooLarge once one message
// passes maxFrame.
type frameLimit struct {
	io.ReadCloser
	sse  bool
	over func() // called once, when the cap is passed
	n    int    // bytes of the current message
	eols int    // line ends in a row (SSE: two end an event)
	cr   bool   // the last byte was '\r' (of a "\r\n" counted once)
}

func (f *frameLimit) Read(p []byte) (int, error) {
	if f.n > maxFrame {
		return 0, errFrameTooLarge
	}
	n, err := f.ReadCloser.Read(p)
	if !f.sse {
		f.n += n
	} else {
		f.scan(p[:n])
	}
	if f.n > maxFrame {
		f.over()
		return n, errFrameTooLarge
	}
	return n, err
}

// scan counts the bytes of the current SSE event in b, which ends at an
// empty line. The bytes between line ends are skipped a run at a time
// (bytes.IndexByte, not a branch per byte): counted one by one, a 16 MiB
// flood cost 0.16 s of CPU, and 3 to 8 s under the race detector, which
// made the cut slower than the flood it guards against on a loaded
// machine (BenchmarkFrameLimitSSE).
func (f *frameLimit) scan(b []byte) {
	n, eols, cr := f.n, f.eols, f.cr
	for len(b) > 0 && n <= maxFrame { // past the cap: cut, even if the event ends later in b
		i := bytes.IndexByte(b, '\n')
		run := b
		if i >= 0 {
			run = b[:i]
		}
		if j := bytes.IndexByte(run, '\r'); j >= 0 {
			i = j
		}
		if i < 0 {
			i = len(b)
		}
		if i > 0 { // a run of the event's bytes
			n += i
			eols, cr = 0, false
			b = b[i:]
			continue
		}
		if b[0] == '\r' {
			eols++
			cr = true
		} else if cr { // the '\n' of a "\r\n", counted once
			cr = false
		} else {
			eols++
		}
		b = b[1:]
		if eols >= 2 {
			n = 0
		}
	}
	f.n, f.eols, f.cr = n, eols, cr
}

func (t *headerTransport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// stderrTail keeps the last lines of a child's stderr, for error messages,
// and logs each line at debug level. What nothing emits costs nothing: the
// lines are kept raw in a fixed ring (no allocation per line once warm) and
// redacted only when one is logged or quoted in an error.
//
// A child that floods stderr is slowed down rather than followed: Write is
// paced to one call per stderrPace, so the pipe fills and the child blocks
// on its writes; reading a flood costs at most about 100 reads a second.
type stderrTail struct {
	server string
	log    *slog.Logger
	redact *scrub.Scrubber

	mu        sync.Mutex
	buf       []byte // incomplete line
	skip      bool   // dropping the rest of a line already flushed for length
	ring      [tailLines][]byte
	next      int // ring slot of the next line
	lines     int // lines in the ring, at most tailLines
	lastWrite time.Time
	// Logging budget: at most maxLoggedPerSec lines a second are logged;
	// the others are counted and reported once the second is over.
	window  time.Time
	logged  int
	dropped int
}

const (
	tailLines       = 16 // kept; errors quote at most shownLines of them
	shownLines      = 6
	maxStderrLine   = 4096 // an unfinished line is flushed at this length
	maxLoggedLine   = 512  // a line is cut to this length for logs and errors
	maxLoggedPerSec = 100
	// stderrPace is the least time between two reads of a child's stderr
	// (each up to 32 KiB): at most ~3 MiB/s, so a flood costs the daemon
	// a few hundred microseconds of CPU a second, and a child that writes
	// faster waits.
	stderrPace = 10 * time.Millisecond
)

func (s *stderrTail) Write(p []byte) (int, error) {
	if wait := stderrPace - time.Since(s.lastWrite); wait > 0 {
		time.Sleep(wait) // only os/exec's copying goroutine calls Write
	}
	n := len(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastWrite = time.Now()
	debug := s.log.Enabled(context.Background(), slog.LevelDebug)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if s.skip {
			// The rest of a line flushed for length is dropped: logged on
			// its own it could start with the tail of a secret that the
			// flush cut in two, which redaction cannot recognize.
			if i < 0 {
				return n, nil
			}
			s.skip = false
			p = p[i+1:]
			continue
		}
		if i < 0 {
			s.buf = append(s.buf, p...)
			if len(s.buf) > maxStderrLine { // a line without end: keep it bounded
				s.addLine(s.buf[:maxStderrLine], debug)
				s.buf = s.buf[:0]
				s.skip = true
			}
			return n, nil
		}
		line := p[:i]
		if len(s.buf) > 0 {
			s.buf = append(s.buf, line...)
			line = s.buf
		}
		if len(line) > maxStderrLine {
			line = line[:maxStderrLine]
		}
		s.addLine(line, debug)
		s.buf = s.buf[:0]
		p = p[i+1:]
	}
	return n, nil
}

// addLine keeps a raw copy of line in the ring and logs it when debug
// logging is on.
func (s *stderrTail) addLine(line []byte, debug bool) {
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	s.ring[s.next] = append(s.ring[s.next][:0], line...)
	s.next = (s.next + 1) % tailLines
	s.lines = min(s.lines+1, tailLines)
	if !debug {
		return
	}
	now := time.Now()
	if now.Sub(s.window) >= time.Second {
		if s.dropped > 0 {
			s.log.Debug("mcp server stderr lines not logged", "server", s.server, "lines", s.dropped, "limit_per_second", maxLoggedPerSec)
		}
		s.window, s.logged, s.dropped = now, 0, 0
	}
	if s.logged >= maxLoggedPerSec {
		s.dropped++
		return
	}
	s.logged++
	s.log.Debug("mcp server stderr", "server", s.server, "line", s.emit(line))
}

// emit makes a line fit to show: redacted, then cut. Redact before
// cutting: a cut through a secret would leave its head, which redaction
// no longer recognizes.
func (s *stderrTail) emit(raw []byte) string {
	line := strings.TrimSpace(s.redact.String(string(raw)))
	if len(line) > maxLoggedLine {
		cut := maxLoggedLine
		for cut > 0 && !utf8.RuneStart(line[cut]) {
			cut--
		}
		line = line[:cut] + "…"
	}
	return line
}

// last says what the child's last lines explain: the lines that look like
// errors (npm's "404 … is not in this registry" sits above its last lines,
// under a dozen of its own), else the last few.
func (s *stderrTail) last() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := make([][]byte, 0, s.lines)
	for i := s.lines; i > 0; i-- {
		kept = append(kept, s.ring[(s.next-i+tailLines)%tailLines])
	}
	var pick [][]byte
	for _, l := range kept {
		if explains(l) {
			pick = append(pick, l)
		}
	}
	if len(pick) == 0 {
		pick = kept[max(0, len(kept)-3):]
	}
	pick = pick[max(0, len(pick)-shownLines):]
	out := make([]string, 0, len(pick))
	for _, l := range pick {
		out = append(out, s.emit(l))
	}
	return strings.Join(out, " | ")
}

// errorWords mark a stderr line that says what went wrong.
var errorWords = []string{"error", "404", "not found", "no such", "denied", "fail", "panic", "traceback", "exception", "cannot", "refused", "fatal"}

// explains reports whether a stderr line looks like an error worth quoting,
// and says more than its tool's prefix ("npm error 404" alone does not).
func explains(line []byte) bool {
	l := bytes.ToLower(bytes.TrimSpace(line))
	for _, prefix := range [][]byte{[]byte("npm error"), []byte("npm err!"), []byte("error:")} {
		l = bytes.TrimSpace(bytes.TrimPrefix(l, prefix))
	}
	if len(bytes.Trim(l, "0123456789 ")) < 4 {
		return false
	}
	for _, w := range errorWords {
		if bytes.Contains(l, []byte(w)) {
			return true
		}
	}
	return false
}
