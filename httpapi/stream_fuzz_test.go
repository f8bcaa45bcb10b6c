package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
)

// wsFuzzStream is the API served on a real listener with approval hooks
// that record each Resolve call; its one WebSocket client is kept across
// fuzz inputs and dialed again whenever the server closes it.
type wsFuzzStream struct {
	url  string
	conn *websocket.Conn

	mu    sync.Mutex
	calls []resolveCall
}

type resolveCall struct{ id, decision, remember, err string }

func newWSFuzzStream(tb testing.TB) *wsFuzzStream {
	tb.Helper()
	s := &wsFuzzStream{}
	srv, _, _ := serveAPI(tb, Config{Approvals: Approvals{
		Pending: func(context.Context) []any { return []any{map[string]any{"approval_id": "ok-1"}} },
		// Ids starting with "ok" resolve; any other fails with a text
		// naming the call, which must come back in an approval_failed.
		Resolve: func(_ context.Context, id, decision, remember string) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			c := resolveCall{id: id, decision: decision, remember: remember}
			if !strings.HasPrefix(id, "ok") {
				c.err = fmt.Sprintf("approval call %d: not found", len(s.calls))
			}
			s.calls = append(s.calls, c)
			if c.err != "" {
				return errors.New(c.err)
			}
			return nil
		},
	}})
	s.url = "ws" + strings.TrimPrefix(srv.URL, "http") + "/api/events"
	tb.Cleanup(func() {
		if s.conn != nil {
			s.conn.CloseNow()
		}
	})
	return s
}

// dial opens the stream and checks the ready frame: the server is up.
func (s *wsFuzzStream) dial(t *testing.T, ctx context.Context) {
	t.Helper()
	conn, _, err := websocket.Dial(ctx, s.url, &websocket.DialOptions{HTTPClient: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}})
	if err != nil {
		t.Fatalf("dial after the previous input: %v", err)
	}
	s.conn = conn
	f := s.read(t, ctx)
	if f.Kind != "ready" || len(f.PendingApprovals) != 1 {
		t.Fatalf("first frame %+v, want ready with the pending approval", f)
	}
}

// read reads one server frame, which must be a JSON text frame in valid
// UTF-8.
func (s *wsFuzzStream) read(t *testing.T, ctx context.Context) frame {
	t.Helper()
	typ, data, err := s.conn.Read(ctx)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	var f frame
	if typ != websocket.MessageText || !utf8.Valid(data) || json.Unmarshal(data, &f) != nil {
		t.Fatalf("server sent a %v frame %q, want JSON text", typ, data)
	}
	return f
}

func (s *wsFuzzStream) callsSince(n int) []resolveCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]resolveCall(nil), s.calls[n:]...)
}

// FuzzEventStreamFrames sends one client frame (text or binary, any bytes)
// on a real WebSocket to the server's GET /api/events, then a valid frame
// whose answer is known, and checks, whatever the frame:
//   - the server answers within 5 s and stays up (a later dial gets ready);
//   - a frame over the 64 KiB read limit closes the connection with 1009
//     (message too big), without reaching the approval module;
//   - otherwise the connection stays usable: the next frame's answer comes;
//   - every server frame is JSON text in valid UTF-8;
//   - the frame reaches Resolve only as a valid approve (non-empty id,
//     decision allow|deny, remember once|always); a resolved one gets no
//     answer, a failed one exactly one {"kind":"error"} with code
//     approval_failed and Resolve's text, and anything else exactly one
//     with code bad_request and a short message (it never echoes the frame).
//
// Run: go test -run '^$' -fuzz FuzzEventStreamFrames -parallel 1 ./httpapi/
func FuzzEventStreamFrames(f *testing.F) {
	for _, seed := range []struct {
		binary bool
		frame  string
	}{
		{false, `{"cmd":"approve","approval_id":"ok-1","decision":"allow"}`},
		{false, `{"cmd":"approve","approval_id":"ok-1","decision":"deny","remember":"always"}`},
		{false, `{"cmd":"approve","approval_id":"missing","decision":"deny","remember":"once"}`},
		{false, `{"cmd":"approve","approval_id":"ok-1","decision":"maybe"}`},
		{false, `{"cmd":"approve","approval_id":"ok-1","decision":"allow","remember":"forever"}`},
		{false, `{"cmd":"approve","decision":"allow"}`},
		{false, `{"cmd":"approve","approval_id":7,"decision":"allow"}`},
		{false, `{"CMD":"approve","Approval_ID":"ok-2","DECISION":"allow"}`},
		{false, `{"cmd":"approve","approval_id":"ok\u0000","decision":"allow","cmd":"dance"}`},
		{false, `{"cmd":"dance"}`},
		{false, `{"cmd":"` + strings.Repeat("é", 100) + `"}`},
		{false, `{}`}, {false, `null`}, {false, `[]`}, {false, `"approve"`}, {false, `1e999`},
		{false, `not json`}, {false, `{"cmd":"approve"`}, {false, `{"cmd":"approve"} {}`},
		{false, "{\"cmd\":\"\xff\xfe\"}"}, {false, ""}, {false, "\x00"},
		{false, strings.Repeat("[", 100000)[:wsReadLimit]},
		{false, `{"cmd":"` + strings.Repeat("x", wsReadLimit-10) + `"}`},
		{false, `{"cmd":"` + strings.Repeat("x", wsReadLimit) + `"}`},
		{false, `{"cmd":"follow","task_id":"nope"}`},
		{false, `{"cmd":"follow"}`},
		{false, `{"cmd":"unfollow","task_id":"nope"}`},
		{false, `{"cmd":"execute","agent_id":"assistant","input":"hi","ref":"r"}`},
		{false, `{"cmd":"execute","agent_id":"ghost","input":"hi"}`},
		{false, `{"cmd":"execute","agent_id":"assistant"}`},
		{true, `{"cmd":"approve","approval_id":"ok-1","decision":"allow"}`},
		{true, "\x00\x01"},
		{true, ""},
	} {
		f.Add(seed.binary, []byte(seed.frame))
	}
	s := newWSFuzzStream(f)
	var nonce int
	f.Fuzz(func(t *testing.T, binary bool, data []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if s.conn == nil {
			s.dial(t, ctx)
		}
		nonce++
		sentinel := fmt.Sprintf(`{"cmd":"sentinel-%d"}`, nonce)
		before := len(s.callsSince(0))
		typ := websocket.MessageText
		if binary {
			typ = websocket.MessageBinary
		}
		if err := s.conn.Write(ctx, typ, data); err != nil {
			t.Fatalf("write: %v", err)
		}
		// The daemon may already have closed the connection (too big).
		s.conn.Write(ctx, websocket.MessageText, []byte(sentinel))

		if len(data) > wsReadLimit {
			_, got, err := s.conn.Read(ctx)
			if st := websocket.CloseStatus(err); st != websocket.StatusMessageTooBig {
				t.Fatalf("a %d-byte frame: read %q, %v; want the connection closed with 1009", len(data), got, err)
			}
			s.conn.CloseNow()
			s.conn = nil
			if c := s.callsSince(before); len(c) != 0 {
				t.Fatalf("an oversized frame reached Resolve: %+v", c)
			}
			s.dial(t, ctx) // the server is still up
			return
		}
		// A live-run command (execute, follow, unfollow) is answered by
		// the frames of live runs (docs/http-api.md), checked by the live
		// tests; its runs' frames and events may come later, in another
		// input's turn.
		var cmd clientFrame
		liveCmd := !binary && json.Unmarshal(data, &cmd) == nil && (cmd.Cmd == "execute" || cmd.Cmd == "follow" || cmd.Cmd == "unfollow")
		var replies []frame
		for {
			f := s.read(t, ctx)
			switch f.Kind {
			case "event", "run_started", "following", "delta", "usage", "tool_call_started", "tool_call_finished", "result", "run_error", "run_end":
				continue
			}
			if f.Kind != "error" || f.Error == nil {
				t.Fatalf("frame %+v, want only error frames", f)
			}
			if f.Error.Code == "bad_request" && strings.Contains(f.Error.Message, fmt.Sprintf(`"sentinel-%d"`, nonce)) {
				break
			}
			replies = append(replies, f)
		}
		calls := s.callsSince(before)
		if liveCmd {
			if len(calls) != 0 || len(replies) > 1 || len(replies) == 1 && len(replies[0].Error.Message) > 512 {
				t.Fatalf("live command %q: calls %+v, replies %+v", data, calls, replies)
			}
			return
		}
		switch {
		case len(calls) > 1:
			t.Fatalf("one frame resolved %d times: %+v", len(calls), calls)
		case len(calls) == 1:
			c := calls[0]
			if binary || c.id == "" || (c.decision != "allow" && c.decision != "deny") || (c.remember != "once" && c.remember != "always") {
				t.Fatalf("frame %q (binary %v) reached Resolve as %+v", data, binary, c)
			}
			if c.err == "" && len(replies) != 0 {
				t.Fatalf("a resolved approval got %+v", replies)
			}
			if c.err != "" && (len(replies) != 1 || replies[0].Error.Code != "approval_failed" || replies[0].Error.Message != c.err) {
				t.Fatalf("a failed approval got %+v, want one approval_failed %q", replies, c.err)
			}
		default:
			if len(replies) != 1 || replies[0].Error.Code != "bad_request" || replies[0].Error.Message == "" || len(replies[0].Error.Message) > 256 {
				t.Fatalf("frame %q (binary %v): replies %+v, want one bad_request with a short message", data, binary, replies)
			}
			// Precise: JSON is called invalid only when it is, and the
			// message speaks of the frame, not of Go types.
			msg := replies[0].Error.Message
			if !binary && json.Valid(data) == strings.HasPrefix(msg, "invalid JSON") {
				t.Fatalf("frame %q (valid JSON: %v) answered %q", data, json.Valid(data), msg)
			}
			if strings.Contains(msg, "Go ") || strings.Contains(msg, "clientFrame") {
				t.Fatalf("frame %q answered with Go internals: %q", data, msg)
			}
		}
	})
}
